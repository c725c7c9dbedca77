/**
 * The host paths a sandbox is built from, made or found when a droid starts:
 * the private temp root and each turn's TMPDIR in it (bwrap-args.ts covers
 * the root and binds back only the turn's own), the entries of droid's home
 * to show, and the runtime directory to cover.
 */
import { lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import type { ReadSpec } from './sandbox.js';
import { DroidError } from '../droid/errors.js';
import { currentUid, privateTmpRootIn } from '../shared/host-paths.js';
import { removeTree } from '../util/remove-tree.js';
import { shownFactoryEntries } from './bwrap-args.js';

/**
 * The one folder every per-turn folder of this user lives in (TMPDIRs,
 * private sessions copies): `<tmpdir>/droid-mcp-<uid>`, a real directory of
 * ours with mode 700. Every sandbox covers it with an empty read-only tmpfs
 * and binds back only its own TMPDIR, so no turn sees another turn's files
 * (same user: modes do not separate them). Refused when someone else made it.
 */
export function privateTmpRoot(): string {
  const uid = currentUid();
  const root = privateTmpRootIn(tmpdir(), uid);
  try {
    mkdirSync(root, { mode: 0o700 });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  const info = lstatSync(root);
  if (!info.isDirectory() || info.uid !== uid || (info.mode & 0o077) !== 0) {
    throw new DroidError(
      'sandbox_unavailable',
      `${root} is not a private directory of this user (a symlink, another owner or a shared mode); remove it and retry`,
    );
  }
  return root;
}

/** The entries of droid's home a sandbox shows, listed now (bwrap binds only existing paths); the home is made when missing. */
export function listFactoryEntries(factoryDir: string, droidPath?: string): string[] {
  mkdirSync(factoryDir, { recursive: true, mode: 0o700 });
  return shownFactoryEntries(readdirSync(factoryDir), factoryDir, droidPath);
}

/** A turn's private TMPDIR; `dispose` removes it, never rejects, and resolves what it could not remove (or null). */
export interface TurnTmp {
  turnTmp: string;
  dispose(): Promise<string | null>;
}

/** How a turn's private TMPDIR is named in the private temp root: this, then its run id (or a random name). */
export const TURN_TMP_PREFIX = 'turn-';

/** A turn's private TMPDIR, `turn-<name>` in the private temp root (a random name when none is given). */
export function makeTurnTmp(name?: string): TurnTmp {
  const root = privateTmpRoot();
  let turnTmp: string;
  if (name === undefined) turnTmp = mkdtempSync(join(root, TURN_TMP_PREFIX));
  else {
    turnTmp = join(root, `${TURN_TMP_PREFIX}${name}`);
    mkdirSync(turnTmp, { mode: 0o700 });
  }
  return { turnTmp, dispose: () => removeTree(turnTmp) };
}

/**
 * What a short-lived sandbox needs from the host: a private TMPDIR, and the
 * entries of droid's home to show. `droidPath` inside droid's home keeps
 * its entry visible.
 */
export function prepareTurnPaths(factoryDir: string, droidPath?: string): { turnTmp: string; factoryEntries: string[]; dispose(): Promise<string | null> } {
  const factoryEntries = listFactoryEntries(factoryDir, droidPath);
  return { ...makeTurnTmp(), factoryEntries };
}

/** The service user's runtime directory (XDG_RUNTIME_DIR, else /run/user/<uid>), when it exists. */
export function runtimeDirOf(env: Readonly<Record<string, string>>): string | null {
  const uid = typeof process.getuid === 'function' ? process.getuid() : null;
  const candidates = [env.XDG_RUNTIME_DIR, uid === null ? undefined : `/run/user/${uid}`];
  for (const dir of candidates) {
    if (dir && dir.startsWith('/') && isDirectory(dir)) return dir;
  }
  return null;
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

/**
 * A sandbox's reads for one droid: the host's list, plus droid's install,
 * the git folder of a repository the workspace is a subfolder of, and what
 * the turn adds (a checkout's borrowed objects).
 */
export function turnReads(
  reads: ReadSpec | undefined,
  droidPath: string,
  workspace: string | null,
  extra: readonly string[] = [],
): { reads: ReadSpec } | Record<string, never> {
  if (!reads) return {};
  return {
    reads: { hidden: reads.hidden, readable: [...reads.readable, ...droidReadable(droidPath), ...(workspace ? enclosingGitDirs(workspace) : []), ...extra] },
  };
}

/**
 * The `.git` of the repository a workspace lies inside (below its top): the
 * repository's root may be covered (an approved root), and git inside the
 * workspace needs it. A gitfile (a linked worktree) adds the folders it names.
 */
function enclosingGitDirs(workspace: string): string[] {
  for (let dir = dirname(workspace); ; dir = dirname(dir)) {
    const dotGit = join(dir, '.git');
    try {
      const info = lstatSync(dotGit);
      if (info.isDirectory()) return [dotGit];
      if (!info.isFile()) return [];
      const gitdir = /^gitdir: (.+)$/m.exec(readFileSync(dotGit, 'utf8'))?.[1]?.trim();
      if (!gitdir) return [dotGit];
      const target = resolve(dir, gitdir);
      const common = (() => {
        try {
          return resolve(target, readFileSync(join(target, 'commondir'), 'utf8').trim());
        } catch {
          return null;
        }
      })();
      return [dotGit, target, ...(common ? [common] : [])];
    } catch {
      // No .git here: look further up.
    }
    if (dir === '/') return [];
  }
}

/**
 * droid's install, shown read-only when it sits in a covered folder (a home,
 * an approved root): the folder holding the executable, at the path droid is
 * started by and at its real one.
 */
function droidReadable(droidPath: string): string[] {
  const out = [dirname(droidPath)];
  try {
    out.push(dirname(realpathSync(droidPath)));
  } catch {
    // The start's own check names a missing droid.
  }
  return [...new Set(out)];
}
