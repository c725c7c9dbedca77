/**
 * Why a turn stopped, and the one function that says what that means for
 * its run: state, droid's end reason, cancel reason, error and whether it
 * needs attention. Every ending goes through `judgeStop`: the worker's
 * (droid ended, we interrupted it, it died), the runner's (a worker that
 * left no result), the owner's (refused or stopped before launch), the
 * queue's (superseded, a failed predecessor) and start-up's (lost with the
 * controller). Pure.
 *
 * Whether a stop was asked for (`cancelRequested`) is known only to the
 * controller: a cancel the worker receives may be a caller's or a
 * shutdown's. It changes what a stop reads as, never the state, so the
 * worker's own verdict (`cancelRequested: true`) and the controller's agree
 * on the state (ipc.ts checks a result against its stop).
 */
import { z } from 'zod';
import { errorInfo } from '../droid/schemas.js';
import type { ErrorInfo } from '../droid/errors.js';
import type { reached } from './budget.js';
import { cancelReasonSchema } from './record-schemas.js';

/** What a budget check found: the dimension reached, what was spent and the limit. */
export type Reached = NonNullable<ReturnType<typeof reached>>;

/** Why a turn ended before its prompt reached droid. */
const UNSUBMITTED_CAUSES = ['cancel', 'superseded', 'controller_stopping', 'deadline', 'budget_exhausted', 'predecessor_failed', 'queue_lost'] as const;
export type UnsubmittedCause = (typeof UNSUBMITTED_CAUSES)[number];

/** droid's own end reasons that are no failure; any other ends the turn `failed` (the worker words why, from droid's errors). */
const droidEnd = z.enum(['completed', 'cancelled']);

const reachedSchema = z.object({ dimension: z.enum(['tokens', 'credits']), spent: z.number().finite(), limit: z.number().finite() }).strict();

/** Every way a turn ends; the worker's part crosses IPC with its result. */
export const turnStopSchema = z.discriminatedUnion('kind', [
  /** droid ended the turn by itself. */
  z.object({ kind: z.literal('ended'), end: droidEnd }).strict(),
  /**
   * We interrupted droid mid-turn; `end`: how droid ended it once it
   * confirmed, null when it never did (its group was killed; `killed`: how
   * the worker went, when the runner's backstop did it).
   */
  z.discriminatedUnion('by', [
    z.object({ kind: z.literal('interrupted'), by: z.literal('cancel'), end: droidEnd.nullable(), killed: z.string().optional() }).strict(),
    z
      .object({
        kind: z.literal('interrupted'),
        by: z.literal('deadline'),
        end: z.string().nullable(),
        timeoutMs: z.number().int().nonnegative(),
        killed: z.string().optional(),
      })
      .strict(),
    z.object({ kind: z.literal('interrupted'), by: z.literal('budget'), end: z.string().nullable(), reached: reachedSchema }).strict(),
  ]),
  /** Ended before the prompt reached droid; `error`: a refusal's own words (budget_exhausted). */
  z.object({ kind: z.literal('unsubmitted'), by: z.enum(UNSUBMITTED_CAUSES), error: errorInfo.optional() }).strict(),
  /** droid ended it with a failure, died, or the turn could not run; `end`: droid's end reason, if it sent one. */
  z.object({ kind: z.literal('failed'), error: errorInfo, end: z.string().nullable() }).strict(),
  /**
   * A session power (issue 40) was under way and nobody can say what it did:
   * droid did not answer in time, or the worker died. Files and droid's
   * session may have changed: the outcome is unknown, never a guess.
   */
  z.object({ kind: z.literal('unconfirmed'), error: errorInfo }).strict(),
]);

export type TurnStop = z.infer<typeof turnStopSchema>;
/** `lost`: the controller stopped while the turn was live, so nobody knows how it ended. */
export type StopReason = TurnStop | { kind: 'lost' };

/** How a turn ended, as its worker reports it (`unknown` only when a session power went unconfirmed). */
export const turnOutcomeSchema = z.enum(['succeeded', 'interrupted', 'cancelled', 'failed', 'timed_out', 'unknown']);
export type TurnOutcome = z.infer<typeof turnOutcomeSchema>;
type CancelReason = z.infer<typeof cancelReasonSchema>;

export interface Judged<S extends string = TurnOutcome> {
  /** The run's terminal state. */
  outcome: S;
  /** droid's end reason, null when droid sent none. */
  reason: string | null;
  cancelReason: CancelReason | null;
  error: ErrorInfo | null;
  /** The stop itself needs a person (the record adds what the turn's evidence shows). */
  attention: boolean;
}

export function judgeStop(stop: StopReason, cancelRequested: boolean): Judged {
  switch (stop.kind) {
    case 'ended':
      return droidEnded(stop.end, cancelRequested);
    case 'interrupted':
      return interrupted(stop, cancelRequested);
    case 'unsubmitted':
      return unsubmitted(stop.by, stop.error, cancelRequested);
    case 'failed':
      return { outcome: 'failed', reason: stop.end, cancelReason: null, error: stop.error, attention: true };
    case 'unconfirmed':
      return { outcome: 'unknown', reason: null, cancelReason: null, error: stop.error, attention: true };
    case 'lost':
      return {
        outcome: 'unknown',
        reason: null,
        cancelReason: null,
        error: { code: 'controller_stopped', message: 'the controller stopped while this turn was running; its outcome is unknown', retryable: false },
        attention: true,
      };
  }
}

