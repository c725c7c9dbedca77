/**
 * The FIFO queue of accepted turns and the pump that admits them: its
 * bounds, joining it after the acceptance commit, and admission under
 * capacity and workspace locks (the rules are admission.ts's; this wires
 * them to memory). A turn leaves the line when a commit ends its run
 * (controller-state.ts) or when its owner takes it.
 *
 * Each turn the pump selects goes to the turns' owner (`TurnRunner`), which
 * admits it, runs it and alone releases its claim; once it has, the pump
 * runs again.
 */
import { ControllerError } from '../../shared/public-error.js';
import type { RunRecord } from '../../shared/records.js';
import { conflicts, explainQueued, selectRunnable, type Admission, type LockClaim, type QueuedTurn } from './admission.js';
import type { ControllerState } from '../controller-state.js';
import { Turn } from './turn.js';

/** Who runs a selected turn, from admission to release (turn-owner.ts). */
export interface TurnRunner {
  /** Admits the turn at once (it must be in line), then runs it; settles once its claim is released. */
  own(turn: Turn): Promise<void>;
}

const MAX_QUEUED_TOTAL = 64;
const MAX_QUEUED_PER_SESSION = 8;

export class TurnQueue {
  /** Owners still running (including ones a shutdown waits for). */
  private readonly owners = new Set<Promise<void>>();
  private retryTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly state: ControllerState,
    private readonly runner: TurnRunner,
    /** Turns holding a claim at once (config maxConcurrentRuns). */
    private readonly maxConcurrentRuns: number,
  ) {}

  capacity() {
    let active = 0;
    let queued = 0;
    for (const turn of this.state.turns.values()) {
      if (turn.holdsClaim()) active++;
      else queued++;
    }
    const maximum = this.maxConcurrentRuns;
    return { maximum, active, queued, available: Math.max(0, maximum - active) };
  }

  /** `sessionId`: also bound that session's queued turns (null: only the total). `alsoQueued`: turns about to join the line. */
  assertRoom(sessionId: string | null, alsoQueued = 0): void {
    let total = alsoQueued;
    let perSession = 0;
    for (const turn of this.state.turns.values()) {
      if (turn.holdsClaim()) continue;
      total++;
      if (turn.sessionId === sessionId) perSession++;
    }
    if (total >= MAX_QUEUED_TOTAL || perSession >= MAX_QUEUED_PER_SESSION) {
      throw new ControllerError(
        'queue_full',
        `too many queued turns (at most ${MAX_QUEUED_TOTAL} in all and ${MAX_QUEUED_PER_SESSION} per session)`,
        'Wait for queued turns to finish (droid_wait_for_sessions), then retry with the same requestKey.',
        true,
      );
    }
  }

  /** Called after the acceptance commit: the turn joins the queue. `interrupting`: live turns steering stops. */
  enqueue(
    run: RunRecord,
    workspace: string,
    prompt: string,
    interrupting: readonly RunRecord[],
    outputSchema: Record<string, unknown> | null,
    forkOf?: string,
  ): { turn: Turn; admission: Admission } {
    const claim: LockClaim = { sessionId: run.sessionId, workspace, writer: run.settings.autonomy !== 'off', ...(forkOf !== undefined && { forkOf }) };
    const turn = new Turn(run.id, claim, prompt, outputSchema);
    const turns = this.state.turns;
    turns.set(run.id, turn);
    // The session's previous turn leaves its Factory title for later rather than hold this one up.
    for (const other of turns.values()) if (other !== turn && other.sessionId === run.sessionId && other.holdsClaim()) other.skipRename();
    this.pump();
    const admission = this.admissionOf(turn, interrupting);
    this.state.log.info({ session: run.sessionId, run: run.id, action: admission.action, waitingFor: admission.waitingFor.length }, 'turn accepted');
    return { turn, admission };
  }

  /** Workspace locks held by no turn: no overlapping turn starts while one is held. */
  private readonly locks = new Set<LockClaim>();

  /**
   * Takes `claim` for something other than a turn; null when a queued or live turn of another session already conflicts
   * with it (the claim's own session checks its turns by their records: one that ended may not have released its claim yet).
   */
  holdLock(claim: LockClaim): (() => void) | null {
    for (const turn of this.state.turns.values()) if (turn.sessionId !== claim.sessionId && conflicts(turn.claim, claim)) return null;
    this.locks.add(claim);
    return () => {
      this.locks.delete(claim);
      this.pump();
    };
  }

  pump(): void {
    if (this.state.stopped || this.state.halted) return;
    const now = this.state.now().getTime();
    const held: LockClaim[] = [];
    const queued = [];
    let nextRetry = Infinity;
    for (const turn of this.state.turns.values()) {
      if (turn.holdsClaim()) held.push(turn.claim);
      else {
        const ready = turn.retryAt <= now;
        if (!ready) nextRetry = Math.min(nextRetry, turn.retryAt);
        queued.push({ runId: turn.runId, ...turn.claim, ready });
      }
    }
    const capacity = this.maxConcurrentRuns;
    const admitted = new Set(selectRunnable(queued, held, capacity, [...this.locks]));
    for (const runId of admitted) {
      // Admitted before `own` returns: the next selection counts its claim.
      // An owner catches everything it does; a throw here is a programming error, logged rather than left unhandled.
      const owner = this.runner.own(this.state.turns.get(runId)!).catch((err: unknown) => this.state.log.error({ err, run: runId }, 'turn owner threw'));
      this.owners.add(owner);
      void owner.finally(() => {
        this.owners.delete(owner);
        this.pump();
      });
    }
    clearTimeout(this.retryTimer);
    if (nextRetry !== Infinity) this.retryTimer = setTimeout(() => this.pump(), Math.max(0, nextRetry - now)).unref();
  }

  /** Shutting down: no retry timer keeps admitting. */
  stop(): void {
    clearTimeout(this.retryTimer);
  }

  /** Settles when every owner running now has finished. */
  ownersDone(): Promise<unknown> {
    return Promise.all([...this.owners]);
  }

  private admissionOf(turn: Turn, interrupting: readonly RunRecord[]): Admission {
    if (turn.holdsClaim()) return { action: 'started', waitingFor: [], capacityFull: false, detail: 'admitted at once; droid is starting' };
    const held = [...this.state.turns.values()].filter((t) => t.holdsClaim()).map((t) => ({ runId: t.runId, ...t.claim }));
    const ahead: QueuedTurn[] = [];
    for (const t of this.state.turns.values()) {
      if (t === turn) break;
      if (!t.holdsClaim()) ahead.push({ runId: t.runId, ...t.claim });
    }
    const stopping = new Set(interrupting.map((r) => r.id));
    return explainQueued({ runId: turn.runId, ...turn.claim }, held, ahead, this.maxConcurrentRuns, stopping, (id) => this.state.run(id).state);
  }
}
