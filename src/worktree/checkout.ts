/**
 * A session's checkout on disk: made from the workspace's HEAD on the
 * session's own branch, its branch brought back into the repository after
 * each writer turn, its commits ahead of the base, and what removing it
 * would lose. All git goes through confined-git.ts.
 *
 * The checkout is a local clone that borrows the repository's objects
 * (`git clone --shared`): a turn writes only the clone (its own objects,
 * refs, config and hooks), never the repository's `.git`. A `git worktree`
 * would need the repository's object store and refs folder writable to
 * commit, and with those a turn could delete the repository's packs or move
 * another session's branch (measured: bench/checkout.ts, README).
 */
import { lstat, mkdir, readdir, readFile, rmdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { CheckoutRecord, CommitsAhead } from '../shared/checkout-types.js';
import { ControllerError } from '../shared/public-error.js';
import { removeTree } from '../util/remove-tree.js';
import { confinedGit, GitUnavailable, type GitHost } from './confined-git.js';

/** Making one checkout (a clone and its files) may take this long; then it is given up. */
const CREATE_TIMEOUT_MS = 120_000;
/** Every other git call on a checkout or its repository. */
const GIT_TIMEOUT_MS = 15_000;
/** Commits ahead listed by sha and subject; the rest are counted. */
const MAX_LISTED_COMMITS = 20;
const SUBJECT_CHARS = 200;

export interface Repository {
  /** Top-level work tree. */
  top: string;
  /** Its git (common) directory: where branches and objects live. */
  gitDir: string;
  /** The workspace's path below `top` ('' at the top, else ending in '/'). */
  prefix: string;
}

/** The workspace's repository, or null when it is not inside a git work tree (or git cannot tell). */
export async function inspectRepository(host: GitHost, workspace: string): Promise<Repository | null> {
  try {
    const out = await confinedGit(host, { cwd: workspace, writable: false, timeoutMs: GIT_TIMEOUT_MS }, [
      'rev-parse',
      '--path-format=absolute',
      '--show-toplevel',
      '--git-common-dir',
      '--show-prefix',
    ]);
    const [top, gitDir, prefix = ''] = out.split('\n');
    if (!top || !gitDir) return null;
    return { top, gitDir, prefix };
  } catch (err) {
    if (err instanceof GitUnavailable) return null;
    throw err;
  }
}

/** The commit the workspace's HEAD names, or null (no commit yet). */
async function headCommit(host: GitHost, workspace: string): Promise<string | null> {
  const out = await confinedGit(host, { cwd: workspace, writable: false, timeoutMs: GIT_TIMEOUT_MS }, [
    'rev-parse',
    '--verify',
    '--quiet',
    'HEAD^{commit}',
  ]).catch(() => null);
  return out?.trim() || null;
}

/** The commit at the tip of `branch` in the repository (a fork's source's), or null when there is none. */
async function branchTip(host: GitHost, gitDir: string, branch: string): Promise<string | null> {
  const inMain = { cwd: gitDir, writable: false, timeoutMs: GIT_TIMEOUT_MS };
  const out = await confinedGit(host, inMain, ['--git-dir', gitDir, 'rev-parse', '--verify', '--quiet', `refs/heads/${branch}^{commit}`]).catch(() => null);
  return out?.trim() || null;
}

function failed(what: string, err: unknown, action: string): ControllerError {
  return new ControllerError('checkout_failed', `${what}: ${(err as Error).message}`, action);
}

/**
 * Makes the checkout of `rec` (pending): the branch in the repository at the
 * workspace's HEAD, then the clone on it. A folder already at `rec.path` is
 * never touched. Resolves the record as made (ready, with its base).
 */
export async function makeCheckout(host: GitHost, rec: CheckoutRecord, sourceWorkspace: string): Promise<CheckoutRecord> {
  // A crash after the branch was made (the record still pending) left it at the base it was made from: resume from it.
  const made = await branchTip(host, rec.gitDir, rec.branch);
  const base = made ?? (rec.from ? await branchTip(host, rec.gitDir, rec.from) : await headCommit(host, sourceWorkspace));
  if (!base)
    throw new ControllerError(
      'checkout_failed',
      rec.from ? `the branch ${rec.from} the fork's checkout is made from is not in the repository` : 'the workspace has no commit to make a checkout from',
      'Commit once in the repository, then start a new session.',
    );
  await claimFolder(rec);
  try {
    // The branch first, in the repository: it keeps the base reachable whatever happens to the workspace's HEAD.
    if (!made)
      await confinedGit(host, { cwd: rec.gitDir, writable: true, timeoutMs: GIT_TIMEOUT_MS }, [
        '--git-dir',
        rec.gitDir,
        'branch',
        '--no-track',
        '--',
        rec.branch,
        base,
      ]);
    await confinedGit(host, { cwd: rec.path, writable: true, timeoutMs: CREATE_TIMEOUT_MS }, [
      '-c',
      'gc.auto=0',
      'clone',
      '--quiet',
      '--shared',
      '--no-tags',
      '--branch',
      rec.branch,
      '--',
      rec.gitDir,
      rec.path,
    ]);
  } catch (err) {
    // Only what this call made goes: the folder holds no turn's work yet. The branch stays (never deleted here).
    await removeTree(rec.path);
    await rmdir(rec.path).catch(() => undefined);
    throw failed('could not make the checkout', err, 'Check the repository (git status, git branch) and start a new session; nothing was submitted.');
  }
  return { ...rec, base, state: 'ready' };
}

/**
 * An empty folder at `rec.path`, made now or left by a crash before the
 * checkout was recorded as made. A clone of this repository left there the
 * same way is emptied (no turn ever ran in it: the record is still pending);
 * anything else is never touched.
 */
async function claimFolder(rec: CheckoutRecord): Promise<void> {
  try {
    await mkdir(rec.path, { mode: 0o700 });
    return;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST')
      throw failed('could not make the checkout folder', err, 'Check the checkouts directory; nothing was submitted.');
  }
  const info = await lstat(rec.path);
  const names = info.isDirectory() && !info.isSymbolicLink() ? await readdir(rec.path) : null;
  const config = names?.includes('.git') ? await readFile(join(rec.path, '.git', 'config'), 'utf8').catch(() => '') : '';
  const ours = names !== null && (names.length === 0 || config.includes(`url = ${rec.gitDir}\n`));
  if (!ours)
    throw new ControllerError(
      'checkout_failed',
      'could not make the checkout folder: something else is already at its place (kept as it is)',
      'Move the folder aside or start a new session; nothing was submitted.',
    );
  if (names.length > 0 && (await removeTree(rec.path)) !== null)
    throw new ControllerError(
      'checkout_failed',
      'an unfinished checkout left by a crash could not be cleared',
      'Remove the folder by hand, then retry; nothing was submitted.',
    );
  await mkdir(rec.path, { mode: 0o700 }).catch(() => undefined);
}

/** The branch's commits ahead of its base, read where they are (the repository when synced, else the checkout); null when git cannot tell. */
export async function commitsAhead(host: GitHost, rec: CheckoutRecord, inRepository: boolean, notBroughtBack?: string): Promise<CommitsAhead | null> {
  if (!rec.base) return null;
  const where = inRepository ? { cwd: rec.gitDir, gitDir: rec.gitDir } : { cwd: rec.path, gitDir: join(rec.path, '.git') };
  const range = `${rec.base}..refs/heads/${rec.branch}`;
  const call = { cwd: where.cwd, writable: false, timeoutMs: GIT_TIMEOUT_MS };
  try {
    const count = Number((await confinedGit(host, call, ['--git-dir', where.gitDir, 'rev-list', '--count', range])).trim());
    const log = await confinedGit(host, call, [
      '--git-dir',
      where.gitDir,
      'log',
      '--no-color',
      `--max-count=${MAX_LISTED_COMMITS}`,
      '--format=%H%x1f%s',
      range,
    ]);
    const commits = log
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => {
        const [sha = '', subject = ''] = line.split('\x1f');
        return { sha, subject: subject.slice(0, SUBJECT_CHARS) };
      });
    return {
      branch: rec.branch,
      ahead: count,
      commits,
      truncated: Math.max(0, count - commits.length),
      inRepository,
      ...(!inRepository && notBroughtBack !== undefined && { notBroughtBack }),
    };
  } catch (err) {
    if (err instanceof GitUnavailable) return null;
    throw err;
  }
}

/** Removes the checkout's folder (the branch stays); rejects when it could not. */
export async function removeCheckout(rec: CheckoutRecord): Promise<void> {
  const problem = await removeTree(rec.path);
  if (problem !== null)
    throw new ControllerError(
      'checkout_remove_failed',
      `the checkout could not be removed: ${problem}`,
      'Remove the folder by hand once you have checked it, then archive again.',
    );
}
