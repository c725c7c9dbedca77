/**
 * The warm pool in the built server (issue 12), with the sandbox off so the
 * pool holds a pre-spawned droid: turns and follow-ups run on it, the pool
 * never holds more than warmPoolSize, refills after a take, and dies with
 * the server (stdio closed, or the server killed outright).
 */
import { readFileSync, readlinkSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { script } from '../../../src/testbed/scripted-model.js';
import type { RunningServer } from '../../support/mcp-server.js';
import { pidsWithEnvTag, waitForNoProcesses } from '../../support/processes.js';
import { liveDroids, makeContext, type E2EContext } from '../../support/e2e-context.js';

let ctx: E2EContext;
let server: RunningServer | undefined;
const TAG = `e2e-warm-${process.pid}-${Date.now()}`;

beforeAll(async () => {
  ctx = await makeContext(TAG);
});
afterEach(async () => {
  await server?.close();
  server = undefined;
  await waitForNoProcesses(TAG, 15_000);
});
afterAll(async () => {
  await ctx?.cleanup();
});

async function until(check: () => boolean | Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error('condition not reached in time');
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** Idle warm droids: droid processes of this tag whose cwd is a pool folder. */
function warmDroids(): number[] {
  return liveDroids(TAG).filter((pid) => {
    try {
      return /\/droid-mcp-warm-[^/]+$/.test(readlinkSync(`/proc/${pid}/cwd`));
    } catch {
      return false;
    }
  });
}

const execute = (command: string) => ({ name: 'Execute', arguments: { command, riskLevel: 'low', riskLevelReason: 'test' } });
let keys = 0;

describe('warm pool in the server (sandbox off)', () => {
  it('keeps one warm droid, runs a turn and its follow-up on warm droids, and refills', async () => {
    server = await ctx.start({ sandbox: 'off', warmPoolSize: 1, maxConcurrentRuns: 2 });
    await until(() => warmDroids().length === 1);
    const firstWarm = warmDroids()[0]!;
    const workspace = ctx.workspace('warm-a');
    const link = join(ctx.root, 'warm-a-link');
    symlinkSync(workspace, link);
    const created = await server.ok<{ metadata: { session: string } }>('droid_create_session', {
      requestKey: `k-${++keys}`,
      replyTo: null,
      workspace: link,
      autonomy: 'high',
      prompt: `where ${script({ tool: execute('pwd') })}`,
    });
    const session = created.metadata.session;
    await server.ok('droid_wait_for_sessions', { sessions: [session], timeoutSeconds: 60 });
    const status = (await server.ok<{ status: { latestRun: { state: string }; preview: string } }>('droid_get_session_status', { session })).status;
    expect(status.latestRun.state).toBe('succeeded');
    // The symlink spelling ran in the canonical workspace.
    expect(status.preview).toContain(`tool said: ${workspace}`);
    // The warm droid was taken and a new one replaced it. The turn's droid is killed
    // just after its result is recorded, so wait for it to go: then only the pool's one is left.
    await until(() => warmDroids().length === 1 && warmDroids()[0] !== firstWarm);
    await until(() => liveDroids(TAG).length === 1);
    expect(warmDroids()).toHaveLength(1);
    const secondWarm = warmDroids()[0]!;

    await server.ok('droid_send_message', { requestKey: `k-${++keys}`, session, prompt: `again ${script({ tool: execute('pwd') })}` });
    await server.ok('droid_wait_for_sessions', { sessions: [session], timeoutSeconds: 60 });
    const again = (await server.ok<{ status: { latestRun: { state: string }; preview: string } }>('droid_get_session_status', { session })).status;
    expect(again.latestRun.state).toBe('succeeded');
    expect(again.preview).toContain(`tool said: ${workspace}`);
    await until(() => warmDroids().length === 1 && warmDroids()[0] !== secondWarm);
  });

  it('the pool dies with the server when it is killed outright (IPC disconnect)', async () => {
    server = await ctx.start({ sandbox: 'off', warmPoolSize: 2, maxConcurrentRuns: 2 });
    await until(() => warmDroids().length === 2);
    const before = pidsWithEnvTag(TAG).filter((pid) => pid !== server!.pid);
    // workers and droids of the pool, each worker leading its own group
    expect(before.length).toBeGreaterThanOrEqual(4);
    expect(readFileSync(`/proc/${server.pid}/cmdline`, 'utf8')).toContain('--config');
    process.kill(server.pid, 'SIGKILL');
    await waitForNoProcesses(TAG, 10_000);
    await server.close().catch(() => undefined);
    server = undefined;
  });
});
