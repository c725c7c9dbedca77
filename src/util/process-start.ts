/**
 * When a process started, from /proc (Linux): tells a live owner from an
 * unrelated process that got its pid after it died. /proc/<pid>/stat field
 * 22 is the start in clock ticks after boot (USER_HZ, 100 on Linux), and
 * /proc/stat's btime the boot in whole seconds, so the result is at most
 * a second early, never late.
 */
import { readFileSync } from 'node:fs';

const USER_HZ = 100;

/** Field 22 of a /proc/<pid>/stat line; the command name (field 2) may hold spaces and parentheses. */
export function startTicksOf(statLine: string): number | undefined {
  const fields = statLine.slice(statLine.lastIndexOf(')') + 2).split(' ');
  const ticks = Number(fields[22 - 3]);
  return Number.isSafeInteger(ticks) ? ticks : undefined;
}

/** Epoch milliseconds at which `pid` started; undefined without /proc or once it is gone. */
export function processStartedAt(pid: number): number | undefined {
  try {
    const boot = /^btime (\d+)$/m.exec(readFileSync('/proc/stat', 'utf8'))?.[1];
    const ticks = startTicksOf(readFileSync(`/proc/${pid}/stat`, 'utf8'));
    if (boot === undefined || ticks === undefined) return undefined;
    return Number(boot) * 1000 + (ticks * 1000) / USER_HZ;
  } catch {
    return undefined;
  }
}
