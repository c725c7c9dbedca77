/**
 * Stopping a session's turns: a cancel, or a steering message (a send with
 * `interrupt`) that supersedes the queued turns and interrupts the live one.
 * The records are built first and committed by the caller; only then does
 * memory follow (the commit takes ended turns out of the line, `apply` asks
 * live ones to stop), so a failed commit stops nothing.
 */
import type { RunRecord } from '../../shared/records.js';
import { stopFields } from '../../shared/turn-stop.js';
import type { ControllerState } from '../controller-state.js';
import type { SessionView } from '../sessions/views.js';

/** What a cancel or a steering message stops, as records not yet committed. */
interface Stops {
  /** The session's queued runs, ended unsubmitted. */
  dropped: RunRecord[];
  /** Its live runs, now `cancelling`. */
  stopping: RunRecord[];
}

export class Steering {
  constructor(private readonly state: ControllerState) {}

  /** The records that stop `runs` (one session's); memory is untouched until they are committed. */
  plan(runs: readonly RunRecord[], by: 'cancel' | 'superseded', at: string): Stops {
    const ended = stopFields({ kind: 'unsubmitted', by }, true);
    const dropped = runs.filter((r) => r.state === 'queued').map((r): RunRecord => ({ ...r, ...ended, endedAt: at }));
    const stopping = runs
      .filter((r) => (r.state === 'starting' || r.state === 'running') && this.state.turns.get(r.id)?.holdsClaim())
      .map((r) => ({ ...r, state: 'cancelling' as const }));
    return { dropped, stopping };
  }

  /** Committed: now memory follows. Live turns are asked to stop (the commit took the dropped ones out of the line). */
  apply(stops: Stops): void {
    for (const run of stops.stopping) this.state.turns.get(run.id)?.requestStop();
  }

  cancel(sessionId: string): Promise<SessionView> {
    return this.state.serialized(async () => {
      const session = this.state.session(sessionId);
      this.state.assertRunning();
      const stops = this.plan(this.state.store.runsBySession(session.id), 'cancel', this.state.now().toISOString());
      if (stops.dropped.length || stops.stopping.length) await this.state.commit({ runs: [...stops.dropped, ...stops.stopping] }, () => this.apply(stops));
      return this.state.reader.status(session.id);
    });
  }
}
