/**
 * Opening a file a turn may have shaped, from the worker (which runs outside
 * the sandbox, as the controller's user): only a path inside the workspace,
 * walked one component at a time from an open directory, never through a
 * link, so a folder a turn swaps for a link (even while the walk runs) can
 * never lead outside. Linux: each step opens `/proc/self/fd/<dir>/<name>`
 * with O_NOFOLLOW, which resolves the directory already open and refuses a
 * link as the name.
 */
import { constants } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import { isAbsolute, normalize, relative } from 'node:path';

/** The path's components below `root`, or null when it is not a plain path inside it. Pure. */
export function componentsBelow(root: string, path: string): string[] | null {
  if (!isAbsolute(path) || normalize(path) !== path) return null;
  const rel = relative(root, path);
  if (rel === '' || rel.startsWith('..') || isAbsolute(rel)) return null;
  return rel.split('/');
}

/**
 * The file at `path` opened read-only without following any link below
 * `root` (a canonical directory); null when nothing is there. Throws when
 * the path is not inside `root`, a component is a link or not a folder, or
 * it cannot be opened.
 */
export async function openBeneath(root: string, path: string): Promise<FileHandle | null> {
  const names = componentsBelow(root, path);
  if (!names) throw new Error(`${path} is not a plain path inside ${root}`);
  let dir = await open(root, constants.O_RDONLY | constants.O_DIRECTORY);
  try {
    for (const [i, name] of names.entries()) {
      const last = i === names.length - 1;
      const flags = constants.O_RDONLY | constants.O_NOFOLLOW | (last ? constants.O_NONBLOCK : constants.O_DIRECTORY);
      let next: FileHandle;
      try {
        next = await open(`/proc/self/fd/${dir.fd}/${name}`, flags);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
        throw err;
      }
      if (last) return next;
      await dir.close();
      dir = next;
    }
    return null;
  } finally {
    await dir.close().catch(() => undefined);
  }
}
