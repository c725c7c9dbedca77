/**
 * The shipped systemd unit (deploy/droid-mcp.service, issue 23 item 5):
 * `systemd-analyze verify` accepts it without a single warning (CI installs
 * systemd for it: .ci/run), and it says what a clean stop needs: SIGTERM to
 * the controller alone (KillMode=mixed), a stop timeout longer than the
 * controller's own wait for interrupted turns, restart on failure, and none
 * of the hardening keys that break the bubblewrap turn sandbox. And the stop
 * it asks for, against the built server running a real turn: SIGTERM to the
 * controller alone ends the live turn `interrupted`, its outcome durable,
 * before TimeoutStopSec. (SIGTERM to every process of the service at once,
 * what KillMode=control-group sends, measured by hand: the worker dies with
 * it and the turn ends `failed`, worker_failed.)
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONFIG_DEFAULTS } from '../../../src/config/schema.js';
import { prose, script } from '../../../src/testbed/scripted-model.js';
import { startServer } from '../../support/mcp-server.js';
import { REPO_ROOT } from '../../support/paths.js';
import { pidsWithEnvTag, waitForNoProcesses } from '../../support/processes.js';
import type { Acceptance, SessionView } from '../../support/tool-views.js';
import { makeContext, type E2EContext } from '../../support/e2e-context.js';

const UNIT = join(REPO_ROOT, 'deploy', 'droid-mcp.service');

/** The unit's `[Section] Key=Value` lines (comments and blanks dropped), in order. */
function parseUnit(text: string): Map<string, Map<string, string>> {
  const sections = new Map<string, Map<string, string>>();
  let current: Map<string, string> | undefined;
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const section = /^\[(\w+)\]$/.exec(line);
    if (section) sections.set(section[1]!, (current = new Map()));
    else {
      const kv = /^(\w+)=(.*)$/.exec(line);
      if (!kv || !current) throw new Error(`not a unit line: ${line}`);
      if (current.has(kv[1]!)) throw new Error(`${kv[1]} set twice`);
      current.set(kv[1]!, kv[2]!);
    }
  }
  return sections;
}

/** systemd's time span for the forms the unit uses (`60s`, `5min`, `90`). */
function seconds(span: string): number {
  const m = /^(\d+)(s|min)?$/.exec(span);
  if (!m) throw new Error(`unexpected time span ${span}`);
  return Number(m[1]) * (m[2] === 'min' ? 60 : 1);
}

describe('deploy/droid-mcp.service', () => {
  it('systemd-analyze verify accepts it with no warning', async () => {
    // Its node may live elsewhere on this host: verify checks that ExecStart's program exists.
    const dir = mkdtempSync(join(tmpdir(), 'droid-mcp-unit-'));
    try {
      const copy = join(dir, 'droid-mcp.service');
      writeFileSync(copy, readFileSync(UNIT, 'utf8').replace('ExecStart=/usr/bin/node ', `ExecStart=${process.execPath} `));
      const run = await new Promise<{ code: number; output: string }>((resolve) => {
        execFile('systemd-analyze', ['verify', copy], { encoding: 'utf8', timeout: 30_000 }, (err, stdout, stderr) => {
          resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, output: `${stdout}${stderr}` });
        });
      });
      expect(run).toEqual({ code: 0, output: '' });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('stops cleanly, restarts on failure, and keeps bubblewrap working', () => {
    const unit = parseUnit(readFileSync(UNIT, 'utf8'));
    const service = unit.get('Service')!;
    expect(service.get('ExecStart')).toMatch(/^\/\S+\/node \/\S+\/dist\/src\/cli\.js --config \/\S+\.json$/);
    expect(service.get('User')).toBeTruthy();
    expect(service.get('Restart')).toBe('on-failure');
    expect(service.get('KillSignal')).toBe('SIGTERM');
    // SIGTERM to the controller only: it interrupts its turns through their workers, which must not be signalled with it.
    expect(service.get('KillMode')).toBe('mixed');
    // Longer than the stop's own bound (compose.ts stop(): the HTTP listener's 5 s, then 3 × cancelGraceMs for interrupted turns), with room to close the state.
    expect(seconds(service.get('TimeoutStopSec')!)).toBeGreaterThanOrEqual((5_000 + 3 * CONFIG_DEFAULTS.cancelGraceMs) / 1000 + 30);
    expect(service.get('NoNewPrivileges')).toBe('yes');
    expect(service.get('ProtectSystem')).toBe('full');
    expect(service.get('PrivateTmp')).toBe('yes');
    for (const breaksBwrap of [
      'RestrictNamespaces',
      'PrivateUsers',
      'SystemCallFilter',
      'ProtectKernelTunables',
      'ProtectKernelLogs',
      'ProtectProc',
      'ProcSubset',
      'ProtectHome',
      'MemoryDenyWriteExecute',
    ]) {
      expect(service.has(breaksBwrap), breaksBwrap).toBe(false);
    }
    expect(unit.get('Install')?.get('WantedBy')).toBe('multi-user.target');
  });
});

describe('the stop the unit sends (SIGTERM to the controller alone)', () => {
  const TAG = `e2e-unit-stop-${process.pid}-${Date.now()}`;
  let ctx: E2EContext;
  beforeAll(async () => {
    ctx = await makeContext(TAG);
  });
  afterAll(async () => {
    await waitForNoProcesses(TAG, 15_000);
    await ctx?.cleanup();
  });

  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

  it('ends a live turn interrupted, durably, before TimeoutStopSec', async () => {
    const config = ctx.config();
    const server = await startServer(config, ctx.env);
    const session = (
      await server.ok<Acceptance>('droid_create_session', {
        requestKey: 'unit-stop-1',
        replyTo: null,
        workspace: ctx.workspace('unit-stop'),
        autonomy: 'off',
        prompt: `slow ${script({ text: prose(60, 'stop'), slowMs: 30_000 })}`,
      })
    ).metadata.session;
    const state = async () => (await server.ok<{ status: SessionView }>('droid_get_session_status', { session })).status.latestRun.state;
    while ((await state()) !== 'running') await sleep(50);

    process.kill(server.pid, 'SIGTERM');
    const deadline = Date.now() + seconds(parseUnit(readFileSync(UNIT, 'utf8')).get('Service')!.get('TimeoutStopSec')!) * 1000;
    while (pidsWithEnvTag(TAG).includes(server.pid)) {
      if (Date.now() > deadline) throw new Error('the server outlived TimeoutStopSec: systemd would SIGKILL it');
      await sleep(50);
    }
    await server.close().catch(() => undefined);
    await waitForNoProcesses(TAG, 15_000);

    const again = await startServer(config, ctx.env);
    try {
      const { status } = await again.ok<{ status: SessionView }>('droid_get_session_status', { session });
      expect(status.latestRun).toMatchObject({ state: 'interrupted', droidReason: 'cancelled', needsAttention: true, error: null });
    } finally {
      await again.close();
    }
  });
});