/** An interrupt droid ended `cancelled` was ours only when somebody asked: otherwise (droid's own, a shutdown's) it needs a look. */
function droidEnded(end: 'completed' | 'cancelled', cancelRequested: boolean): Judged {
  return end === 'completed'
    ? { outcome: 'succeeded', reason: end, cancelReason: null, error: null, attention: false }
    : { outcome: 'interrupted', reason: end, cancelReason: null, error: null, attention: !cancelRequested };
}

function interrupted(stop: Extract<TurnStop, { kind: 'interrupted' }>, cancelRequested: boolean): Judged {
  // droid finished before the interrupt landed: the work was done.
  if (stop.end === 'completed') return droidEnded('completed', cancelRequested);
  const killed = 'killed' in stop && stop.killed !== undefined ? `; its process group was killed (worker ${stop.killed})` : '';
  switch (stop.by) {
    case 'cancel': {
      if (stop.end !== null) return droidEnded(stop.end, cancelRequested);
      const error = { code: 'interrupt_unconfirmed', message: `droid did not confirm the interrupt in time${killed}`, retryable: false };
      return { outcome: 'cancelled', reason: null, cancelReason: 'interrupt_unconfirmed', error, attention: true };
    }
    case 'deadline': {
      const error = { code: 'run_timed_out', message: `turn exceeded its ${stop.timeoutMs} ms deadline${killed}`, retryable: true };
      return { outcome: 'timed_out', reason: stop.end, cancelReason: null, error, attention: true };
    }
    case 'budget': {
      const error = budgetExceeded(stop.reached);
      // Confirmed: interrupted, and why. Never confirmed: an unconfirmed interrupt all the same, with the budget's code.
      if (stop.end !== null) return { outcome: 'interrupted', reason: stop.end, cancelReason: null, error, attention: !cancelRequested };
      const unconfirmed = { ...error, message: `${error.message}; droid did not confirm the interrupt in time` };
      return { outcome: 'cancelled', reason: null, cancelReason: 'interrupt_unconfirmed', error: unconfirmed, attention: true };
    }
  }
}

const NOT_SUBMITTED = 'nothing was submitted';

function unsubmitted(by: UnsubmittedCause, refusal: ErrorInfo | undefined, cancelRequested: boolean): Judged {
  const cancelled = (cancelReason: CancelReason, error: ErrorInfo, attention: boolean): Judged => ({
    outcome: 'cancelled',
    reason: null,
    cancelReason,
    error,
    attention,
  });
  switch (by) {
    case 'cancel':
      // A cancel nobody asked for is the controller stopping.
      if (!cancelRequested) return unsubmitted('controller_stopping', refusal, cancelRequested);
      return cancelled('cancelled', { code: 'cancelled', message: `cancelled before its prompt was sent to droid; ${NOT_SUBMITTED}`, retryable: false }, false);
    case 'superseded':
      return cancelled('superseded', { code: 'superseded', message: `superseded by a steering message; ${NOT_SUBMITTED}`, retryable: false }, false);
    case 'controller_stopping':
      return cancelled(
        'cancelled',
        { code: 'controller_stopping', message: `the controller stopped before the prompt was sent to droid; ${NOT_SUBMITTED}`, retryable: true },
        false,
      );
    case 'budget_exhausted':
      // The caller's turn never ran: cancelled, not failed, and said loudly.
      return cancelled(
        'cancelled',
        refusal ?? { code: 'budget_exhausted', message: `the session's budget is spent; ${NOT_SUBMITTED}`, retryable: false },
        true,
      );
    case 'predecessor_failed':
      return cancelled(
        'predecessor_failed',
        { code: 'predecessor_failed', message: 'an earlier turn of this session failed, so this one was not submitted', retryable: false },
        true,
      );
    case 'queue_lost': {
      // Dropped without anyone asking: the caller decides whether to resend, which is safe (nothing reached droid).
      const message = 'the controller stopped before this queued turn was submitted; it was never sent to droid and will not be replayed';
      return cancelled('queue_lost', { code: 'queue_lost', message, retryable: true }, true);
    }
    case 'deadline': {
      const error = { code: 'run_timed_out', message: `the deadline passed before droid was ready; ${NOT_SUBMITTED}`, retryable: true };
      return { outcome: 'timed_out', reason: null, cancelReason: null, error, attention: true };
    }
  }
}

function amount(r: Reached, value: number): string {
  return r.dimension === 'tokens' ? `${value} tokens` : `${value} credits`;
}

/** The run's error when the budget stopped it: what was spent when the check fired, and the limit. */
function budgetExceeded(r: Reached): ErrorInfo {
  return {
    code: 'budget_exceeded',
    message:
      `the turn reached its budget: ${amount(r, r.spent)} spent when droid last reported usage, limit ${amount(r, r.limit)}; ` +
      'droid was interrupted (usage is checked whenever droid reports it, so a turn can overshoot by one model step)',
    retryable: false,
  };
}

/** What a stop decides of a run's record: all there is to record of a run that never reached droid. */
export function stopFields(stop: StopReason, cancelRequested: boolean) {
  const judged = judgeStop(stop, cancelRequested);
  return { state: judged.outcome, reason: judged.reason, cancelReason: judged.cancelReason, error: judged.error, needsAttention: judged.attention };
}
