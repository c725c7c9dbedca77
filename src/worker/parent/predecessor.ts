/**
 * What a controller killed outright left running, found and stopped by the
 * next one before it admits a turn (issue 38).
 *
 * Every process a controller starts after it owns its state directory (its
 * workers, the droids and bubblewrap they start, short-lived droids, and
 * whatever droid runs) inherits OWNER_MARK_VAR, whose value names that
 * owner: its pid and the time its owner record was written, which no other
 * controller shares. The next start reads the previous owner's record, finds
 * every running process whose initial environment holds that exact value,
 * and kills it (its whole process group when it leads one: a worker's group
 * holds the network helper, which starts with a clean environment). Such a
 * process is provably that controller's: the value reaches a process only
 * by inheritance from it. A process of another user is not readable, and
 * not ours to stop.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { killGroup } from './process-group.js';

/** The environment variable that names a process's owning controller. */
export const OWNER_MARK_VAR = 'DROID_MCP_OWNER';

const POLL_MS = 20;
const STUCK_REPORT_MS = 10_000;

/** The mark of an owner record: its pid and when it was written (milliseconds). */
export function ownerMark(owner: { pid: number; startedAt: string }): string {
  return `${owner.pid}@${owner.startedAt}`;
}

/** Running (not zombie) processes other than this one whose initial environment holds OWNER_MARK_VAR=`mark`, with their process groups. */
function markedProcesses(mark: string): Array<{ pid: number; pgid: number }> {
  const want = `${OWNER_MARK_VAR}=${mark}`;
  let names: string[];
  try {
    names = readdirSync('/proc');
  } catch {
    return [];
  }
  const out: Array<{ pid: number; pgid: number }> = [];
  for (const name of names) {
    if (name.charCodeAt(0) > 57 || name.charCodeAt(0) < 48 || Number(name) === process.pid) continue;
    try {
      if (!readFileSync(`/proc/${name}/environ`, 'latin1').split('\0').includes(want)) continue;
      const stat = readFileSync(`/proc/${name}/stat`, 'latin1');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (fields[0] !== 'Z' && fields[0] !== 'X') out.push({ pid: Number(name), pgid: Number(fields[2]) });
    } catch {
      // gone while we looked, or not ours to read
    }
  }
  return out;
}

/**
 * Kills every running process marked with `mark` and resolves once none
 * runs, with how many there were at first. A member that survives SIGKILL
 * (uninterruptible I/O) is waited for, reported through `onStuck` every
 * STUCK_REPORT_MS: it may still write where the next turn would.
 */
export async function stopMarkedProcesses(mark: string, onStuck?: (pids: number[], waitedMs: number) => void): Promise<number> {
  const startedAt = Date.now();
  let nextReport = startedAt + STUCK_REPORT_MS;
  let found: number | undefined;
  for (;;) {
    const marked = markedProcesses(mark);
    found ??= marked.length;
    if (marked.length === 0) return found;
    for (const { pid, pgid } of marked) {
      if (pgid === pid) killGroup(pid, 'SIGKILL');
      else {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // gone
        }
      }
    }
    await sleep(POLL_MS);
    if (Date.now() >= nextReport) {
      onStuck?.(
        marked.map((p) => p.pid),
        Date.now() - startedAt,
      );
      nextReport = Date.now() + STUCK_REPORT_MS;
    }
  }
}
