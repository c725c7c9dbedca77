/**
 * What is in the checkouts directory, against what the state says: the
 * checkouts sessions own, folders no session owns (orphans: a crash between
 * making a folder and recording it, a removed session's leftovers, or
 * something else), checkouts the state names that are gone, and checkouts
 * kept after a crash (a session with a turn of unknown outcome). Nothing
 * here removes anything: it is reported, at start-up and by doctor.
 */
import { lstat, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { SessionRecord } from '../shared/records.js';

export interface CheckoutSurvey {
  directory: string;
  /** Folders in the directory that a session's live checkout names. */
  owned: string[];
  /** Folders no session's live checkout names. */
  orphans: string[];
  /** Live checkouts the state names whose folder is gone. */
  missing: string[];
  /** Owned checkouts of sessions with a turn whose outcome is unknown: kept for inspection. */
  kept: string[];
}

/** Which folders are whose. Pure: `names` are the entries of `directory`. */
export function classifyCheckouts(
  directory: string,
  names: readonly string[],
  sessions: Iterable<SessionRecord>,
  unknownSessions: ReadonlySet<string>,
): CheckoutSurvey {
  const present = new Set(names.map((name) => join(directory, name)));
  const survey: CheckoutSurvey = { directory, owned: [], orphans: [], missing: [], kept: [] };
  const live = new Set<string>();
  for (const session of sessions) {
    const checkout = session.checkout;
    if (!checkout || checkout.state === 'removed' || !checkout.path.startsWith(`${directory}/`)) continue;
    live.add(checkout.path);
    if (!present.has(checkout.path)) {
      if (checkout.state === 'ready') survey.missing.push(checkout.path);
      continue;
    }
    survey.owned.push(checkout.path);
    if (unknownSessions.has(session.id)) survey.kept.push(checkout.path);
  }
  for (const path of present) if (!live.has(path)) survey.orphans.push(path);
  for (const list of [survey.owned, survey.orphans, survey.missing, survey.kept]) list.sort();
  return survey;
}

/** The directory's entries now (none when it cannot be read). */
export async function checkoutFolders(directory: string): Promise<string[]> {
  return readdir(directory).catch(() => []);
}

const MAX_WALK_ENTRIES = 2_000_000;

/** Bytes allocated under `path` (like du), walking without following links; `complete` false when the walk was cut short. */
export async function diskUsage(path: string): Promise<{ bytes: number; complete: boolean }> {
  let bytes = 0;
  let seen = 0;
  const walk = async (p: string): Promise<boolean> => {
    if (++seen > MAX_WALK_ENTRIES) return false;
    const info = await lstat(p).catch(() => null);
    if (!info) return true;
    bytes += info.blocks * 512;
    if (!info.isDirectory()) return true;
    for (const name of await readdir(p).catch(() => [])) if (!(await walk(join(p, name)))) return false;
    return true;
  };
  const complete = await walk(path);
  return { bytes, complete };
}
