/**
 * A droid that hangs, through the built server over stdio with the
 * protocol-peer mock droid (the real CLI cannot be made to hang on demand):
 * on initialize, on interrupt (never answered, turn never ended), and on
 * close (close_session never answered, stdin EOF and SIGTERM ignored).
 * Each turn must end in a named state within the budget derived from
 * runTimeoutMs / cancelGraceMs, and leave no process behind while the
 * server keeps running.
 */
import { mkdirSync, readdirSync, readFileSync, realpathSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { privateDir, startServer, writeConfig, type RunningServer } from '../support/mcp-server.js';
import { MOCK_DROID } from '../support/paths.js';
import { turnPids, waitForNoProcesses } from '../support/processes.js';
import { settle, status, until, type Acceptance, type RunView } from '../support/fault-harness.js';

const GRACE_MS = 1_000;
const TIMEOUT_MS = 3_000;
/** Process start-up and scheduling on a loaded 2-core machine. */
const SLACK_MS = 2_500;
/**
 * The cancel timeline is interrupt → wait for the end → kill the group →
 * wait for it to be gone, each waiter's budget strictly inside the next:
 * a turn asked to stop must be over within a few grace periods.
 */
const CANCEL_BUDGET_MS = 4 * GRACE_MS + SLACK_MS;
/**
 * A finished turn's droid that will not close is killed after a short wait
 * (close_session 500 ms, exit 300 ms): it must be gone, and the slot free,
 * well within one grace period of the result, not at some later backstop.
 */
const CLOSE_BUDGET_MS = GRACE_MS + SLACK_MS;
/** The deadline, then the same stop timeline (the runner's backstop is timeout + 3 grace). */
const DEADLINE_BUDGET_MS = TIMEOUT_MS + 3 * GRACE_MS + SLACK_MS;

const TAG = `faults-hang-${process.pid}-${Date.now()}`;
let base: string;
let approved: string;
let server: RunningServer | undefined;
let n = 0;
/** Workspaces numbered above this belong to the current test's server. */
let firstWorkspaceOfTest = 0;
/** Relative: each mock appends to the one in its cwd, the turn's workspace (catalog reads: their TMPDIR). */
const FRAME_LOG = '.mock-frames.jsonl';

beforeAll(() => {
  base = realpathSync(privateDir('droid-mcp-hangs-'));
  approved = join(base, 'approved');
  mkdirSync(approved);
});
afterEach(async () => {
  await server?.close();
  server = undefined;
  await waitForNoProcesses(TAG, 15_000);
});
afterAll(() => {
  rmSync(base, { recursive: true, force: true });
});

async function start(env: Record<string, string> = {}): Promise<RunningServer> {
  firstWorkspaceOfTest = n;
  const id = ++n;
  // Turns run in the sandbox, where droid's home is read-only but its own
  // session's files: the mock keeps its sessions where droid does, and its
  // frame log in the turn's workspace (a relative path: the mock's cwd).
  const home = join(base, `home-${id}`);
  mkdirSync(join(home, '.factory'), { recursive: true });
  const config = writeConfig(base, {
    approvedDirectories: [approved],
    stateDirectory: join(base, `state-${id}`),
    droidPath: MOCK_DROID,
    defaultModel: 'mock-model',
    runTimeoutMs: TIMEOUT_MS,
    cancelGraceMs: GRACE_MS,
  });
  server = await startServer(config, {
    ...(process.env as Record<string, string>),
    DROID_MCP_TEST_TAG: TAG,
    DROID_MCP_LOG_LEVEL: 'warn',
    HOME: home,
    MOCK_DROID_STATE_DIR: 'droid',
    MOCK_DROID_LOG: FRAME_LOG,
    ...env,
  });
  return server;
}

/** Methods the mock droids of this test's turns received, in order (every turn of a test has its own workspace). */
function methodsReceived(): string[] {
  let text = '';
  for (const ws of readdirSync(approved)
    .filter((name) => name.startsWith('ws-'))
    .sort((a, b) => Number(a.slice(3)) - Number(b.slice(3)))) {
    if (Number(ws.slice(3)) <= firstWorkspaceOfTest) continue;
    try {
      text += readFileSync(join(approved, ws, FRAME_LOG), 'utf8');
    } catch {
      // that turn's droid never started
    }
  }
  return text
    .split('\n')
    .filter(Boolean)
    .map((l) => (JSON.parse(l) as { method?: string }).method ?? '')
    .filter(Boolean);
}

/** Nothing of ours is left but the server itself: no worker, no droid. */
async function onlyServerLeft(s: RunningServer, ms = 5_000): Promise<void> {
  // The server's idle warm pool (issue 12) lives as long as the server; a turn's processes may not.
  await until(() => turnPids(TAG, [s.pid]).length === 0, ms, 'every worker and droid gone');
  // The slot is released once the group is seen gone; a zombie left for
  // this VM's init to reap can stretch that by about a second.
  const capacity = async () => (await s.ok<{ capacity: { active: number; queued: number } }>('droid_list_workspaces')).capacity;
  await until(async () => (await capacity()).active === 0, ms, 'the slot released').catch(() => undefined);
  expect(await capacity()).toMatchObject({ active: 0, queued: 0 });
}

function workspace(name: string): string {
  const dir = join(approved, name);
  mkdirSync(dir, { recursive: true });
  return dir;
}

async function create(s: RunningServer, prompt: string): Promise<Acceptance> {
  return s.ok<Acceptance>('droid_create_session', { requestKey: `k-${++n}`, replyTo: null, workspace: workspace(`ws-${n}`), prompt });
}

const ms = (iso: string | null) => Date.parse(iso!);
const took = (run: RunView, from: number) => ms(run.endedAt) - from;

describe('droid hangs on initialize', () => {
  it('the deadline ends the turn timed_out, with nothing submitted', async () => {
    const s = await start({ MOCK_DROID_INIT_DELAY_MS: '2147483647' });
    const a = await create(s, 'never submitted');
    const [done] = await settle(s, [a.metadata.session]);
    expect(done!.latestRun).toMatchObject({ state: 'timed_out', error: { code: 'run_timed_out' } });
    const elapsed = ms(done!.latestRun.endedAt) - ms(done!.latestRun.startedAt);
    expect(elapsed).toBeGreaterThanOrEqual(TIMEOUT_MS);
    expect(elapsed).toBeLessThan(DEADLINE_BUDGET_MS);
    expect(methodsReceived()).toContain('droid.initialize_session');
    expect(methodsReceived()).not.toContain('droid.add_user_message');
    await onlyServerLeft(s);
  });

  it('a cancel ends the turn cancelled within the grace budget, with nothing submitted', async () => {
    const s = await start({ MOCK_DROID_INIT_DELAY_MS: '2147483647' });
    const a = await create(s, 'never submitted');
    await until(() => methodsReceived().includes('droid.initialize_session'), 10_000, 'droid asked to initialize');
    const t0 = Date.now();
    await s.ok('droid_cancel_session', { session: a.metadata.session });
    const [done] = await settle(s, [a.metadata.session]);
    expect(done!.latestRun).toMatchObject({ state: 'cancelled', cancelReason: 'cancelled' });
    expect(took(done!.latestRun, t0)).toBeLessThan(CANCEL_BUDGET_MS);
    expect(methodsReceived()).not.toContain('droid.add_user_message');
    await onlyServerLeft(s);
  });
});

describe('droid never answers interrupt and never ends the turn', () => {
  it('a cancel ends the turn cancelled (interrupt_unconfirmed) within the grace budget and kills droid', async () => {
    const s = await start();
    const a = await create(s, 'hang <<mock:deaf>>');
    await until(async () => (await status(s, a.metadata.session)).latestRun.state === 'running', 10_000, 'turn running');
    const t0 = Date.now();
    await s.ok('droid_cancel_session', { session: a.metadata.session });
    const [done] = await settle(s, [a.metadata.session]);
    expect(methodsReceived()).toContain('droid.interrupt_session');
    // A stop we asked for is a cancellation, never a failure (DESIGN: cancel timeline).
    expect(done!.latestRun, JSON.stringify(done!.latestRun)).toMatchObject({
      state: 'cancelled',
      cancelReason: 'interrupt_unconfirmed',
      error: { code: 'interrupt_unconfirmed' },
    });
    expect(took(done!.latestRun, t0)).toBeLessThan(CANCEL_BUDGET_MS);
    await onlyServerLeft(s);
  });

  it('steering past it: the hung turn is stopped, and the steering message runs in the same session', async () => {
    const s = await start();
    const a = await create(s, 'hang <<mock:deaf>>');
    await until(async () => (await status(s, a.metadata.session)).latestRun.state === 'running', 10_000, 'turn running');
    const t0 = Date.now();
    const steer = await s.ok<Acceptance>('droid_send_message', { requestKey: `k-${++n}`, session: a.metadata.session, interrupt: true, prompt: 'steered' });
    const [done] = await settle(s, [a.metadata.session]);
    // A hung turn recorded as failed would drop the steering message as predecessor_failed.
    expect(done!.latestRun, JSON.stringify(done!.latestRun)).toMatchObject({ run: steer.metadata.run, state: 'succeeded' });
    expect(done!.preview).toBe('mock: steered');
    // The steering turn started only after the hung one was over, within the budget.
    expect(ms(done!.latestRun.startedAt) - t0).toBeLessThan(CANCEL_BUDGET_MS);
    expect(methodsReceived()).toContain('droid.load_session');
    await onlyServerLeft(s);
  });

  it('the deadline ends it timed_out within the deadline budget and kills droid', async () => {
    const s = await start();
    const a = await create(s, 'hang <<mock:deaf>>');
    const [done] = await settle(s, [a.metadata.session]);
    expect(done!.latestRun).toMatchObject({ state: 'timed_out', error: { code: 'run_timed_out' } });
    const elapsed = ms(done!.latestRun.endedAt) - ms(done!.latestRun.startedAt);
    expect(elapsed).toBeGreaterThanOrEqual(TIMEOUT_MS);
    expect(elapsed).toBeLessThan(DEADLINE_BUDGET_MS);
    await onlyServerLeft(s);
  });
});

describe('droid never exits after close_session and stdin EOF', () => {
  it('the turn keeps its outcome, droid is killed, and the slot is free again within the budget', async () => {
    const s = await start();
    const a = await create(s, 'done then linger <<mock:linger>>');
    const [done] = await settle(s, [a.metadata.session]);
    expect(done!.latestRun).toMatchObject({ state: 'succeeded' });
    // close_session goes after the result is durable (worker.ts release): look once the turn's group is gone, not at settle.
    await onlyServerLeft(s, CLOSE_BUDGET_MS);
    expect(methodsReceived()).toContain('droid.close_session');
    // The session continues: the next turn resumes it in a fresh droid.
    await s.ok('droid_send_message', { requestKey: `k-${++n}`, session: a.metadata.session, prompt: 'again' });
    const [next] = await settle(s, [a.metadata.session]);
    expect(next).toMatchObject({ needsAttention: false, preview: 'mock: again', latestRun: { state: 'succeeded' } });
    await onlyServerLeft(s);
  });
});
