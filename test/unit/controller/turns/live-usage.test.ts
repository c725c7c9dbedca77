/**
 * Live usage's durable writes (live-usage.ts): the first running figure at
 * once, later ones coalesced to one per interval (the newest), nothing
 * after the turn's result came, and nothing for a figure already durable.
 * Fake timers are its clock; the state is a stand-in holding one run.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { LiveUsage } from '../../../../src/controller/turns/live-usage.js';
import type { ControllerState } from '../../../../src/controller/controller-state.js';
import type { Turn } from '../../../../src/controller/turns/turn.js';
import type { RunRecord, TokenUsage } from '../../../../src/shared/records.js';
import { runRecord } from '../../../support/records.js';

const INTERVAL = 10_000;
const usage = (inputTokens: number): TokenUsage => ({
  inputTokens,
  outputTokens: 0,
  cacheCreationTokens: 0,
  cacheReadTokens: 0,
  thinkingTokens: 0,
  factoryCredits: null,
});

function bed() {
  let run: RunRecord = runRecord({ sessionId: 's', seq: 1, state: 'running', endedAt: null, reason: null, hasResult: false, usage: null });
  const writes: Array<TokenUsage | null> = [];
  let chain = Promise.resolve();
  const state = {
    log: { warn: () => undefined },
    halted: false,
    now: () => new Date(),
    reader: { invalidate: () => undefined },
    changed: () => undefined,
    run: () => run,
    serialized: <T>(fn: () => Promise<T>) => {
      const next = chain.then(fn);
      chain = next.then(
        () => undefined,
        () => undefined,
      );
      return next;
    },
    commit: async (change: { runs: RunRecord[] }) => {
      run = change.runs[0]!;
      writes.push(run.usage);
    },
  } as unknown as ControllerState;
  let held: TokenUsage | null = null;
  const turn = {
    runId: run.id,
    sessionId: 's',
    recordUsage: (u: TokenUsage) => (held = u),
    get usage() {
      return held;
    },
  } as unknown as Turn;
  const live = new LiveUsage(state, INTERVAL);
  const settle = async () => {
    await vi.advanceTimersByTimeAsync(0);
    await chain;
  };
  return { live, turn, writes, settle, end: () => (run = { ...run, state: 'succeeded' }) };
}

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

describe('live usage writes', () => {
  it('writes the first figure at once, then at most one per interval, the newest', async () => {
    const { live, turn, writes, settle } = bed();
    live.report(turn, usage(100));
    await settle();
    expect(writes).toEqual([usage(100)]);
    for (let i = 2; i <= 20; i++) live.report(turn, usage(100 * i));
    await vi.advanceTimersByTimeAsync(INTERVAL - 1);
    await settle();
    expect(writes).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    await settle();
    expect(writes).toEqual([usage(100), usage(2_000)]);
    // Quiet for a whole interval: the next figure is written at once.
    await vi.advanceTimersByTimeAsync(INTERVAL);
    live.report(turn, usage(2_100));
    await settle();
    expect(writes).toEqual([usage(100), usage(2_000), usage(2_100)]);
  });

  it('writes nothing once the result came: a pending write is dropped, a late report ignored (not held, not pending)', async () => {
    const { live, turn, writes, settle } = bed();
    live.report(turn, usage(100));
    await settle();
    live.report(turn, usage(200));
    live.forget(turn);
    await vi.advanceTimersByTimeAsync(INTERVAL * 2);
    live.report(turn, usage(300));
    await vi.advanceTimersByTimeAsync(INTERVAL * 2);
    await settle();
    expect(writes).toEqual([usage(100)]);
    expect(turn.usage).toEqual(usage(200));
    expect(vi.getTimerCount()).toBe(0);
  });

  it('skips a write when the run ended meanwhile or its figure is already durable', async () => {
    const { live, turn, writes, settle, end } = bed();
    live.report(turn, usage(100));
    await settle();
    live.report(turn, usage(100));
    await vi.advanceTimersByTimeAsync(INTERVAL);
    await settle();
    expect(writes).toHaveLength(1);
    live.report(turn, usage(200));
    end();
    await vi.advanceTimersByTimeAsync(INTERVAL);
    await settle();
    expect(writes).toEqual([usage(100)]);
  });
});
