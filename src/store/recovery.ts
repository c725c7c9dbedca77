/**
 * What an unclean stop means for runs the store still shows as in flight.
 * A turn that may have reached droid has an unknowable outcome: it is marked
 * `unknown` for a human to inspect, never replayed or guessed successful. A
 * turn that was only queued was never submitted, so it is safely `cancelled`.
 */
import { LIVE_STATES, type RunRecord } from '../shared/records.js';

export interface RecoverySummary {
  unknown: number;
  queueLost: number;
}

export function planCrashRecovery(runs: Iterable<RunRecord>, now: Date): { runs: RunRecord[]; summary: RecoverySummary } {
  const endedAt = now.toISOString();
  const changed: RunRecord[] = [];
  const summary: RecoverySummary = { unknown: 0, queueLost: 0 };
  for (const run of runs) {
    if (LIVE_STATES.includes(run.state)) {
      summary.unknown++;
      changed.push({
        ...run,
        state: 'unknown',
        needsAttention: true,
        endedAt,
        error: {
          code: 'controller_stopped',
          message: 'the controller stopped while this turn was running; its outcome is unknown',
          retryable: false,
        },
      });
    } else if (run.state === 'queued') {
      summary.queueLost++;
      changed.push({
        ...run,
        state: 'cancelled',
        cancelReason: 'queue_lost',
        endedAt,
        // Dropped without anyone asking: the caller must decide whether to resend.
        needsAttention: true,
        // Retryable: nothing reached droid, so sending the same message again is safe.
        error: {
          code: 'queue_lost',
          message: 'the controller stopped before this queued turn was submitted; it was never sent to droid and will not be replayed',
          retryable: true,
        },
      });
    }
  }
  return { runs: changed, summary };
}
