/**
 * What an unclean stop means for runs the store still shows as in flight.
 * A turn that may have reached droid has an unknowable outcome: it is marked
 * `unknown` for a human to inspect, never replayed or guessed successful. A
 * turn that was only queued was never submitted, so it is safely `cancelled`.
 */
import { LIVE_STATES, type RunRecord } from '../shared/records.js';
import { stopFields } from '../shared/turn-stop.js';

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
      changed.push({ ...run, ...stopFields({ kind: 'lost' }, false), endedAt });
    } else if (run.state === 'queued') {
      summary.queueLost++;
      // Dropped without anyone asking: the caller decides whether to resend, which is safe (nothing reached droid).
      changed.push({ ...run, ...stopFields({ kind: 'unsubmitted', by: 'queue_lost' }, false), endedAt });
    }
  }
  return { runs: changed, summary };
}
