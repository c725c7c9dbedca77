/**
 * The server killed outright (kill -9) while a droid starts (issue 38,
 * item 3), through the built server, the real droid in bubblewrap and the
 * scripted model. The kill lands right after bubblewrap is spawned, before
 * its `--die-with-parent` holds: the server's own short-lived droid (the
 * catalog read of a fresh server's first create) and a cold turn's, from
 * its worker's entry. Nothing of the killed server may run 1 s later, and
 * the killed turn sends the model nothing after the kill.
 *
 * Then the next start on the same state: a previous controller's worker that
 * could not stop itself (stopped with SIGSTOP before the kill, with its warm
 * droid) is killed before the new server admits a turn.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { script } from '../../src/testbed/scripted-model.js';
import { TreeWatch, watchTree } from '../../src/testbed/tree-watch.js';
import { WARM_IDLE_TITLE } from '../../src/worker/contract/worker-process.js';
import { makeContext, type E2EContext } from '../support/e2e-context.js';
import { startServer, type RunningServer, type ToolOutcome } from '../support/mcp-server.js';
import { pidsWithEnvTag, TAG_VAR, waitForNoProcesses } from '../support/processes.js';
import { until } from '../support/fault-harness.js';
import { setTimeout as sleep } from 'node:timers/promises';

const TAG = `faults-server-kill-${process.pid}-${Date.now()}`;
let ctx: E2EContext;
let servers: RunningServer[] = [];
/** Processes a test stopped on purpose: killed whatever the test's outcome. */
let stopped: number[] = [];
let n = 0;

beforeAll(async () => {
  ctx = await makeContext(TAG);
});
afterEach(async () => {
  for (const pid of stopped) kill(pid);
  stopped = [];
  await Promise.all(servers.map((s) => s.close().catch(() => undefined)));
  servers = [];
});
afterAll(async () => {
  await ctx?.cleanup();
});

function kill(pid: number, signal: NodeJS.Signals = 'SIGKILL'): void {
  try {
    process.kill(pid, signal);
  } catch {
    // gone
  }
}

function read(path: string): string {
  try {
    return readFileSync(path, 'latin1');
  } catch {
    return '';
  }
}

/** The children of `pid`'s main thread (Node spawns from it). */
const childrenOf = (pid: number) => read(`/proc/${pid}/task/${pid}/children`).split(' ').filter(Boolean).map(Number);
const cmdlineOf = (pid: number) => read(`/proc/${pid}/cmdline`);

/** A server of its own tag (its tree is watched alone) on its own state directory, or on `state`. */
async function start(extra: Record<string, unknown>, state?: string): Promise<{ server: RunningServer; tag: string; state: string }> {
  const tag = `${TAG}-${++n}`;
  const stateDirectory = state ?? join(ctx.root, '..', `state-${tag}`);
  const server = await startServer(ctx.config({ stateDirectory, ...extra }), { ...ctx.env, [TAG_VAR]: tag });
  servers.push(server);
  // Tool calls wait until the state is open: the create below finds the controller up.
  await server.ok('droid_list_workspaces');
  return { server, tag, state: stateDirectory };
}

/**
 * Polls every millisecond until `parent()` has a bwrap child with its second
 * half (the PID namespace's init, which sets up the sandbox's mounts), and
 * freezes that init (SIGSTOP) before it has forked droid: its own
 * `--die-with-parent` comes only after that fork, so the window a slow setup
 * opens is held open. Then kills the server at once.
 */
async function freezeSetupThenKill(server: RunningServer, parent: () => number | undefined): Promise<number> {
  const end = Date.now() + 20_000;
  for (;;) {
    if (Date.now() > end) throw new Error('no bwrap started within 20 s');
    const p = parent();
    const outer = p === undefined ? undefined : childrenOf(p).find((c) => cmdlineOf(c).includes('bwrap'));
    const init = outer === undefined ? undefined : childrenOf(outer)[0];
    if (init !== undefined) {
      kill(init, 'SIGSTOP');
      stopped.push(init);
      const killedAt = Date.now();
      kill(server.pid);
      return killedAt;
    }
    await sleep(1);
  }
}

/** Watches the killed server's tree for 1 s; nothing may run then, and the model hears nothing of `marker` after the kill. */
async function expectNothingLeft(tag: string, killedAt: number, marker: string): Promise<void> {
  const watch = new TreeWatch(TAG_VAR, tag);
  const report = await watchTree(watch, killedAt, { boundMs: 1_000, giveUpMs: 1_000 });
  const describe = report.aliveAtBound.map((p) => `${p.kind} ${p.pid} (parent ${p.ppid})`);
  expect(describe, 'processes of the killed server running 1 s after the kill').toEqual([]);
  const model = ctx.bed.model;
  const late = [...model.requests, ...model.titleRequests].filter((r) => r.at > killedAt && JSON.stringify(r.messages).includes(marker));
  expect(late.length, 'model requests of the killed turn after the kill').toBe(0);
}

