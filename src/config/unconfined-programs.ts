/**
 * What the controller runs outside every sandbox: droid-mcp's own install
 * (its code and node_modules, which the controller and every worker load),
 * Node, bwrap (which starts every turn), droid (its version probe and the
 * operator's commands run it unconfined), and whatever it finds by name on
 * PATH (git, tar, …). A writer turn whose approved root holds one of them,
 * or a link on the way to one, can rewrite it, and the controller runs the
 * turn's code unconfined: measured, a bwrap turn appended to the worker
 * bundle of an install inside its root, and the next worker wrote a file
 * outside.
 */
import { existsSync } from 'node:fs';
import { lstat, readlink } from 'node:fs/promises';
import { dirname, isAbsolute, join, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { unconfinedProblem, type PlacementProblem } from './placement.js';

export interface UnconfinedProgram {
  /** How a refusal names it. */
  what: string;
  path: string;
}

/** The nearest folder above this module holding a package.json: the repository, or the installed package. */
export function installRoot(): string {
  const start = dirname(fileURLToPath(import.meta.url));
  for (let dir = start; ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'package.json'))) return dir;
    if (dirname(dir) === dir) return start;
  }
}

/** The controller's own: its install (as found from this module and as started), and Node. */
export function ownPrograms(over: { install?: string | undefined; node?: string | undefined } = {}): UnconfinedProgram[] {
  const started = process.argv[1];
  return [
    { what: "droid-mcp's install", path: over.install ?? installRoot() },
    ...(over.install === undefined && started !== undefined && isAbsolute(started) ? [{ what: "droid-mcp's install", path: dirname(started) }] : []),
    { what: 'the Node.js executable', path: over.node ?? process.execPath },
  ];
}

/** Symbolic links followed on the way to a file; the kernel stops at 40. */
const MAX_LINKS = 40;

/**
 * Every place an absolute path passes through on its way to its file: each
 * symbolic link met (where the link itself lies, in its resolved folder),
 * and where it ends. A turn that can write any of them can redirect the
 * path. Parts that do not exist end the walk as they are named.
 */
async function pathLocations(path: string): Promise<string[]> {
  const locations: string[] = [];
  let dir: string = sep;
  const parts = path.split(sep).filter((p) => p !== '' && p !== '.');
  for (let links = 0; parts.length > 0;) {
    const part = parts.shift()!;
    if (part === '..') {
      dir = dirname(dir);
      continue;
    }
    const next = join(dir, part);
    const stat = await lstat(next).catch(() => null);
    if (stat === null) {
      locations.push(join(next, ...parts));
      return locations;
    }
    if (!stat.isSymbolicLink()) {
      dir = next;
      continue;
    }
    locations.push(next);
    if (++links > MAX_LINKS) return locations;
    const target = await readlink(next);
    if (isAbsolute(target)) dir = sep;
    parts.unshift(...target.split(sep).filter((p) => p !== '' && p !== '.'));
  }
  locations.push(dir);
  return locations;
}

/**
 * The refusal when an approved root (canonical) holds one of `programs` or a
 * link on the way to it. Each path is walked once (PATH repeats entries, and
 * Node's folder is often on it); a refusal names its first holder.
 */
export async function unconfinedIn(approvedRoots: readonly string[], programs: readonly UnconfinedProgram[]): Promise<PlacementProblem | null> {
  const walked = programs.filter((p, i) => programs.findIndex((q) => q.path === p.path) === i);
  return unconfinedProblem(approvedRoots, await Promise.all(walked.map(async (p) => ({ ...p, locations: await pathLocations(p.path) }))));
}
