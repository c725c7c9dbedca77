/**
 * What removing a session's checkout would lose, looked at so that nothing a
 * turn can arrange hides work: the checkout's index flags, its ignore rules
 * and its refs are the turn's, so none of them is trusted.
 *
 * - Any `.git` below the checkout's top (a nested repository, a submodule, a
 *   worktree) blocks: its commits are in no store the repository can hold.
 * - Index entries marked assume-unchanged or skip-worktree block: git would
 *   not look at the file.
 * - Tracked files are compared with stat checks git cannot be told to relax.
 * - Every file git does not track blocks, ignored ones too (ignore rules are
 *   the turn's: info/exclude, core.excludesFile, an untracked .gitignore).
 * - Every object reachable from the checkout's refs (remote-tracking ones
 *   and tags included), its HEAD and its reflogs must be reachable from the
 *   repository's refs.
 * Anything that cannot be answered counts as a reason.
 */
import { lstat, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { CheckoutRecord } from '../shared/checkout-types.js';
import { confinedGit, type GitHost } from './confined-git.js';

const GIT_TIMEOUT_MS = 15_000;
const LISTED_PATHS = 5;
/** A checkout with more entries than this is not walked to the end: it counts as a reason. */
const MAX_WALK_ENTRIES = 500_000;
/** Stat checks git may not be told to skip by the checkout's config. */
const STRICT_STAT = ['-c', 'core.checkStat=default', '-c', 'core.trustctime=true', '-c', 'core.ignoreStat=false', '-c', 'core.fsmonitor=false'];

function listed(what: string, paths: readonly string[]): string {
  const shown = paths.slice(0, LISTED_PATHS).join(', ') + (paths.length > LISTED_PATHS ? ` and ${paths.length - LISTED_PATHS} more` : '');
  return `the checkout has ${paths.length} ${what}: ${shown}`;
}

/** Why removing the checkout would lose work, or null when nothing would be lost. */
export async function removalBlocker(host: GitHost, rec: CheckoutRecord): Promise<string | null> {
  try {
    return (await fileBlocker(host, rec)) ?? (await objectBlocker(host, rec));
  } catch (err) {
    return `git could not check the checkout (${(err as Error).message})`;
  }
}

async function fileBlocker(host: GitHost, rec: CheckoutRecord): Promise<string | null> {
  const top = await lstat(join(rec.path, '.git')).catch(() => null);
  if (!top?.isDirectory()) return "the checkout's .git is not a real directory, so what it holds cannot be checked";
  const nested = await nestedGits(rec.path);
  if (nested === null) return `the checkout has more than ${MAX_WALK_ENTRIES} entries to check`;
  if (nested.length > 0) return listed('nested repository or submodule folder(s), whose commits the repository does not hold', nested);
  const inClone = { cwd: rec.path, writable: false, timeoutMs: GIT_TIMEOUT_MS };
  const flags = (await confinedGit(host, inClone, ['ls-files', '-v', '-z'])).split('\0').filter(Boolean);
  // ls-files -v: a lower-case tag is assume-unchanged, S is skip-worktree.
  const hidden = flags.filter((entry) => /^[a-z]|^S/.test(entry)).map((entry) => entry.slice(2));
  if (hidden.length > 0) return listed('tracked path(s) git is told not to look at (assume-unchanged or skip-worktree)', hidden);
  const status = await confinedGit(host, inClone, [...STRICT_STAT, 'status', '--porcelain=v1', '-z', '--untracked-files=no', '--ignore-submodules=none']);
  const changed = status
    .split('\0')
    .filter((entry) => entry.length > 3)
    .map((entry) => entry.slice(3));
  if (changed.length > 0) return listed('uncommitted path(s)', changed);
  // No exclude options: every untracked file is listed, ignored or not.
  const untracked = (await confinedGit(host, inClone, ['ls-files', '-z', '--others', '--directory', '--no-empty-directory'])).split('\0').filter(Boolean);
  if (untracked.length > 0) return listed('untracked path(s), ignored ones included', untracked);
  return null;
}

async function objectBlocker(host: GitHost, rec: CheckoutRecord): Promise<string | null> {
  const inMain = { cwd: rec.gitDir, writable: false, timeoutMs: GIT_TIMEOUT_MS };
  const tip = (
    await confinedGit(host, inMain, ['--git-dir', rec.gitDir, 'rev-parse', '--verify', '--quiet', `refs/heads/${rec.branch}^{commit}`]).catch(() => '')
  ).trim();
  if (!tip) return `the branch ${rec.branch} is missing from the repository ${rec.repository}`;
  const held = (await confinedGit(host, inMain, ['--git-dir', rec.gitDir, 'for-each-ref', '--format=%(objectname)'])).split('\n').filter(Boolean);
  const inClone = { cwd: rec.path, writable: false, timeoutMs: GIT_TIMEOUT_MS };
  const stdin = [...new Set(held)].map((sha) => `^${sha}`).join('\n') + '\n';
  const args = ['rev-list', '--objects', '--all', '--reflog', 'HEAD', '--stdin'];
  const unheld = (await confinedGit(host, inClone, args, stdin)).split('\n').filter(Boolean);
  if (unheld.length > 0)
    return `${unheld.length} object(s) of the checkout (commits, tags or files from ${unheld[0]!.slice(0, 12)}…) are on none of the repository's refs, such as its branch ${rec.branch}`;
  return null;
}

/** Paths (below `top`) of every `.git` but the top's own, never following links; null when there are too many entries to walk. */
async function nestedGits(top: string): Promise<string[] | null> {
  const found: string[] = [];
  let seen = 0;
  const walk = async (dir: string, rel: string): Promise<boolean> => {
    for (const entry of await readdir(dir, { withFileTypes: true })) {
      if (++seen > MAX_WALK_ENTRIES) return false;
      const path = rel === '' ? entry.name : `${rel}/${entry.name}`;
      if (entry.name === '.git') {
        if (rel !== '') found.push(path);
        continue;
      }
      if (entry.isDirectory() && !(await walk(join(dir, entry.name), path))) return false;
    }
    return true;
  };
  return (await walk(top, '')) ? found : null;
}
