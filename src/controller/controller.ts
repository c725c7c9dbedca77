/**
 * The session controller: accepts turns durably, admits them FIFO under
 * capacity and workspace locks, runs each in its own worker, and records
 * how each ended. Effects (store, workers, catalog, clock) are injected.
 *
 * This is the façade: the public API and the queries. The work is done by
 * - acceptance/acceptance.ts: create and send, one path;
 * - acceptance/steering.ts: cancel, and what a steering message stops;
 * - turns/turn-queue.ts: queue bounds, joining the queue, the pump that admits;
 * - turns/turn-owner.ts: one owner per turn, from admission to release;
 * - turns/turn.ts: one turn's memory, and the only moves of its phase;
 * - turns/next-turn-droids.ts: the droid booted for a session's next turn;
 * - reply-back/reply-back.ts: the reply gate for a live turn, and what it proved;
 * - sessions/: the read model (status, history, find, usage) and the waits;
 * - controller-state.ts: the shared memory, the serial chain, commit, halt.
 *
 * Rules it keeps:
 * - Each admitted turn has one owner, which releases the claim in `finally`,
 *   after the worker's process group is gone.
 * - A transition commits first, then changes memory; a failed commit leaves
 *   memory as it was and the caller gets the error.
 * - Inputs that need I/O (catalog, workspace resolution) are resolved before
 *   the serial chain; the chain only orders state changes.
 * - State it cannot record stops it (`halt`): it never guesses.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { TurnAcceptance, type Acceptance } from './acceptance/acceptance.js';
import type { CreateInput, SendInput } from './acceptance/turn-request.js';
import { ControllerState, type ControllerDeps } from './controller-state.js';
import type { FindFilters } from './sessions/find.js';
import type { HistoryPage } from './sessions/history.js';
import { applySessionUpdate, type SessionUpdate } from './sessions/metadata.js';
import { ReplyBack } from './reply-back/reply-back.js';
import { Steering } from './acceptance/steering.js';
import { TurnOwner } from './turns/turn-owner.js';
import { TurnQueue } from './turns/turn-queue.js';
import { NextTurnDroids } from './turns/next-turn-droids.js';
import { NEXT_TURN_DROID_IDLE_MS } from '../worker/contract/timeline.js';
import type { SessionRecord } from '../shared/records.js';
import type { ModelUsage, UsageScope, UsageSummary } from './sessions/usage.js';
import type { SessionView } from './sessions/views.js';

export type { ControllerStore } from './controller-state.js';

export class SessionController {
  private readonly state: ControllerState;
  private readonly queue: TurnQueue;
  private readonly steering: Steering;
  private readonly acceptance: TurnAcceptance;
  private readonly nextDroids: NextTurnDroids;

  constructor(deps: ControllerDeps) {
    this.state = new ControllerState(deps);
    this.nextDroids = new NextTurnDroids(
      deps.nextTurnDroidIdleMs ?? NEXT_TURN_DROID_IDLE_MS,
      deps.maxConcurrentRuns,
      (runId) => this.state.turns.has(runId) || this.state.committing(runId),
    );
    // The queue selects, the owner admits, runs and releases: the queue needs the owner, never the reverse.
    this.queue = new TurnQueue(this.state, new TurnOwner(this.state, new ReplyBack(this.state), this.nextDroids, deps), deps.maxConcurrentRuns);
    this.steering = new Steering(this.state);
    this.acceptance = new TurnAcceptance(this.state, this.queue, this.steering, this.nextDroids, deps);
  }

  // ── queries ───────────────────────────────────────────────────────────

  status(sessionId: string): SessionView {
    return this.state.reader.status(sessionId);
  }

  read(sessionId: string, cursor?: string, limit?: number): Promise<HistoryPage> {
    return this.state.reader.read(sessionId, cursor, limit);
  }

  find(filters: FindFilters, cursor?: string, limit?: number): Promise<{ sessions: SessionView[]; nextCursor: string | null }> {
    return this.state.reader.find(filters, cursor, limit);
  }

  usage(scope: UsageScope): UsageSummary & { byModel?: ModelUsage[] } {
    return this.state.reader.usage(scope);
  }

  capacity() {
    return this.queue.capacity();
  }

  waitForSessions(ids: readonly string[], timeoutSeconds: number, signal?: AbortSignal): Promise<{ sessions: SessionView[]; timedOut: boolean }> {
    return this.state.waits.waitFor(ids, timeoutSeconds, signal);
  }

  /** The latest assistant text of a live run (its only output while it streams), if any. */
  liveText(runId: string): string | undefined {
    return this.state.turns.get(runId)?.partialText || undefined;
  }

  /** Calls `listener` after every change of any session; returns the unsubscribe. */
  onChange(listener: () => void): () => void {
    return this.state.waits.onChange(listener);
  }

  // ── commands ──────────────────────────────────────────────────────────

  create(input: CreateInput): Promise<Acceptance> {
    return this.acceptance.create(input);
  }

  send(input: SendInput): Promise<Acceptance> {
    return this.acceptance.send(input);
  }

  cancel(sessionId: string): Promise<SessionView> {
    return this.steering.cancel(sessionId);
  }

  /** Title, labels, archive flag: controller metadata only, never work or routing. */
  async update(sessionId: string, update: SessionUpdate): Promise<SessionView> {
    const { state } = this;
    // Archiving a checkout session removes its checkout first, when nothing would be lost (checkouts.ts).
    const check = (session: SessionRecord) => void applySessionUpdate(session, state.store.runsBySession(session.id), update, state.now().toISOString());
    const removal = update.archived === true ? await state.checkouts.beginRemoval(sessionId, check, (claim) => this.queue.holdLock(claim)) : null;
    try {
      return await state.serialized(async () => {
        const session = state.session(sessionId);
        state.assertRunning();
        const next = applySessionUpdate(session, state.store.runsBySession(session.id), update, state.now().toISOString());
        await state.commit({ sessions: [removal?.checkout ? { ...next, checkout: removal.checkout } : next] });
        return state.reader.status(session.id);
      });
    } finally {
      removal?.done();
    }
  }

  /**
   * Graceful stop: interrupt live turns so their outcomes are known, and wait
   * (bounded) for their owners to finish. Queued turns stay queued on disk and
   * become queue_lost at the next start: they were never submitted.
   */
  async shutdown(timeoutMs: number): Promise<void> {
    this.state.stop();
    this.queue.stop();
    // Not marked as requested: nobody asked for these turns to stop, so an
    // interrupted outcome needs the caller's attention.
    for (const turn of this.state.turns.values()) turn.stopUnrequested();
    // Queued turns stay queued, but the droids booted for sessions' next turns go now.
    await Promise.race([Promise.all([this.queue.ownersDone(), this.nextDroids.stop()]), sleep(timeoutMs)]);
    await this.state.drained();
  }
}
