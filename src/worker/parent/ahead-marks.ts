/**
 * Which private folders belong to a droid booted for a session's next turn
 * (controller/turns/next-turn-droids.ts) that no run has taken yet. Those
 * folders are named by a run id no record holds, so the start-up recovery
 * of sessions copies (session-copy.ts recoverSessionCopies), which knows
 * runs by their records, would leave them behind a controller killed
 * outright. Each such droid leaves an empty marker beside the folders,
 * `ahead-<state key>-<run id>`, in the private temp root (covered in every
 * sandbox, so no turn can touch it); the state key names one state
 * directory, which only one controller at a time may own. The next start
 * of that state, once its predecessor's processes are gone, removes the
 * folders of every marked id no record holds.
 */
import { createHash } from 'node:crypto';
import { readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { privateTmpRoot, TURN_TMP_PREFIX } from '../../sandbox/turn-paths.js';

const PREFIX = 'ahead-';

/** The key of one state directory in marker names (its path's hash: never the path itself). Pure. */
export function stateKeyOf(stateDirectory: string): string {
  return createHash('sha256').update(stateDirectory).digest('hex').slice(0, 16);
}

/** Marks `runId`'s private folders as a booted droid's, not yet a run's. */
export function markAhead(stateKey: string, runId: string, root = privateTmpRoot()): void {
  writeFileSync(join(root, `${PREFIX}${stateKey}-${runId}`), '', { mode: 0o600 });
}

/**
 * Boots a droid ahead (`boot` makes its folders, named by `runId`) under its
 * marker. The marker is written first, so a controller killed at any moment
 * once the folders exist leaves them marked; it goes when they do. Null,
 * and no marker, when no droid was booted.
 */
export function bootMarked<T extends { dispose(): Promise<void> }>(stateKey: string, runId: string, boot: () => T | null, root = privateTmpRoot()): T | null {
  try {
    markAhead(stateKey, runId, root);
  } catch {
    return null;
  }
  let booted: T | null = null;
  try {
    booted = boot();
  } finally {
    if (!booted) unmarkAhead(stateKey, runId, root);
  }
  if (!booted) return null;
  const early = booted;
  return { ...early, dispose: () => early.dispose().finally(() => unmarkAhead(stateKey, runId, root)) };
}

/** The droid's folders are a run's now, or gone: the marker goes. */
export function unmarkAhead(stateKey: string, runId: string, root = privateTmpRoot()): void {
  rmSync(join(root, `${PREFIX}${stateKey}-${runId}`), { force: true });
}

/**
 * At start-up, once the previous owner's processes are gone: removes the
 * folders of this state's marked ids that `isRun` does not know, and every
 * marker of this state. Returns the ids whose folders were removed.
 */
export function sweepAhead(stateKey: string, isRun: (runId: string) => boolean, root = privateTmpRoot()): string[] {
  const mine = `${PREFIX}${stateKey}-`;
  const removed: string[] = [];
  for (const name of readdirSync(root)) {
    if (!name.startsWith(mine)) continue;
    const runId = name.slice(mine.length);
    // A name is never a path: an id that is not a plain name is only unmarked.
    if (/^[0-9a-f-]{36}$/.test(runId) && !isRun(runId)) {
      for (const folder of [`sessions-${runId}`, `${TURN_TMP_PREFIX}${runId}`]) rmSync(join(root, folder), { recursive: true, force: true });
      removed.push(runId);
    }
    rmSync(join(root, name), { force: true });
  }
  return removed;
}
