/**
 * Usage sums: which runs are turns, null usage is unknown (not zero), no
 * double counting, and how runs are selected by session or date range.
 */
import { describe, expect, it } from 'vitest';
import { countsAsTurn, selectRunsForUsage, summarizeUsage, usageByModel, type UsageSource } from '../../../../src/controller/sessions/usage.js';
import type { TokenUsage } from '../../../../src/droid/notifications.js';
import type { RunRecord, RunState, SessionRecord } from '../../../../src/shared/records.js';
import { runRecord } from '../../../support/records.js';
import { RunEntry } from '../../../../src/store/formats/run-entry.js';
import { expectRejection } from '../../../support/assertions.js';

const T0 = Date.parse('2030-01-01T00:00:00.000Z');
const at = (minutes: number) => new Date(T0 + minutes * 60_000).toISOString();

function usage(over: Partial<TokenUsage> = {}): TokenUsage {
  return { inputTokens: 100, outputTokens: 20, cacheCreationTokens: 5, cacheReadTokens: 50, thinkingTokens: 7, factoryCredits: null, ...over };
}

let next = 0;
function run(over: Partial<RunRecord> = {}): RunRecord {
  next++;
  return runRecord({
    id: `run-${next}`,
    sessionId: 's1',
    seq: next,
    kind: 'send',
    requestKey: `key-${next}`,
    acceptedAt: at(0),
    startedAt: at(0),
    endedAt: at(1),
    usage: usage(),
    ...over,
  });
}

describe('which runs are turns', () => {
  it.each<[RunState, boolean, boolean]>([
    ['succeeded', true, true],
    ['interrupted', true, true],
    ['failed', true, true],
    ['timed_out', true, true],
    ['unknown', true, true],
    ['cancelled', true, true],
    ['cancelled', false, false],
    ['queued', false, false],
    // Live runs count with their usage so far (issue 22).
    ['starting', true, true],
    ['running', true, true],
    ['cancelling', true, true],
  ])('%s (started: %s) counts: %s', (state, started, counts) => {
    expect(countsAsTurn(run({ state, startedAt: started ? at(0) : null }))).toBe(counts);
  });
});

describe('summarizeUsage', () => {
  it('is all zeros with null credits for no runs', () => {
    expect(summarizeUsage([])).toEqual({
      turns: 0,
      turnsWithUsage: 0,
      turnsRunning: 0,
      final: true,
      inputTokens: 0,
      outputTokens: 0,
      cacheCreationTokens: 0,
      cacheReadTokens: 0,
      thinkingTokens: 0,
      factoryCredits: null,
    });
  });

  it('sums every token field over turns that reported usage', () => {
    const runs = [run(), run({ usage: usage({ inputTokens: 1, outputTokens: 2, cacheCreationTokens: 3, cacheReadTokens: 4, thinkingTokens: 5 }) })];
    expect(summarizeUsage(runs)).toEqual({
      turns: 2,
      turnsWithUsage: 2,
      turnsRunning: 0,
      final: true,
      inputTokens: 101,
      outputTokens: 22,
      cacheCreationTokens: 8,
      cacheReadTokens: 54,
      thinkingTokens: 12,
      factoryCredits: null,
    });
  });

  it('counts a turn with null usage as a turn without usage, adding nothing', () => {
    const s = summarizeUsage([run(), run({ usage: null, state: 'unknown' }), run({ usage: null, state: 'failed' })]);
    expect(s.turns).toBe(3);
    expect(s.turnsWithUsage).toBe(1);
    expect(s.inputTokens).toBe(100);
  });

  it('counts each run once even when it is passed twice (a replayed request is the same run)', () => {
    const once = run({ usage: usage({ factoryCredits: 2 }) });
    const s = summarizeUsage([once, once, { ...once }]);
    expect(s.turns).toBe(1);
    expect(s.inputTokens).toBe(100);
    expect(s.factoryCredits).toBe(2);
  });

  it('leaves out queued and never-started cancelled runs, even when they carry usage', () => {
    const s = summarizeUsage([
      run({ state: 'queued', startedAt: null, usage: usage({ inputTokens: 999 }) }),
      run({ state: 'cancelled', startedAt: null, cancelReason: 'superseded', usage: usage({ inputTokens: 999 }) }),
      run({ state: 'cancelled', cancelReason: 'cancelled', usage: usage({ inputTokens: 3 }) }),
    ]);
    expect(s.turns).toBe(1);
    expect(s.inputTokens).toBe(3);
    expect(s.final).toBe(true);
  });

  it('counts a live run with its running figure from memory, not final, and never twice', () => {
    const live = run({ state: 'running', usage: usage({ inputTokens: 10 }) });
    const ended = run({ usage: usage({ inputTokens: 3 }) });
    const inMemory = new Map([[live.id, usage({ inputTokens: 40 })]]);
    const s = summarizeUsage([live, ended, live], (id) => inMemory.get(id));
    expect(s).toMatchObject({ turns: 2, turnsRunning: 1, final: false, inputTokens: 43 });
    // No figure in memory yet: the record's (the last durable one).
    expect(summarizeUsage([live], () => undefined).inputTokens).toBe(10);
    // An ended run's figure is its record's, whatever memory still holds.
    expect(summarizeUsage([ended], () => usage({ inputTokens: 999 })).inputTokens).toBe(3);
  });

  it('is not final while a counted turn has an unknown outcome with a figure', () => {
    expect(summarizeUsage([run({ state: 'unknown', usage: usage(), usageLive: true })]).final).toBe(false);
    expect(summarizeUsage([run({ state: 'unknown', usage: null })]).final).toBe(true);
  });

  it('is not final when a turn ended with only a running figure (droid or its worker died before the final one)', () => {
    const died = run({ state: 'failed', usage: usage(), usageLive: true });
    expect(summarizeUsage([died, run()]).final).toBe(false);
    // The store's facts say the same without the record.
    expect(summarizeUsage([RunEntry.of(died)]).final).toBe(false);
    expect(summarizeUsage([RunEntry.of(run())]).final).toBe(true);
  });

  it('reports credits as null when none were reported, else their sum', () => {
    expect(summarizeUsage([run(), run()]).factoryCredits).toBeNull();
    expect(summarizeUsage([run({ usage: usage({ factoryCredits: 0.1 }) }), run({ usage: usage({ factoryCredits: 0.2 }) }), run()]).factoryCredits).toBe(0.3);
    expect(summarizeUsage([run({ usage: null }), run({ usage: usage({ factoryCredits: 4 }) })]).factoryCredits).toBe(4);
  });
});

