/**
 * What "the group is gone" means for the lock: no member still runs code.
 * A zombie member (exited, not yet reaped by its parent) must not hold the
 * lock, because a parent that never reaps it would hold it forever; a member
 * that runs must hold it however long it takes.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { groupRunning, killGroupAndWait, runningMembers } from '../../../../src/worker/parent/process-group.js';

const children: ChildProcess[] = [];
afterEach(() => {
  for (const child of children.splice(0)) {
    try {
      if (child.pid) process.kill(-child.pid, 'SIGKILL');
    } catch {
      // Already gone.
    }
  }
});

/** Resolves with what `promise` gave, or 'still waiting' after `ms`. */
function within<T>(promise: Promise<T>, ms: number): Promise<T | 'still waiting'> {
  return Promise.race([promise, sleep(ms).then(() => 'still waiting' as const)]);
}

/** The process's state letter from /proc (R, S, T, Z, …), or null once it is gone. */
function stateOf(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0] ?? null;
  } catch {
    return null;
  }
}

/**
 * A process group whose only member is a zombie: a perl child moves itself
 * into a group of its own and exits; its parent (sh, exec'd into sleep)
 * never reaps it. Returns that group's id.
 */
async function zombieOnlyGroup(): Promise<number> {
  const child = spawn('sh', ['-c', `perl -e 'setpgrp(0, 0); print "$$\\n"; exit 0' & exec sleep 300`], {
    detached: true,
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  children.push(child);
  const pid = await new Promise<number>((resolve, reject) => {
    child.stdout!.once('data', (chunk: Buffer) => resolve(Number(String(chunk).trim())));
    child.once('error', reject);
  });
  for (let i = 0; i < 500 && stateOf(pid) !== 'Z'; i++) await sleep(10);
  return pid;
}

describe('process group', () => {
  it('a group whose only member is an unreaped zombie is gone, although kill(-pgid, 0) still answers', async () => {
    const pgid = await zombieOnlyGroup();
    expect(stateOf(pgid)).toBe('Z');
    // The signal check alone would call this group alive for as long as the parent lives.
    expect(() => process.kill(-pgid, 0)).not.toThrow();
    expect(await runningMembers(pgid)).toEqual([]);
    expect(await groupRunning(pgid)).toBe(false);
    expect(await within(killGroupAndWait(pgid), 5_000)).toBeUndefined();
  });

  it('a group with a running member is not gone until that member has been killed', async () => {
    const child = spawn('sh', ['-c', 'sleep 300 & exec sleep 300'], { detached: true, stdio: 'ignore' });
    children.push(child);
    const pgid = child.pid!;
    await expect.poll(async () => (await runningMembers(pgid))?.length, { timeout: 5_000 }).toBe(2);
    expect(await groupRunning(pgid)).toBe(true);
    // Stopped members still run no code, but they are alive and must be killed, not waited out.
    process.kill(-pgid, 'SIGSTOP');
    const stuck: number[][] = [];
    expect(
      await within(
        killGroupAndWait(pgid, (members) => stuck.push(members)),
        5_000,
      ),
    ).toBeUndefined();
    expect(await runningMembers(pgid)).toEqual([]);
    expect(await groupRunning(pgid)).toBe(false);
    expect(stuck).toEqual([]);
  });

  it('reads /proc off the event loop: timers keep firing while it scans', async () => {
    const child = spawn('sh', ['-c', 'sleep 300 & exec sleep 300'], { detached: true, stdio: 'ignore' });
    children.push(child);
    const pgid = child.pid!;
    await expect.poll(async () => (await runningMembers(pgid))?.length, { timeout: 5_000 }).toBe(2);
    // A scan reads every process's stat file; done synchronously, no timer callback could run until it returned.
    let ticks = 0;
    const timer = setInterval(() => ticks++, 0);
    try {
      for (let i = 0; i < 5; i++) expect(await runningMembers(pgid)).toHaveLength(2);
    } finally {
      clearInterval(timer);
    }
    expect(ticks).toBeGreaterThan(0);
  });
});
