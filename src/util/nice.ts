/**
 * Lower CPU priority for a program nobody waits for right now, through
 * nice(1): on a small host it yields the CPU to the droid a caller waits for.
 */
import { existsSync } from 'node:fs';

export interface Launched {
  command: string;
  args: readonly string[];
  fd3?: Uint8Array;
}

let nicePath: string | null | undefined;

/**
 * `nice -n N` in front of the launcher (or, with none, the launcher that
 * runs the program under nice); unchanged where the host has no nice(1).
 */
export function niced<L extends Launched>(launcher: L, niceness: number): L;
export function niced(launcher: undefined, niceness: number): Launched | undefined;
export function niced(launcher: Launched | undefined, niceness: number): Launched | undefined {
  nicePath ??= ['/usr/bin/nice', '/bin/nice'].find((p) => existsSync(p)) ?? null;
  if (nicePath === null) return launcher;
  const nice = ['-n', String(niceness)];
  return launcher ? { ...launcher, command: nicePath, args: [...nice, launcher.command, ...launcher.args] } : { command: nicePath, args: nice };
}
