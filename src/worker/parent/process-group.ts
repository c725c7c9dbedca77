/**
 * Signalling and watching a worker's process group (the worker leads it;
 * droid and droid's commands inherit it).
 *
 * "Gone" means no member is still running. Zombies do not count: measured
 * here, every member of a SIGKILLed group was a zombie within 20–35 ms, but
 * `kill(-pgid, 0)` kept answering "alive" for 1.2–2.0 s more, until PID 1
 * got round to reaping the orphans (a PID 1 that never reaps would make it
 * answer "alive" forever). A zombie runs no code and holds no files, so the
 * workspace lock can go; a member that is really running keeps it, however
 * long that takes (the spec holds the lock until cleanup).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';

const POLL_MS = 20;
const REKILL_EVERY_MS = 1_000;
const STUCK_REPORT_MS = 10_000;

export function killGroup(pgid: number, signal: NodeJS.Signals): void {
  if (pgid <= 0) return;
  try {
    process.kill(-pgid, signal);
  } catch {
    // ESRCH: the group is already gone.
  }
}

function signalable(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Members of the group that are not zombies, from /proc; null where /proc is unavailable. */
export function runningMembers(pgid: number): number[] | null {
  let names: string[];
  try {
    names = readdirSync('/proc');
  } catch {
    return null;
  }
  const members: number[] = [];
  for (const name of names) {
    if (name.charCodeAt(0) > 57 || name.charCodeAt(0) < 48) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${name}/stat`, 'latin1');
    } catch {
      continue; // exited while we looked
    }
    // The command name may contain ')' and spaces: fields start after the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const state = fields[0];
    if (Number(fields[2]) === pgid && state !== 'Z' && state !== 'X') members.push(Number(name));
  }
  return members;
}

export function groupRunning(pgid: number): boolean {
  if (pgid <= 0 || !signalable(pgid)) return false;
  const members = runningMembers(pgid);
  return members === null ? true : members.length > 0;
}

/**
 * Kills the group and resolves once no member runs. Never gives up: a member
 * that survives SIGKILL (uninterruptible I/O) keeps the lock, and is reported
 * through `onStuck` every STUCK_REPORT_MS.
 */
export async function killGroupAndWait(pgid: number, onStuck?: (members: number[], waitedMs: number) => void): Promise<void> {
  const startedAt = Date.now();
  let lastKill = startedAt;
  let nextReport = startedAt + STUCK_REPORT_MS;
  killGroup(pgid, 'SIGKILL');
  while (groupRunning(pgid)) {
    await sleep(POLL_MS);
    const now = Date.now();
    if (now - lastKill >= REKILL_EVERY_MS) {
      killGroup(pgid, 'SIGKILL');
      lastKill = now;
    }
    if (now >= nextReport) {
      onStuck?.(runningMembers(pgid) ?? [], now - startedAt);
      nextReport = now + STUCK_REPORT_MS;
    }
  }
}
