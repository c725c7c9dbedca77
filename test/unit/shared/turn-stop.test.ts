/**
 * judgeStop: every way a turn ends, and what its run records for it. One
 * table, so a change of what a stop means is seen here, in one place.
 */
import { describe, expect, it } from 'vitest';
import { judgeStop, stopFields, type StopReason } from '../../../src/shared/turn-stop.js';

const failure = { code: 'droid_turn_failed', message: 'droid ended the turn with reason error', retryable: false };
const reached = { dimension: 'tokens' as const, spent: 330, limit: 300 };

// [stop, cancel asked for, outcome, cancel reason, error code, needs attention]
const TABLE: Array<[string, StopReason, boolean, string, string | null, string | null, boolean]> = [
  ['droid completed', { kind: 'ended', end: 'completed' }, false, 'succeeded', null, null, false],
  ['droid ended cancelled, nobody asked', { kind: 'ended', end: 'cancelled' }, false, 'interrupted', null, null, true],
  ['droid ended cancelled after our cancel', { kind: 'ended', end: 'cancelled' }, true, 'interrupted', null, null, false],
  ['cancel confirmed', { kind: 'interrupted', by: 'cancel', end: 'cancelled' }, true, 'interrupted', null, null, false],
  ['cancel, droid finished first', { kind: 'interrupted', by: 'cancel', end: 'completed' }, true, 'succeeded', null, null, false],
  ['cancel never confirmed', { kind: 'interrupted', by: 'cancel', end: null }, true, 'cancelled', 'interrupt_unconfirmed', 'interrupt_unconfirmed', true],
  ['deadline, droid finished first', { kind: 'interrupted', by: 'deadline', end: 'completed', timeoutMs: 10 }, false, 'succeeded', null, null, false],
  ['deadline confirmed', { kind: 'interrupted', by: 'deadline', end: 'cancelled', timeoutMs: 10 }, false, 'timed_out', null, 'run_timed_out', true],
  [
    'deadline, group killed',
    { kind: 'interrupted', by: 'deadline', end: null, timeoutMs: 10, killed: 'SIGKILL' },
    false,
    'timed_out',
    null,
    'run_timed_out',
    true,
  ],
  ['budget confirmed', { kind: 'interrupted', by: 'budget', end: 'cancelled', reached }, false, 'interrupted', null, 'budget_exceeded', true],
  ['budget, droid finished first', { kind: 'interrupted', by: 'budget', end: 'completed', reached }, false, 'succeeded', null, null, false],
  ['budget never confirmed', { kind: 'interrupted', by: 'budget', end: null, reached }, false, 'cancelled', 'interrupt_unconfirmed', 'budget_exceeded', true],
  ['cancelled before droid started', { kind: 'unsubmitted', by: 'cancel' }, true, 'cancelled', 'cancelled', 'cancelled', false],
  ['a cancel nobody asked for before droid started', { kind: 'unsubmitted', by: 'cancel' }, false, 'cancelled', 'cancelled', 'controller_stopping', false],
  ['superseded in line', { kind: 'unsubmitted', by: 'superseded' }, true, 'cancelled', 'superseded', 'superseded', false],
  ['controller stopping before start', { kind: 'unsubmitted', by: 'controller_stopping' }, false, 'cancelled', 'cancelled', 'controller_stopping', false],
  ['deadline before droid was ready', { kind: 'unsubmitted', by: 'deadline' }, false, 'timed_out', null, 'run_timed_out', true],
  ['budget spent at launch', { kind: 'unsubmitted', by: 'budget_exhausted' }, false, 'cancelled', 'cancelled', 'budget_exhausted', true],
  ['an earlier turn failed', { kind: 'unsubmitted', by: 'predecessor_failed' }, false, 'cancelled', 'predecessor_failed', 'predecessor_failed', true],
  ['queued when the controller died', { kind: 'unsubmitted', by: 'queue_lost' }, false, 'cancelled', 'queue_lost', 'queue_lost', true],
  ['droid failed', { kind: 'failed', error: failure, end: 'error' }, false, 'failed', null, 'droid_turn_failed', true],
  ['live when the controller died', { kind: 'lost' }, false, 'unknown', null, 'controller_stopped', true],
];

describe('judgeStop: what each way of ending means for the run', () => {
  it.each(TABLE)('%s', (_name, stop, asked, outcome, cancelReason, code, attention) => {
    const judged = judgeStop(stop, asked);
    expect({ outcome: judged.outcome, cancelReason: judged.cancelReason, code: judged.error?.code ?? null, attention: judged.attention }).toEqual({
      outcome,
      cancelReason,
      code,
      attention,
    });
  });

  it("keeps droid's end reason, and says how a killed group went", () => {
    expect(judgeStop({ kind: 'interrupted', by: 'deadline', end: 'cancelled', timeoutMs: 10 }, false).reason).toBe('cancelled');
    expect(judgeStop({ kind: 'failed', error: failure, end: 'error' }, false).reason).toBe('error');
    expect(judgeStop({ kind: 'interrupted', by: 'cancel', end: null, killed: 'signal SIGKILL' }, true).error?.message).toMatch(
      /process group was killed \(worker signal SIGKILL\)/,
    );
    expect(judgeStop({ kind: 'interrupted', by: 'budget', end: null, reached }, false).error?.message).toMatch(
      /330 tokens.*limit 300 tokens.*did not confirm the interrupt/,
    );
  });

  it("a refusal's own words stand", () => {
    const refused = { code: 'budget_exhausted', message: 'the session spent 10 of 10 tokens', retryable: false };
    expect(judgeStop({ kind: 'unsubmitted', by: 'budget_exhausted', error: refused }, false).error).toEqual(refused);
  });

  it('never lets whether a cancel was asked for change the state', () => {
    for (const [, stop] of TABLE) expect(judgeStop(stop, true).outcome).toBe(judgeStop(stop, false).outcome);
  });

  it('stopFields is the record part of the same judgement', () => {
    expect(stopFields({ kind: 'unsubmitted', by: 'queue_lost' }, false)).toEqual({
      state: 'cancelled',
      reason: null,
      cancelReason: 'queue_lost',
      error: expect.objectContaining({ code: 'queue_lost', retryable: true }),
      needsAttention: true,
    });
  });
});