function create(server: RunningServer, name: string, marker: string): Promise<ToolOutcome> {
  const ws = ctx.workspace(`${name}-${n}`);
  return server.call('droid_create_session', {
    requestKey: `k-${name}-${n}`,
    workspace: ws,
    prompt: `${marker} ${script({ text: 'done' })}`,
    autonomy: 'off',
    replyTo: null,
  });
}

// Each test sets its own pool size, so the pool-off run (package.json test:pool-off:built) leaves this file out.
describe('kill -9 of the server while a droid starts', () => {
  it("the catalog read's droid (a child of the server) dies with it", async () => {
    const { server, tag } = await start({ warmPoolSize: 0 });
    const marker = `catalog-kill-${n}`;
    void create(server, 'catalog', marker).catch(() => undefined);
    const killedAt = await freezeSetupThenKill(server, () => server.pid);
    await expectNothingLeft(tag, killedAt, marker);
  });

  it("a cold turn's droid, spawned by its worker's entry, dies with it", async () => {
    const { server, tag } = await start({ warmPoolSize: 0 });
    // A create refused for its model reads the catalog and starts no turn: the next create's bwrap is its turn's.
    const refused = await server.call('droid_create_session', {
      requestKey: `k-refused-${n}`,
      workspace: ctx.workspace(`refused-${n}`),
      prompt: 'x',
      model: 'no-such-model',
      replyTo: null,
    });
    expect(refused.isError).toBe(true);
    await until(() => childrenOf(server.pid).length === 0, 10_000, 'the catalog read done');
    const marker = `cold-kill-${n}`;
    void create(server, 'cold', marker).catch(() => undefined);
    const isWorker = (pid: number) => cmdlineOf(pid).includes('main.cjs') || cmdlineOf(pid).startsWith('droid-mcp worker');
    const killedAt = await freezeSetupThenKill(server, () => childrenOf(server.pid).find(isWorker));
    await expectNothingLeft(tag, killedAt, marker);
  });
});

describe('the next start on the same state', () => {
  it("kills a previous controller's surviving worker group before it admits a turn", async () => {
    // Sandbox off: the pool's worker holds a warm droid in its group.
    const { server, tag, state } = await start({ sandbox: 'off', warmPoolSize: 1 });
    let worker: number | undefined;
    await until(
      () => {
        worker = pidsWithEnvTag(tag).find((pid) => cmdlineOf(pid).startsWith(WARM_IDLE_TITLE));
        return worker !== undefined && pidsWithEnvTag(tag).some((pid) => cmdlineOf(pid).includes('stream-jsonrpc'));
      },
      20_000,
      'a warm worker with its droid',
    );
    const old = pidsWithEnvTag(tag).filter((pid) => pid !== server.pid);
    stopped.push(...old);
    // A worker that cannot hear the disconnect (stopped, as a hung one would be) keeps its group alive.
    kill(worker!, 'SIGSTOP');
    kill(server.pid);
    await until(() => read(`/proc/${server.pid}/stat`) === '' || read(`/proc/${server.pid}/stat`).includes(') Z'), 5_000, 'the server dead');
    const alive = () => old.filter((pid) => ![undefined, 'Z', 'X'].includes(read(`/proc/${pid}/stat`).split(') ')[1]?.[0]));
    expect(alive().length, 'the old worker and its droid outlive the kill').toBeGreaterThanOrEqual(2);

    const next = await start({ sandbox: 'off', warmPoolSize: 1 }, state);
    const marker = `next-start-${n}`;
    const created = await create(next.server, 'next', marker);
    expect(created.isError, created.text).toBe(false);
    const session = (created.structured as { metadata: { session: string } }).metadata.session;
    await until(
      async () => {
        const view = await next.server.ok<{ status: { latestRun: { startedAt: string | null } } }>('droid_get_session_status', { session });
        return view.status.latestRun.startedAt !== null;
      },
      20_000,
      'the turn admitted',
    );
    expect(alive(), "the previous controller's processes running once a turn was admitted").toEqual([]);
    await next.server.ok('droid_wait_for_sessions', { sessions: [session], timeoutSeconds: 30 });
    await waitForNoProcesses(tag, 5_000);
  });
});
