/**
 * Processes found by a tag in their environment: everything a run starts
 * carries NAME=VALUE and children inherit it, so scanning /proc finds
 * whatever outlived the run, however it was started.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';

/** Live (non-zombie) processes other than this one whose environment holds NAME=VALUE; empty where /proc does not exist. */
export function processesTagged(name: string, value: string): number[] {
  const want = `${name}=${value}`;
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return [];
  }
  const out: number[] = [];
  for (const entry of entries) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      // environ is bytes, not necessarily UTF-8
      if (!readFileSync(`/proc/${entry}/environ`, 'latin1').split('\0').includes(want)) continue;
      // The comm field may contain ')': the state letter follows the last one.
      const stat = readFileSync(`/proc/${entry}/stat`, 'latin1');
      const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
      if (state !== 'Z' && state !== 'X') out.push(Number(entry)); // not exited, only awaiting reaping
    } catch {
      // gone, or not ours to read
    }
  }
  return out;
}

/** Polls until no process carries the tag; returns those still alive at the deadline. */
export async function waitUntilNoneTagged(name: string, value: string, withinMs: number): Promise<number[]> {
  const end = Date.now() + withinMs;
  for (;;) {
    const left = processesTagged(name, value);
    if (left.length === 0 || Date.now() >= end) return left;
    await sleep(50);
  }
}
