/**
 * HANDOFF step 7's wait for an idle server, run as written against a
 * stand-in `droid-mcp` that exits with given statuses in turn: it waits
 * while status exits 3 (busy), goes on at 0, and stops loudly, not silently
 * forever, at any other status (1: the state cannot be read; 2: bad
 * arguments).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';

const HANDOFF = join(import.meta.dirname, '..', '..', '..', 'HANDOFF.md');

/** The two lines after `until …`, sleeping 0 s, `sudo -u droid -H` dropped (the stand-in runs as the caller). */
function waitScript(): string {
  const lines = readFileSync(HANDOFF, 'utf8')
    .split('\n')
    .map((l) => l.trim());
  const at = lines.findIndex((l) => l.startsWith('until ') && l.includes('droid-mcp status'));
  expect(at, 'the wait loop of HANDOFF step 7').toBeGreaterThan(-1);
  return lines
    .slice(at, at + 2)
    .join('\n')
    .replaceAll('sudo -u droid -H ', '')
    .replace('sleep 10', 'sleep 0');
}

let dir: string | undefined;
afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

/** Runs the wait with `droid-mcp status` exiting `codes` in turn (the last one from then on). */
function waitWith(codes: number[]): { status: number | null; stderr: string; calls: number } {
  dir = mkdtempSync(join(tmpdir(), 'droid-mcp-handoff-wait-'));
  const calls = join(dir, 'calls');
  writeFileSync(calls, '');
  const table = codes.map((c, i) => `${i + 1}) exit ${c};;`).join(' ');
  writeFileSync(join(dir, 'droid-mcp'), `#!/bin/sh\necho x >> ${calls}\nn=$(wc -l < ${calls})\ncase $n in ${table} *) exit ${codes.at(-1)};; esac\n`, {
    mode: 0o700,
  });
  const run = spawnSync('sh', ['-c', waitScript()], { env: { PATH: `${dir}:${process.env.PATH ?? ''}` }, encoding: 'utf8', timeout: 10_000 });
  return { status: run.status, stderr: run.stderr, calls: readFileSync(calls, 'utf8').split('\n').length - 1 };
}

describe('HANDOFF step 7: waiting for an idle server', () => {
  it('waits while status exits 3 and goes on quietly at 0', () => {
    expect(waitWith([3, 3, 0])).toEqual({ status: 0, stderr: '', calls: 3 });
  });

  it.each([1, 2])('stops at exit %i and fails loudly', (code) => {
    const run = waitWith([3, code]);
    expect(run.status).not.toBe(0);
    expect(run.stderr).toContain(`droid-mcp status exited ${code}, not idle`);
    expect(run.calls).toBe(2);
  });
});
