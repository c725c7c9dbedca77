/**
 * doctor's line about session checkouts (issue 21): how many exist, the disk
 * they take, and which no session owns. Read from the state without taking
 * its lock (a live controller may own it); nothing is changed or removed.
 */
import { loadState } from '../store/load.js';
import { checkoutFolders, classifyCheckouts, diskUsage } from '../worktree/inventory.js';

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
    action: 'Orphaned folders belong to no session: inspect each (git -C <folder> status, git log) and remove it by hand when nothing in it is needed; nothing removes them for you. Archive sessions whose checkout is missing.',
  };
}
