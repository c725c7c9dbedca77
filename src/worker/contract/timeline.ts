/**
 * Every time budget of one turn, written down once and derived from the two
 * operator settings: T = runTimeoutMs and G = cancelGraceMs. The worker, the
 * runner that watches it and the controller all read their budgets here, so
 * each waiter's budget is strictly larger than the one it contains.
 *
 * Cancel (or deadline) timeline, from the moment the worker is told to stop
 * (a `cancel` message, or its own deadline at T after it received the turn):
 *
 *   +0      worker sends droid.interrupt_session; the request and the wait
 *           for agent_turn_completed share one window of G
 *   +G      no end confirmed: the worker stops waiting and reports
 *           `cancelled` / interrupt_unconfirmed (or `timed_out` at the deadline)
 *   result  controller persists the result, then acknowledges it
 *   after   rename window (only after `succeeded` / `interrupted` turns),
 *           then close_session and droid's exit (SHUTDOWN_BUDGET in droid/client.ts),
 *           then SIGKILL of droid. When a follow-up of the session waits for
 *           this slot (`skip_rename`), the rename is skipped or abandoned and
 *           droid is killed as soon as close_session is answered.
 *
 * Runner backstops (SIGKILL of the worker's whole process group, when the
 * worker did not do its part in time):
 *   cancelBackstopMs   after a cancel with no result yet: G + SLACK
 *   deadlineBackstopMs after spawn with no result yet:    T + 2G + SLACK
 *                      (the worker's own clock starts only once it is up,
 *                      which on a loaded host can take a second or more)
 *   afterResultMs      after the result, for rename and close: rename + close + exit + SLACK
 * A forced stop after a cancel we asked for is recorded as a cancellation
 * (interrupt_unconfirmed), never as a worker failure.
 *
 * The slot and workspace lock are released only after all of this, when the
 * process group is gone (see process-group.ts killGroupAndWait).
 */
import { SHUTDOWN_BUDGET } from '../../droid/client.js';

/** Scheduling slack on a loaded host: IPC, process start, GC pauses. */
const SLACK_MS = 1_000;
/** Most a rename may take: spec "min(10 s, runTimeoutMs / 4)", plus the grace. */
const RENAME_CAP_MS = 10_000;
/**
 * How long the droid booted for a session's next turn (controller/turns/next-turn-droids.ts)
 * waits once the session is idle: the loop every caller runs sends within
 * moments; a person reading the answer first gets a droid that boots then.
 */
export const NEXT_TURN_DROID_IDLE_MS = 60_000;
/** How long a worker waits for the controller to acknowledge its result. */
export const ACK_WAIT_MS = 30_000;
/** Room left after the evidence for reporting the result before the deadline backstop. */
const EVIDENCE_MARGIN_MS = 500;

export interface TurnTimeline {
  /** Worker: interrupt sent → turn end confirmed, or give up. */
  interruptWindowMs: number;
  /** Worker: the Factory title window after the result. */
  renameWindowMs: number;
  /** Runner: hard stop after a cancel while no result has come. */
  cancelBackstopMs: number;
  /** Runner: hard stop measured from spawn while no result has come. */
  deadlineBackstopMs: number;
  /** Runner: hard stop after the result (rename, close, exit). */
  afterResultMs: number;
  /**
   * Worker: the after-turn evidence (git snapshot, context stats;
   * evidence/turn-evidence.ts, each at most min(5 s, G)) ends by this long
   * after the worker received the turn, whatever the turn's end:
   * T + 2G - EVIDENCE_MARGIN_MS, inside the deadline backstop
   * (T + 2G + SLACK from spawn) with room to report.
   */
  evidenceEndsByMs: number;
  /** Worker: after a cancel, the evidence ends by this long after the cancel came: G + SLACK - margin, inside the cancel backstop. */
  evidenceAfterCancelMs: number;
}

export function turnTimeline(runTimeoutMs: number, cancelGraceMs: number): TurnTimeline {
  const renameWindowMs = Math.min(RENAME_CAP_MS, Math.floor(runTimeoutMs / 4)) + cancelGraceMs;
  return {
    interruptWindowMs: cancelGraceMs,
    renameWindowMs,
    cancelBackstopMs: cancelGraceMs + SLACK_MS,
    deadlineBackstopMs: runTimeoutMs + 2 * cancelGraceMs + SLACK_MS,
    afterResultMs: renameWindowMs + SHUTDOWN_BUDGET.closeMs + SHUTDOWN_BUDGET.exitWaitMs + SLACK_MS,
    evidenceEndsByMs: runTimeoutMs + 2 * cancelGraceMs - EVIDENCE_MARGIN_MS,
    evidenceAfterCancelMs: cancelGraceMs + SLACK_MS - EVIDENCE_MARGIN_MS,
  };
}