function source(sessions: string[], runs: RunRecord[]): UsageSource {
  return {
    sessions: new Map(sessions.map((id) => [id, { id } as SessionRecord])),
    runs: new Map(runs.map((r) => [r.id, r])),
    runsBySession: (id) => runs.filter((r) => r.sessionId === id).sort((a, b) => a.seq - b.seq),
  };
}

describe('selectRunsForUsage', () => {
  const a1 = run({ sessionId: 'a', acceptedAt: at(0) });
  const a2 = run({ sessionId: 'a', acceptedAt: at(10), endedAt: at(100) });
  const b1 = run({ sessionId: 'b', acceptedAt: at(5) });
  const b2 = run({ sessionId: 'b', acceptedAt: at(20), state: 'queued', startedAt: null, endedAt: null });
  const store = source(['a', 'b', 'empty'], [a1, a2, b1, b2]);
  const idsOf = (runs: ReadonlyArray<{ id: string }>) => runs.map((r) => r.id).sort();

  it('selects one session', () => {
    expect(idsOf(selectRunsForUsage(store, { session: 'a' }))).toEqual(idsOf([a1, a2]));
    expect(selectRunsForUsage(store, { session: 'empty' })).toEqual([]);
    expectRejection(() => selectRunsForUsage(store, { session: 'nope' }), 'session_not_found');
  });

  it('selects every run by acceptance time in [after, before)', () => {
    expect(idsOf(selectRunsForUsage(store, { after: at(5), before: at(20) }))).toEqual(idsOf([a2, b1]));
    expect(idsOf(selectRunsForUsage(store, { after: at(5) }))).toEqual(idsOf([a2, b1, b2]));
    expect(idsOf(selectRunsForUsage(store, { before: at(5) }))).toEqual(idsOf([a1]));
    expect(idsOf(selectRunsForUsage(store, {}))).toEqual(idsOf([a1, a2, b1, b2]));
    // a2 ended long after `before`, but was accepted inside the range.
    expect(idsOf(selectRunsForUsage(store, { after: at(10), before: at(11) }))).toEqual(idsOf([a2]));
  });

  it('combines a session with a range', () => {
    expect(idsOf(selectRunsForUsage(store, { session: 'b', after: at(1) }))).toEqual(idsOf([b1, b2]));
    expect(idsOf(selectRunsForUsage(store, { session: 'b', before: at(20) }))).toEqual(idsOf([b1]));
  });

  it('rejects bad and inverted dates', () => {
    expectRejection(() => selectRunsForUsage(store, { after: 'last week' }), 'invalid_arguments');
    expectRejection(() => selectRunsForUsage(store, { before: '2030-02-31' }), 'invalid_arguments');
    expectRejection(() => selectRunsForUsage(store, { after: at(5), before: at(5) }), 'invalid_arguments');
    expectRejection(() => selectRunsForUsage(store, { after: at(6), before: at(5) }), 'invalid_arguments');
  });

  it('feeds summarizeUsage, which then counts only finished turns', () => {
    const s = summarizeUsage(selectRunsForUsage(store, { session: 'b' }));
    expect(s.turns).toBe(1);
    expect(s.inputTokens).toBe(100);
  });
});

describe('usageByModel (groupBy: "model")', () => {
  const on = (model: string, over: Partial<RunRecord> = {}) => run({ settings: { model, autonomy: 'off', reasoningEffort: null }, ...over });

  it('splits the total by model, largest first, each with its own turns, final and credits; models with no turn left out', () => {
    const live = on('small', { state: 'running', usage: usage({ inputTokens: 1 }) });
    const rows = usageByModel(
      [
        on('big', { usage: usage({ inputTokens: 1_000, factoryCredits: 2 }) }),
        on('small'),
        live,
        on('big', { usage: null }),
        on('unstarted', { state: 'queued', startedAt: null }),
      ],
      (id) => (id === live.id ? usage({ inputTokens: 50 }) : undefined),
    );
    expect(rows.map((r) => [r.model, r.turns, r.turnsWithUsage, r.inputTokens, r.factoryCredits, r.final])).toEqual([
      ['big', 2, 1, 1_000, 2, true],
      ['small', 2, 2, 150, null, false],
    ]);
  });
});
