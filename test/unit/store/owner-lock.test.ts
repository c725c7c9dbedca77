/**
 * The owner lock as judged for status, doctor, backup and restore: an owner
 * process alive but not refreshing its lock (stopped or hung) is told apart
 * from an unrelated process that got its pid after the owner died, by when
 * that process started (/proc) against the owner record's startedAt.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdir, mkdtemp, rm, utimes } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { currentIdentity, judgeOwnerLock, type OwnerRecord } from '../../../src/store/owner-lock.js';
import { processStartedAt, startTicksOf } from '../../../src/util/process-start.js';

const children: ChildProcess[] = [];
const dirs: string[] = [];
afterEach(async () => {
  for (const c of children.splice(0)) c.kill('SIGKILL');
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

/** A state directory whose owner lock was last refreshed a minute ago, and a live process for its pid. */
async function staleLock(): Promise<{ dir: string; pid: number }> {
  const dir = await mkdtemp(join(tmpdir(), 'droid-mcp-owner-lock-'));
  dirs.push(dir);
  await mkdir(join(dir, 'owner.lock'));
  const longAgo = new Date(Date.now() - 60_000);
  await utimes(join(dir, 'owner.lock'), longAgo, longAgo);
  const sleeper = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1 << 30)'], { stdio: 'ignore' });
  children.push(sleeper);
  await once(sleeper, 'spawn');
  return { dir, pid: sleeper.pid! };
}

const record = (pid: number, startedAt: Date): OwnerRecord => ({ version: 1, pid, ...currentIdentity(), startedAt: startedAt.toISOString() });

describe('judgeOwnerLock on a stale lock whose pid is alive', () => {
  it('is unresponsive when that process started before the owner record (the owner, stopped or hung)', async () => {
    const { dir, pid } = await staleLock();
    const lock = await judgeOwnerLock(dir, dir, record(pid, new Date()));
    expect(lock).toEqual({ kind: 'unresponsive', pid, why: expect.stringMatching(/not refreshed for 10 s: the owner is stopped \(SIGSTOP\) or hung$/) });
  });

  it('is dead when that process started after the owner record (a reused pid)', async () => {
    const { dir, pid } = await staleLock();
    const lock = await judgeOwnerLock(dir, dir, record(pid, new Date(Date.now() - 3_600_000)));
    expect(lock).toEqual({ kind: 'dead', dead: { pid, why: expect.stringMatching(/started after the owner record: a reused pid$/) } });
  });
});

describe('process start time', () => {
  it('reads field 22 past a command name with spaces and parentheses', () => {
    const fields = Array.from({ length: 50 }, (_, i) => String(i + 3));
    expect(startTicksOf(`123 (a b) (c) ${fields.join(' ')}`)).toBe(22);
  });

  it('is this process’s start, at most a second early', () => {
    const started = processStartedAt(process.pid)!;
    const byUptime = Date.now() - process.uptime() * 1000;
    expect(started).toBeLessThanOrEqual(byUptime + 50);
    expect(started).toBeGreaterThan(byUptime - 1_500);
  });
});
