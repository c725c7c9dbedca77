/**
 * The neutral folders warm droids are spawned in (`droid-mcp-warm-*` under
 * the temp dir). The pool removes its own, but a controller killed outright
 * (kill -9, a crash) leaves them behind: the next pool to start sweeps every
 * such folder that no live process is in and that is older than a bound (so
 * another controller's folder whose droid is still starting is never taken).
 */
import { lstatSync, readdirSync, readlinkSync, rmSync } from 'node:fs';
import { join } from 'node:path';

export const WARM_DIR_PREFIX = 'droid-mcp-warm-';
/** A folder younger than this may belong to a pool whose droid has not started yet. */
export const WARM_DIR_MIN_AGE_MS = 60_000;

/** Folders to remove: warm folders past the age bound that no live process has as (or under) its cwd. Pure. */
export function staleWarmFolders(entries: ReadonlyArray<{ path: string; mtimeMs: number }>, cwds: ReadonlySet<string>, nowMs: number): string[] {
  const inUse = [...cwds];
  return entries
    .filter((e) => nowMs - e.mtimeMs >= WARM_DIR_MIN_AGE_MS)
    .filter((e) => !inUse.some((cwd) => cwd === e.path || cwd.startsWith(`${e.path}/`)))
    .map((e) => e.path);
}

/** Every live process's working directory that can be read (/proc; others' may be hidden). */
function liveCwds(): Set<string> {
  const cwds = new Set<string>();
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      cwds.add(readlinkSync(`/proc/${pid}/cwd`));
    } catch {
      // gone, or not ours to read
    }
  }
  return cwds;
}

/** Removes stale warm folders in `tmp`; returns what it removed. Never throws: a sweep is housekeeping. */
export function sweepWarmFolders(tmp: string, nowMs = Date.now()): string[] {
  try {
    const entries: Array<{ path: string; mtimeMs: number }> = [];
    for (const name of readdirSync(tmp)) {
      if (!name.startsWith(WARM_DIR_PREFIX)) continue;
      const path = join(tmp, name);
      const st = lstatSync(path);
      // Only real folders: a symlink of that name is not ours to follow.
      if (st.isDirectory()) entries.push({ path, mtimeMs: st.mtimeMs });
    }
    if (entries.length === 0) return [];
    const stale = staleWarmFolders(entries, liveCwds(), nowMs);
    for (const path of stale) rmSync(path, { recursive: true, force: true });
    return stale;
  } catch {
    return [];
  }
}
