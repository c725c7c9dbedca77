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
import { open, readdir } from 'node:fs/promises';
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

/**
 * Entries of /proc read at once: the scan stays off the event loop (a sync
 * scan of ~100 processes blocked it for 5-90 ms under load, hundreds of times
 * in a soak: issue 38) without taking the whole thread pool the store's
 * fsyncs need.
 */
const SCAN_LANES = 2;
/** /proc/<pid>/stat is one line well under this (the command name is at most 64 bytes). */
const STAT_BYTES = 1024;

/** Members of the group that are not zombies, from /proc; null where /proc is unavailable. */
export async function runningMembers(pgid: number): Promise<number[] | null> {
  let names: string[];
  try {
    names = await readdir('/proc');
  } catch {
    return null;
  }
  const pids = names.filter((name) => name.charCodeAt(0) >= 48 && name.charCodeAt(0) <= 57);
  const members: number[] = [];
  const buffer = Buffer.alloc(SCAN_LANES * STAT_BYTES);
  let next = 0;
  const lane = async (slot: Buffer) => {
    while (next < pids.length) {
      const name = pids[next++]!;
      const stat = await readStat(name, slot);
      if (stat === null) continue; // exited while we looked
      // The command name may contain ')' and spaces: fields start after the last ')'.
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const state = fields[0];
      if (Number(fields[2]) === pgid && state !== 'Z' && state !== 'X') members.push(Number(name));
    }
  };
  await Promise.all(Array.from({ length: SCAN_LANES }, (_, i) => lane(buffer.subarray(i * STAT_BYTES, (i + 1) * STAT_BYTES))));
  return members.sort((a, b) => a - b);
}

/** The process's stat line, read in one call into `into`; null once it is gone. */
async function readStat(pid: string, into: Buffer): Promise<string | null> {
  let handle;
  try {
    handle = await open(`/proc/${pid}/stat`, 'r');
    const { bytesRead } = await handle.read(into, 0, into.length, 0);
    return into.toString('latin1', 0, bytesRead);
  } catch {
    return null;
  } finally {
    await handle?.close().catch(() => undefined);
  }
}

export async function groupRunning(pgid: number): Promise<boolean> {
  if (pgid <= 0 || !signalable(pgid)) return false;
  const members = await runningMembers(pgid);
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
  while (await groupRunning(pgid)) {
    await sleep(POLL_MS);
    const now = Date.now();
    if (now - lastKill >= REKILL_EVERY_MS) {
      killGroup(pgid, 'SIGKILL');
      lastKill = now;
    }
    if (now >= nextReport) {
      onStuck?.((await runningMembers(pgid)) ?? [], now - startedAt);
      nextReport = now + STUCK_REPORT_MS;
    }
  }
}
