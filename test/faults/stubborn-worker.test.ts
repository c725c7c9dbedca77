/**
 * A worker that ignores cancel (and its deadline, and SIGTERM): the real
 * controller, the real durable store and the real runner, with the worker
 * entry swapped for test/faults/fixtures/stubborn-worker.mjs through the
 * runner's `workerEntry` option. The built server has no such switch, so
 * this one runs the controller in the test process. The turn must still end
 * in a named state within the written budget, and its process group (worker
 * plus the child standing in for droid) must be gone.
 */
import { mkdirSync, realpathSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { SessionController } from '../../src/controller/controller.js';
import { resolveWorkspace } from '../../src/controller/workspaces.js';
import { StateStore } from '../../src/store/store.js';
import { startWorker } from '../../src/worker/parent/runner.js';
import { privateDir } from '../support/mcp-server.js';
import { MOCK_DROID } from '../support/paths.js';
import { waitForNoProcesses } from '../support/processes.js';
import { pidsWithCmdline, until } from '../support/fault-harness.js';

const STUBBORN = fileURLToPath(new URL('./fixtures/stubborn-worker.mjs', import.meta.url));
const GRACE_MS = 1_000;
const TIMEOUT_MS = 3_000;
const SLACK_MS = 2_500;
const CANCEL_BUDGET_MS = 4 * GRACE_MS + SLACK_MS;
const DEADLINE_BUDGET_MS = TIMEOUT_MS + 3 * GRACE_MS + SLACK_MS;
const TAG = `faults-stubborn-${process.pid}-${Date.now()}`;

let base: string;
let approved: string;
let store: StateStore | undefined;
let controller: SessionController | undefined;
let n = 0;
const quiet = { info() {}, warn() {}, error() {} };

beforeAll(() => {
  base = realpathSync(privateDir('droid-mcp-stubborn-'));
  approved = join(base, 'approved');
  mkdirSync(approved);
});
afterEach(async () => {
  await controller?.shutdown(100);
  await store?.close();
  controller = undefined;
  store = undefined;
  await waitForNoProcesses(TAG, 15_000);
});
afterAll(() => rmSync(base, { recursive: true, force: true }));

async function setup(nonce: string) {
  store = await StateStore.open(join(base, `state-${++n}`));
  controller = new SessionController({
    store,
    models: async () => [{ id: 'mock-model', supportedReasoningEfforts: ['off'], defaultReasoningEffort: 'off' }],
    resolveWorkspace: (path) => resolveWorkspace(path, [approved]),
    startWorker: (spec, options) =>
      startWorker(spec, { ...options, workerEntry: STUBBORN, env: { ...process.env, DROID_MCP_TEST_TAG: TAG, STUBBORN_NONCE: nonce } }),
    policy: { defaultModel: 'mock-model', defaultAutonomy: 'high', maxAutonomy: 'high', reasoningEffort: null },
    maxConcurrentRuns: 4,
    runTimeoutMs: TIMEOUT_MS,
    cancelGraceMs: GRACE_MS,
    droidPath: MOCK_DROID,
    droidEnv: {},
    sandbox: { mode: 'off' },
    sandboxUnavailable: null,
    ampMcpUrl: null,
    log: quiet,
  });
  const ws = join(approved, `ws-${n}`);
  mkdirSync(ws);
  const accepted = await controller.create({ requestKey: `k-${n}`, workspace: ws, prompt: 'anything', replyTo: null });
  const session = accepted.metadata.session;
  await until(() => controller!.status(session).latestRun.state === 'running', 10_000, 'the worker reported started');
  await until(() => pidsWithCmdline(`sleep 67.${nonce}`).length === 1, 5_000, 'the stand-in droid running');
  return { controller, session };
}

async function settled(c: SessionController, session: string) {
  const { sessions, timedOut } = await c.waitForSessions([session], 30);
  expect(timedOut).toBe(false);
  return sessions[0]!.latestRun;
}

describe('a worker that ignores cancel', () => {
  it('is killed with its group after the grace budget, and the turn is recorded as a cancellation', async () => {
    const nonce = `${Date.now() % 1_000_000}1`;
    const { controller: c, session } = await setup(nonce);
    const t0 = Date.now();
    await c.cancel(session);
    const run = await settled(c, session);
    expect(Date.parse(run.endedAt!) - t0).toBeLessThan(CANCEL_BUDGET_MS);
    // A forced stop we asked for is a cancellation, not a failure (DESIGN: cancel timeline).
    expect(run, JSON.stringify(run)).toMatchObject({ state: 'cancelled', cancelReason: 'interrupt_unconfirmed' });
    await until(() => pidsWithCmdline(`sleep 67.${nonce}`).length === 0, 2_000, 'the stand-in droid gone');
    await until(() => c.capacity().active === 0, 2_000, 'the slot released');
  });
});

describe('a worker that ignores its deadline', () => {
  it('is killed with its group by the runner backstop and the turn ends in a named state', async () => {
    const nonce = `${Date.now() % 1_000_000}2`;
    const { controller: c, session } = await setup(nonce);
    const run = await settled(c, session);
    const elapsed = Date.parse(run.endedAt!) - Date.parse(run.startedAt!);
    expect(elapsed).toBeGreaterThanOrEqual(TIMEOUT_MS);
    expect(elapsed).toBeLessThan(DEADLINE_BUDGET_MS);
    // The spec says a worker that dies without a result is `failed`; the
    // deadline reading would be `timed_out`. Either is a named end; no other.
    expect(['failed', 'timed_out']).toContain(run.state);
    expect(run.error?.code).toMatch(/^(worker_failed|run_timed_out)$/);
    await until(() => pidsWithCmdline(`sleep 67.${nonce}`).length === 0, 2_000, 'the stand-in droid gone');
    await until(() => c.capacity().active === 0, 2_000, 'the slot released');
  });
});
