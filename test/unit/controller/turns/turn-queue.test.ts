/**
 * The queue selects; the owner it calls (TurnRunner) admits, runs and
 * releases. An owner catches everything it does, so one that throws is a
 * programming error: the queue logs it and keeps admitting, and no promise
 * is left rejected with nobody to hear it.
 */
import { describe, expect, it } from 'vitest';
import type { ControllerState } from '../../../../src/controller/controller-state.js';
import { Turn } from '../../../../src/controller/turns/turn.js';
import { TurnQueue, type TurnRunner } from '../../../../src/controller/turns/turn-queue.js';

function setup(runner: TurnRunner) {
  const errors: unknown[][] = [];
  const turns = new Map<string, Turn>();
  const state = {
    turns,
    stopped: false,
    halted: false,
    now: () => new Date(),
    log: { error: (...args: unknown[]) => void errors.push(args), info: () => undefined, warn: () => undefined },
  } as unknown as ControllerState;
  const queue = new TurnQueue(state, runner, 1);
  const add = (runId: string, workspace: string) => turns.set(runId, new Turn(runId, { sessionId: runId, workspace, writer: true }, 'p', null));
  return { queue, turns, errors, add };
}

describe('TurnQueue and its runner', () => {
  it('an owner that throws is logged, and the pump goes on admitting', async () => {
    const owned: string[] = [];
    let runner!: ReturnType<typeof setup>;
    runner = setup({
      async own(turn) {
        turn.admit();
        owned.push(turn.runId);
        runner.turns.delete(turn.runId);
        turn.release();
        if (turn.runId === 'r1') throw new Error('owner bug');
      },
    });
    runner.add('r1', '/ok/a');
    runner.add('r2', '/ok/b');
    runner.queue.pump();
    await new Promise((r) => setImmediate(r));
    expect(owned).toEqual(['r1', 'r2']);
    expect(runner.errors).toHaveLength(1);
    expect(runner.errors[0]![1]).toBe('turn owner threw');
  });
});
