/**
 * doctor's line about session checkouts (issue 21): how many exist, the disk
 * they take, and which no session owns. Read from the state without taking
 * its lock (a live controller may own it); nothing is changed or removed.
 */
import { execFile } from 'node:child_process';
import { loadState } from '../../store/load.js';
import { checkoutFolders, classifyCheckouts, diskUsage } from '../../worktree/inventory.js';

interface CheckoutsCheck {
  name: string;
  status: 'ok' | 'warn';
  detail: string;
  action: string | null;
}

const NAME = 'session checkouts';

export async function checkCheckouts(directory: string | undefined, stateDirectory: string): Promise<CheckoutsCheck | null> {
  if (directory === undefined) return null;
  const names = await checkoutFolders(directory);
  let bytes = 0;
  let complete = true;
  for (const name of names) {
    const usage = await diskUsage(`${directory}/${name}`);
    bytes += usage.bytes;
    complete &&= usage.complete;
  }
  const size = `${(bytes / 1024 / 1024).toFixed(1)} MiB${complete ? '' : ' or more'}`;
  let survey;
  try {
    const state = await loadState(stateDirectory);
    survey = classifyCheckouts(directory, names, state.index.sessions.values(), new Set());
    await state.index.runs.close();
  } catch (err) {
    const detail = `${names.length} folder(s) in ${directory}, ${size}; the state could not be read to tell whose (${(err as Error).message})`;
    return { name: NAME, status: 'warn', detail, action: 'Fix the state directory (see the state check above), then run doctor again.' };
  }
  const detail = `${survey.owned.length} checkout(s) in ${directory}, ${size} in all; ${survey.orphans.length} orphaned${survey.orphans.length ? `: ${survey.orphans.join(', ')}` : ''}`;
  if (survey.orphans.length === 0 && survey.missing.length === 0) return { name: NAME, status: 'ok', detail, action: null };
  const missing = survey.missing.length ? `; missing: ${survey.missing.join(', ')}` : '';
  return {
    name: NAME,
    status: 'warn',
    detail: detail + missing,
    action:
      'Orphaned folders belong to no session: inspect each (git -C <folder> status, git log) and remove it by hand when nothing in it is needed; nothing removes them for you. Archive sessions whose checkout is missing.',
  };
}

/** The first patched release of each line since the May 2024 fixes (CVE-2024-32004 and others); later lines are all fixed. */
const PATCHED: Record<string, number> = { '2.39': 4, '2.40': 2, '2.41': 1, '2.42': 2, '2.43': 4, '2.44': 1, '2.45': 1 };

/** Why this `git --version` output names a git too old to serve from a checkout a turn rigged, or null. Pure. */
export function gitVersionProblem(versionOutput: string): string | null {
  const m = /git version (\d+)\.(\d+)\.(\d+)/.exec(versionOutput);
  if (!m) return `git's version could not be read (${versionOutput.trim().slice(0, 80) || 'no output'})`;
  const [major, minor, patch] = [Number(m[1]), Number(m[2]), Number(m[3])];
  const line = `${major}.${minor}`;
  const old = major < 2 || (major === 2 && minor < 39) || (PATCHED[line] !== undefined && patch < PATCHED[line]);
  return old ? `git ${major}.${minor}.${patch} predates the 2024 fixes for repositories a turn controls (needs 2.39.4, 2.45.1 or later)` : null;
}

/** doctor's line about the git that checkouts run: warns on a git older than the fixes the checkouts' defences lean on. */
export async function checkCheckoutGit(directory: string | undefined, gitPath = 'git'): Promise<CheckoutsCheck | null> {
  if (directory === undefined) return null;
  const out = await new Promise<string>((resolve) =>
    execFile(gitPath, ['--version'], { timeout: 10_000, encoding: 'utf8' }, (err, stdout) => resolve(err ? `${err.message}` : stdout)),
  );
  const problem = gitVersionProblem(out);
  if (problem === null) return { name: 'checkouts git', status: 'ok', detail: out.trim(), action: null };
  return {
    name: 'checkouts git',
    status: 'warn',
    detail: problem,
    action: "Upgrade git (the distribution's security updates carry the fixes) before enabling session checkouts.",
  };
}
