/**
 * Which queued turns may start now. Pure: no clocks, no I/O.
 *
 * Rules (spec "Concurrency"): at most `capacity` live turns; at most one live
 * turn per session, sessions FIFO; canonical workspace locks where readers
 * (autonomy off) share overlapping trees and writers need them alone. A turn
 * never overtakes an earlier waiting turn it conflicts with, so a waiting
 * writer is never starved by later readers.
 */
import { treesOverlap } from './workspaces.js';

export interface LockClaim {
  sessionId: string;
  /** Canonical workspace path. */
  workspace: string;
  writer: boolean;
}

export interface QueuedTurn extends LockClaim {
  runId: string;
  /** False while the turn waits out a retry delay: it keeps its place and blocks those behind it. */
  ready?: boolean;
}

export function conflicts(a: LockClaim, b: LockClaim): boolean {
  return (a.writer || b.writer) && treesOverlap(a.workspace, b.workspace);
}

/** Returns the run ids to start now, in queue order. */
export function selectRunnable(queue: readonly QueuedTurn[], live: readonly LockClaim[], capacity: number): string[] {
  const chosen: string[] = [];
  const holding: LockClaim[] = [...live];
  const busySessions = new Set(live.map((l) => l.sessionId));
  const waiting: QueuedTurn[] = [];
  for (const turn of queue) {
    if (holding.length >= capacity) break;
    const blocked =
      turn.ready === false ||
      busySessions.has(turn.sessionId) ||
      holding.some((h) => conflicts(h, turn)) ||
      waiting.some((w) => w.sessionId === turn.sessionId || conflicts(w, turn));
    if (blocked) {
      waiting.push(turn);
      continue;
    }
    chosen.push(turn.runId);
    holding.push(turn);
    busySessions.add(turn.sessionId);
  }
  return chosen;
}
