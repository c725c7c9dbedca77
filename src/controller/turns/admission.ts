/**
 * Which queued turns may start now. Pure: no clocks, no I/O.
 *
 * Rules (spec "Concurrency"): at most `capacity` live turns; at most one live
 * turn per session, sessions FIFO; canonical workspace locks where readers
 * (autonomy off) share overlapping trees and writers need them alone. A turn
 * never overtakes an earlier waiting turn it conflicts with, so a waiting
 * writer is never starved by later readers.
 */
import { TERMINAL_STATES, type RunState } from '../../shared/records.js';
import { treesOverlap } from '../workspaces.js';

export interface LockClaim {
  sessionId: string;
  /** Canonical workspace path. */
  workspace: string;
  writer: boolean;
  /**
   * A fork's first turn (issue 40): the session it forks, which it reads.
   * It waits behind the source's live or earlier turns, and the source's
   * later turns wait behind it; forks of one source run side by side.
   */
  forkOf?: string;
}

/** Whether two claims may not run at once for their sessions: one's own session is the other's, or the other's source. */
function shareSession(a: LockClaim, b: LockClaim): boolean {
  return a.sessionId === b.sessionId || a.sessionId === b.forkOf || b.sessionId === a.forkOf;
}

export interface QueuedTurn extends LockClaim {
  runId: string;
  /** False while the turn waits out a retry delay: it keeps its place and blocks those behind it. */
  ready?: boolean;
}

export function conflicts(a: LockClaim, b: LockClaim): boolean {
  return (a.writer || b.writer) && treesOverlap(a.workspace, b.workspace);
}

/** Returns the run ids to start now, in queue order. `locks`: claims held by no turn (a checkout being removed): they block but take no slot. */
export function selectRunnable(queue: readonly QueuedTurn[], live: readonly LockClaim[], capacity: number, locks: readonly LockClaim[] = []): string[] {
  const chosen: string[] = [];
  const holding: LockClaim[] = [...live];
  const waiting: QueuedTurn[] = [];
  for (const turn of queue) {
    if (holding.length >= capacity) break;
    const blocked =
      turn.ready === false ||
      holding.some((h) => shareSession(h, turn) || conflicts(h, turn)) ||
      locks.some((l) => conflicts(l, turn)) ||
      waiting.some((w) => shareSession(w, turn) || conflicts(w, turn));
    if (blocked) {
      waiting.push(turn);
      continue;
    }
    chosen.push(turn.runId);
    holding.push(turn);
  }
  return chosen;
}

/** Why a queued turn waits for another: the same session (one live turn each), a fork and its source, or an overlapping workspace lock. */
export type WaitReason = 'same_session' | 'fork_source' | 'workspace_lock';

export interface Blocker {
  runId: string;
  sessionId: string;
  reason: WaitReason;
}

/**
 * The turns a queued turn waits for, oldest first: claims held now, then
 * earlier turns in line it may not overtake (the rules of `selectRunnable`).
 * Capacity is not a turn; the caller reports it apart.
 */
function blockersOf(turn: QueuedTurn, held: ReadonlyArray<LockClaim & { runId: string }>, ahead: readonly QueuedTurn[]): Blocker[] {
  const out: Blocker[] = [];
  for (const other of [...held, ...ahead]) {
    if (other.runId === turn.runId) continue;
    if (other.sessionId === turn.sessionId) out.push({ runId: other.runId, sessionId: other.sessionId, reason: 'same_session' });
    else if (shareSession(other, turn)) out.push({ runId: other.runId, sessionId: other.sessionId, reason: 'fork_source' });
    else if (conflicts(other, turn)) out.push({ runId: other.runId, sessionId: other.sessionId, reason: 'workspace_lock' });
  }
  return out;
}

/** What the controller did with an accepted turn, said in the acceptance itself. */
export interface Admission {
  /** started: admitted at once; queued: waits (see waitingFor, capacityFull); interrupting: steering stops the live turn first; replayed: nothing new. */
  action: 'started' | 'queued' | 'interrupting' | 'replayed';
  /** The turns it waits for, oldest first. */
  waitingFor: Array<{ session: string; run: string; state: RunState; reason: WaitReason }>;
  /** Every run slot was taken. */
  capacityFull: boolean;
  detail: string;
}

/**
 * Why a turn that was not admitted waits, for its acceptance: the turns ahead
 * of it (`blockersOf`), whether capacity is full, and whether it waits for a
 * live turn that steering (`interrupting`) is stopping. A blocker whose run
 * already ended still holds its claim while its droid closes.
 */
export function explainQueued(
  turn: QueuedTurn,
  held: ReadonlyArray<LockClaim & { runId: string }>,
  ahead: readonly QueuedTurn[],
  capacity: number,
  interrupting: ReadonlySet<string>,
  stateOf: (runId: string) => RunState,
): Admission {
  const waitingFor = blockersOf(turn, held, ahead).map((b) => ({ session: b.sessionId, run: b.runId, state: stateOf(b.runId), reason: b.reason }));
  const capacityFull = held.length >= capacity;
  const action = waitingFor.some((w) => interrupting.has(w.run)) ? 'interrupting' : 'queued';
  const parts = waitingFor.map((w) => {
    const what =
      w.reason === 'same_session'
        ? 'of this session'
        : w.reason === 'fork_source'
          ? `of session ${w.session} (a fork and its source take turns)`
          : `of session ${w.session} (overlapping workspace)`;
    const how = interrupting.has(w.run) ? 'being interrupted' : TERMINAL_STATES.includes(w.state) ? `${w.state}, its droid closing` : w.state;
    return `run ${w.run} ${what}, ${how}`;
  });
  if (capacityFull) parts.push(`all ${capacity} run slots are busy`);
  const detail =
    action === 'interrupting' ? `interrupting: starts once it has stopped; waits for ${parts.join('; ')}` : `queued behind ${parts.join('; ') || 'admission'}`;
  return { action, waitingFor, capacityFull, detail };
}
