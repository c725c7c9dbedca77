/**
 * Stopping a session's turns: a cancel, or a steering message (a send with
 * `interrupt`) that supersedes the queued turns and interrupts the live one.
 * The records are built first and committed by the caller; only then does
 * memory follow (`apply`), so a failed commit stops nothing.
 */
import type { RunRecord } from '../../shared/records.js';
import type { ControllerState } from '../controller-state.js';
import type { TurnQueue } from './turn-queue.js';
import type { SessionView } from '../sessions/views.js';

/** What a cancel or a steering message stops, as records not yet committed. */
interface Stops {
  /** The session's queued runs, ended unsubmitted. */
  dropped: RunRecord[];
  /** Its live runs, now `cancelling`. */
  stopping: RunRecord[];
}

export class Steering {
  constructor(
    private readonly state: ControllerState,
    private readonly queue: TurnQueue,
  ) {}

  /** The records that stop `runs` (one session's); memory is untouched until they are committed. */
  plan(runs: readonly RunRecord[], reason: 'cancelled' | 'superseded', at: string): Stops {
    const message = reason === 'superseded' ? 'superseded by a steering message; nothing was submitted' : 'cancelled before it started; nothing was submitted';
    const dropped = runs
      .filter((r) => r.state === 'queued')
      .map((r) => ({ ...r, state: 'cancelled' as const, cancelReason: reason, endedAt: at, error: { code: reason, message, retryable: false }, needsAttention: false }));
    const stopping = runs
      .filter((r) => (r.state === 'starting' || r.state === 'running') && this.state.turns.get(r.id)?.holdsClaim())
      .map((r) => ({ ...r, state: 'cancelling' as const }));
    return { dropped, stopping };
  }

  /** Committed: now memory follows. Dropped turns leave the line; live ones are asked to stop. */
  apply(stops: Stops): void {
    this.queue.drop(stops.dropped);
    for (const run of stops.stopping) this.state.turns.get(run.id)?.requestStop();
  }

  cancel(sessionId: string): Promise<SessionView> {
    return this.state.serialized(async () => {
      const session = this.state.session(sessionId);
      this.state.assertRunning();
      const stops = this.plan(this.state.deps.store.runsBySession(session.id), 'cancelled', this.state.now().toISOString());
      if (stops.dropped.length || stops.stopping.length) await this.state.commit({ runs: [...stops.dropped, ...stops.stopping] });
      this.apply(stops);
      this.state.changed();
      return this.state.reader.status(session.id);
    });
  }
}
