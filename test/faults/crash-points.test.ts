/**
 * The crash campaign: the built server, the real droid CLI and the scripted
 * model, killed with a real SIGKILL at each named crash point (and once at
 * no point at all, mid-turn), several times each, then restarted on the
 * same state directory. After every crash:
 *  - nothing accepted is lost: each accepted run is found again (a replayed
 *    request key returns it) and shows up in status and history;
 *  - no prompt reaches the model twice (the model server logs every request);
 *  - each run is in the state the spec names: live → `unknown` (and the
 *    session refuses follow-ups with session_unknown_outcome), persisted
 *    terminal → its real outcome, queued → `cancelled`/queue_lost;
 *  - no process is left: workers, droid, and the commands droid ran through
 *    its Execute tool (found by a unique `sleep` argument in /proc).
 */
import { randomUUID } from 'node:crypto';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { privateTmpRoot } from '../../src/sandbox/turn-paths.js';
import { sessionFolderName } from '../../src/sandbox/session-copy.js';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { loadState } from '../../src/store/load.js';
import type { CrashPointName } from '../../src/util/crash-point.js';
import { makeContext, type E2EContext } from '../support/e2e-context.js';
import { startServer, type RunningServer } from '../support/mcp-server.js';
import { script } from '../../src/testbed/scripted-model.js';
import { waitForNoProcesses } from '../support/processes.js';
import { history, mentions, pidsWithCmdline, settle, status, turnOpenings, until, waitForDeath, type Acceptance } from '../support/fault-harness.js';

const ROUNDS = Number(process.env.FAULT_ROUNDS ?? 3);
const T0 = Date.now();
/** FAULT_DEBUG=1 prints when each server starts and dies, to see where a slow round spends its time. */
const dbg = (what: string) => process.env.FAULT_DEBUG && console.error(`${Date.now() - T0} ms ${what}`);
const TAG = `faults-crash-${process.pid}-${Date.now()}`;
let ctx: E2EContext;
/** Every server a test started, so afterEach can close whatever is left. */
let servers: RunningServer[] = [];

beforeAll(async () => {
  ctx = await makeContext(TAG);
});
afterEach(async () => {
  await Promise.all(servers.map((s) => s.close().catch(() => undefined)));
  servers = [];
  await waitForNoProcesses(TAG, 20_000);
  // Every scenario ends with a start after its kill, and a clean close: no private folder of its turns, nor of a droid
  // booted for a next turn that never came (worker/parent/ahead-marks.ts), is left in the private temp root.
  expect(foldersLeft()).toEqual([]);
});

/** Private sessions copies in the private temp root that hold a folder of this file's workspaces. */
function foldersLeft(): string[] {
  const root = privateTmpRoot();
  const ours = sessionFolderName(ctx.workspace(''));
  return readdirSync(root).filter((name) => name.startsWith('sessions-') && readdirSync(join(root, name)).some((entry) => entry.startsWith(ours)));
}
afterAll(async () => {
  await ctx?.cleanup();
});

let counter = 0;

/** One scenario: its own state directory, workspace, markers and request keys. */
function scenario(name: string) {
  const id = `${name}-${++counter}-${randomUUID().slice(0, 8)}`;
  const stateDirectory = join(ctx.root, '..', `state-${id}`);
  const config = ctx.config({ stateDirectory });
  const ws = ctx.workspace(`ws-${id}`);
  // Digits only: it is also the fractional part of a `sleep` argument.
  const nonce = `${Date.now() % 1_000_000}${counter}`;
  let keys = 0;
  const start = async (crashAt?: string) => {
    const env = crashAt === undefined ? ctx.env : { ...ctx.env, DROID_MCP_CRASH_AT: crashAt };
    dbg('starting');
    const server = await startServer(config, env);
    dbg('started');
    servers.push(server);
    return server;
  };
  return {
    ws,
    nonce,
    marker: (what: string) => `${what}-${nonce}`,
    key: () => `key-${id}-${++keys}`,
    start,
    /** The state of the run with this request key as the crash left it on disk (read without taking ownership). */
    async durableState(requestKey: string): Promise<string | undefined> {
      const { index } = await loadState(stateDirectory);
      try {
        return [...index.runs.facts()].find((r) => r.requestKey === requestKey)?.state;
      } finally {
        await index.runs.close();
      }
    },
    /** Waits for the server to die at `point`, then for every process it left to go. */
    async crashed(server: RunningServer, point: CrashPointName | null): Promise<void> {
      dbg('waiting for death');
      await waitForDeath(server.pid, 60_000);
      dbg('dead');
      if (point) {
        // The line was written before the kill, but this process may not have read it off the pipe yet.
        const line = `"crashPoint":"${point}"`;
        await until(() => server.stderr().includes(line), 5_000, 'the crash line on stderr').catch(() => undefined);
        expect(server.stderr(), 'the server died at the crash point, not of something else').toContain(line);
      }
      await server.close().catch(() => undefined);
      // Orphaned workers SIGKILL their group at once (and the next start kills what
      // carries the dead owner's mark); droid's Execute supervisor notices its owner is gone within 2 s.
      await waitForNoProcesses(TAG, 20_000);
      dbg('no processes');
      expect(pidsWithCmdline(`sleep 61.${nonce}`)).toEqual([]);
    },
  };
}

/** A turn that runs `sleep 61.<nonce>` through droid's Execute tool: a grandchild in its own session. */
function sleeper(marker: string, nonce: string): string {
  return `${marker} ${script({ tool: { name: 'Execute', arguments: { command: `sleep 61.${nonce}`, summary: 'wait', riskLevel: 'low', riskLevelReason: 'test' } } })}`;
}

function createArgs(s: ReturnType<typeof scenario>, prompt: string, autonomy = 'high') {
  return { requestKey: s.key(), replyTo: null, workspace: s.ws, autonomy, prompt };
}

/** The session refuses to continue after an unknown outcome. */
async function expectUnknownSession(server: RunningServer, session: string, unknownRun: string): Promise<void> {
  const view = await status(server, session);
  expect(view.agentState).toBe('unknown');
  const items = await history(server, session);
  expect(items).toContainEqual(
    expect.objectContaining({ type: 'notice', kind: 'unknown', run: unknownRun, detail: expect.stringContaining('controller_stopped') }),
  );
  const follow = await server.call('droid_send_message', { requestKey: `after-${randomUUID()}`, session, prompt: 'continue' });
  expect(follow.structured.error).toMatchObject({ code: 'session_unknown_outcome' });
}

function expectQueueLost(view: SessionView['latestRun'], run: string): void {
  expect(view).toMatchObject({ run, state: 'cancelled', cancelReason: 'queue_lost', needsAttention: true, error: { code: 'queue_lost', retryable: true } });
}
type SessionView = Acceptance['status'];

/**
 * Turn 1 with a follow-up queued behind it; the server dies at `point`; a
 * new server starts on the same state. The follow-up was never submitted,
 * so it must read queue_lost.
 */
async function crashWithQueuedFollowUp(s: ReturnType<typeof scenario>, point: CrashPointName, firstPrompt: string, followMarker: string) {
  const crashing = await s.start(point);
  const a = await crashing.ok<Acceptance>('droid_create_session', createArgs(s, firstPrompt));
  // droid takes ~750 ms to start; the follow-up is accepted (queued) well before.
  const f = await crashing.ok<Acceptance>('droid_send_message', {
    requestKey: s.key(),
    session: a.metadata.session,
    prompt: `${followMarker} ${script({ text: 'follow' })}`,
  });
  expect(f.status.latestRun.state).toBe('queued');
  await s.crashed(crashing, point);
  const server = await s.start();
  const view = await status(server, a.metadata.session);
  expectQueueLost(view.latestRun, f.metadata.run);
  return { server, a, view };
}

for (let round = 1; round <= ROUNDS; round++) {
  describe(`crash campaign, round ${round}`, () => {
    it('accepted: the create is durable but never submitted → queue_lost (or unknown if admitted in the same write), and never replayed', async () => {
      const s = scenario('accepted');
      const m1 = s.marker('acc');
      const args = createArgs(s, `${m1} ${script({ text: 'first' })}`, 'off');
      const crashing = await s.start('accepted');
      // The kill comes before the answer: the caller never learns the outcome.
      await expect(crashing.call('droid_create_session', args)).rejects.toThrow();
      await s.crashed(crashing, 'accepted');
      // The spec answers by what is durable: only queued → queue_lost (never
      // submitted, safe to resend); admitted (starting) → unknown, never a replay.
      const onDisk = await s.durableState(args.requestKey);
      expect(['queued', 'starting']).toContain(onDisk);

      const server = await s.start();
      const again = await server.ok<Acceptance>('droid_create_session', args);
      expect(again.metadata.replayed).toBe(true);
      // Nothing was replayed at restart or by the replayed key.
      expect(turnOpenings(ctx.bed.model.requests, m1)).toBe(0);
      if (onDisk === 'starting') {
        expect(again.status.latestRun).toMatchObject({ state: 'unknown', error: { code: 'controller_stopped' } });
        await expectUnknownSession(server, again.metadata.session, again.metadata.run);
        return;
      }
      expect(again.status.agentState).toBe('idle');
      expectQueueLost(again.status.latestRun, again.metadata.run);
      expect(await history(server, again.metadata.session)).toContainEqual(
        expect.objectContaining({ type: 'notice', kind: 'cancelled', run: again.metadata.run }),
      );
      // The session's outcome is known, so it continues (a fresh droid session: none was ever made).
      const m2 = s.marker('acc-next');
      await server.ok('droid_send_message', { requestKey: s.key(), session: again.metadata.session, prompt: `${m2} ${script({ text: 'second' })}` });
      const [done] = await settle(server, [again.metadata.session]);
      expect(done).toMatchObject({ agentState: 'idle', needsAttention: false, preview: 'second' });
      expect(turnOpenings(ctx.bed.model.requests, m2)).toBe(1);
      expect(turnOpenings(ctx.bed.model.requests, m1)).toBe(0);
    });

    it('accepted:2: a follow-up accepted while turn 1 runs → turn 1 unknown, the follow-up queue_lost', async () => {
      const s = scenario('accepted-2');
      const m1 = s.marker('acc2-first');
      const m2 = s.marker('acc2-follow');
      const crashing = await s.start('accepted:2');
      const a = await crashing.ok<Acceptance>('droid_create_session', createArgs(s, `${m1} ${script({ text: 'never finished', slowMs: 30_000 })}`, 'off'));
      await until(() => turnOpenings(ctx.bed.model.requests, m1) === 1, 30_000, 'turn 1 streaming');
      const followArgs = { requestKey: s.key(), session: a.metadata.session, prompt: `${m2} ${script({ text: 'follow' })}` };
      await expect(crashing.call('droid_send_message', followArgs)).rejects.toThrow();
      await s.crashed(crashing, 'accepted');
      // Turn 1 holds the session's one live slot, so the follow-up can only be queued.
      expect(await s.durableState(followArgs.requestKey)).toBe('queued');

      const server = await s.start();
      const again = await server.ok<Acceptance>('droid_send_message', followArgs);
      // The dead turn's private sessions copy was committed and removed at start-up (session-copy.ts),
      // before any call was served: the handshake is answered earlier, calls wait for start-up.
      expect(existsSync(join(privateTmpRoot(), `sessions-${a.metadata.run}`))).toBe(false);
      expect(again.metadata.replayed).toBe(true);
      expectQueueLost(again.status.latestRun, again.metadata.run);
      await expectUnknownSession(server, a.metadata.session, a.metadata.run);
      expect(turnOpenings(ctx.bed.model.requests, m1)).toBe(1);
      expect(mentions(ctx.bed.model.requests, m2)).toBe(0);
    });

    it('spawned: the worker exists but droid has not started → unknown, droid and its tools gone', async () => {
      const s = scenario('spawned');
      const m1 = s.marker('spawned');
      const args = createArgs(s, sleeper(m1, s.nonce));
      const crashing = await s.start('spawned');
      // The answer races the kill (admission commits after it); either way the run must be found again.
      await crashing.call('droid_create_session', args).catch(() => undefined);
      await s.crashed(crashing, 'spawned');

      const server = await s.start();
      const again = await server.ok<Acceptance>('droid_create_session', args);
      expect(again.metadata.replayed).toBe(true);
      expect(again.status.latestRun).toMatchObject({ run: again.metadata.run, state: 'unknown', needsAttention: true, error: { code: 'controller_stopped' } });
      await expectUnknownSession(server, again.metadata.session, again.metadata.run);
      expect(turnOpenings(ctx.bed.model.requests, m1)).toBeLessThanOrEqual(1);
    });

    it('spawned:2: turn 1 finished and persisted, the queued follow-up spawned → turn 1 keeps its outcome, the follow-up is unknown', async () => {
      const s = scenario('spawned-2');
      const m1 = s.marker('sp2-first');
      const m2 = s.marker('sp2-follow');
      const crashing = await s.start('spawned:2');
      const a = await crashing.ok<Acceptance>('droid_create_session', createArgs(s, `${m1} ${script({ text: 'first done' })}`));
      const f = await crashing.ok<Acceptance>('droid_send_message', { requestKey: s.key(), session: a.metadata.session, prompt: sleeper(m2, s.nonce) });
      await s.crashed(crashing, 'spawned');

      const server = await s.start();
      const view = await status(server, a.metadata.session);
      expect(view.latestRun).toMatchObject({ run: f.metadata.run, state: 'unknown', error: { code: 'controller_stopped' } });
      const items = await history(server, a.metadata.session);
      expect(items).toContainEqual({ type: 'assistant_text', run: a.metadata.run, text: 'first done' });
      expect(items.filter((i) => i.run === a.metadata.run && i.type === 'notice')).toEqual([]);
      await expectUnknownSession(server, a.metadata.session, f.metadata.run);
      expect(turnOpenings(ctx.bed.model.requests, m1)).toBe(1);
      expect(turnOpenings(ctx.bed.model.requests, m2)).toBeLessThanOrEqual(1);
    });

    it('started: the prompt is submitted and running is durable → unknown; the queued follow-up queue_lost; Execute children gone', async () => {
      const s = scenario('started');
      const m1 = s.marker('started');
      const m2 = s.marker('started-follow');
      const { server, a } = await crashWithQueuedFollowUp(s, 'started', sleeper(m1, s.nonce), m2);
      await expectUnknownSession(server, a.metadata.session, a.metadata.run);
      expect(turnOpenings(ctx.bed.model.requests, m1)).toBeLessThanOrEqual(1);
      expect(mentions(ctx.bed.model.requests, m2)).toBe(0);
    });

    it('terminal-received: the result arrived but was not persisted → unknown (never guessed successful); follow-up queue_lost', async () => {
      const s = scenario('terminal-received');
      const m1 = s.marker('recv');
      const m2 = s.marker('recv-follow');
      const { server, a } = await crashWithQueuedFollowUp(s, 'terminal-received', `${m1} ${script({ text: 'done but unrecorded' })}`, m2);
      await expectUnknownSession(server, a.metadata.session, a.metadata.run);
      expect(turnOpenings(ctx.bed.model.requests, m1)).toBe(1);
      expect(mentions(ctx.bed.model.requests, m2)).toBe(0);
    });

    it('terminal-persisted: the result is durable, the worker unacknowledged → the real outcome; follow-up queue_lost; the session resumes', async () => {
      const s = scenario('terminal-persisted');
      const m1 = s.marker('pers');
      const m2 = s.marker('pers-follow');
      const { server, a, view } = await crashWithQueuedFollowUp(s, 'terminal-persisted', `${m1} ${script({ text: `answer ${s.nonce}` })}`, m2);
      expect(view.agentState).toBe('idle');
      expect(await history(server, a.metadata.session)).toContainEqual({ type: 'assistant_text', run: a.metadata.run, text: `answer ${s.nonce}` });
      expect(turnOpenings(ctx.bed.model.requests, m1)).toBe(1);
      expect(mentions(ctx.bed.model.requests, m2)).toBe(0);
      // Known outcome: the same droid session resumes, with turn 1 in its history.
      const m3 = s.marker('pers-resume');
      await server.ok('droid_send_message', { requestKey: s.key(), session: a.metadata.session, prompt: `${m3} ${script({ text: 'resumed' })}` });
      const [done] = await settle(server, [a.metadata.session]);
      expect(done).toMatchObject({ agentState: 'idle', needsAttention: false, preview: 'resumed' });
      const resumed = ctx.bed.model.requests.find((r) => JSON.stringify(r.messages).includes(m3))!;
      expect(JSON.stringify(resumed.messages)).toContain(`answer ${s.nonce}`);
      expect(turnOpenings(ctx.bed.model.requests, m1)).toBe(1);
    });

    it('kill -9 at no crash point, while droid runs a command through Execute → unknown, queue_lost, the command gone', async () => {
      const s = scenario('kill9');
      const m1 = s.marker('kill9');
      const m2 = s.marker('kill9-follow');
      const server0 = await s.start();
      const a = await server0.ok<Acceptance>('droid_create_session', createArgs(s, sleeper(m1, s.nonce)));
      const f = await server0.ok<Acceptance>('droid_send_message', {
        requestKey: s.key(),
        session: a.metadata.session,
        prompt: `${m2} ${script({ text: 'follow' })}`,
      });
      await until(() => pidsWithCmdline(`sleep 61.${s.nonce}`).length > 0, 30_000, 'the Execute command running');
      process.kill(server0.pid, 'SIGKILL');
      await s.crashed(server0, null);

      const server = await s.start();
      expectQueueLost((await status(server, a.metadata.session)).latestRun, f.metadata.run);
      await expectUnknownSession(server, a.metadata.session, a.metadata.run);
      expect(turnOpenings(ctx.bed.model.requests, m1)).toBe(1);
      expect(mentions(ctx.bed.model.requests, m2)).toBe(0);
    });
  });
}

describe('a session power cut short (issue 40)', () => {
  it('kill -9 mid-rewind (droid rewound, nothing recorded yet) → unknown, never replayed', async () => {
    const s = scenario('rewind');
    const m1 = s.marker('rw-one');
    const m2 = s.marker('rw-rewind');
    const file = join(s.ws, `made-${s.nonce}.txt`);
    const server0 = await s.start();
    const a = await server0.ok<Acceptance>(
      'droid_create_session',
      createArgs(s, `${m1} ${script({ tool: { name: 'Create', arguments: { file_path: file, content: 'made\n' } } })}`),
    );
    await settle(server0, [a.metadata.session]);
    expect(existsSync(file)).toBe(true);
    await server0.close();

    const crashing = await s.start('power-received');
    const rewind = { requestKey: s.key(), session: a.metadata.session, rewindTo: a.metadata.run, prompt: `${m2} ${script({ text: 'never' })}` };
    // The kill comes before the answer, or right after it: the caller never learns the outcome either way.
    await crashing.call('droid_send_message', rewind).catch(() => undefined);
    await s.crashed(crashing, 'power-received');

    const server = await s.start();
    const view = await status(server, a.metadata.session);
    expect(view.latestRun).toMatchObject({ state: 'unknown', rewindTo: a.metadata.run });
    await expectUnknownSession(server, a.metadata.session, view.latestRun.run);
    // droid did rewind (the file it made is gone), the prompt never reached the model, and a retry replays instead of rewinding again.
    expect(existsSync(file)).toBe(false);
    expect(mentions(ctx.bed.model.requests, m2)).toBe(0);
    const again = await server.ok<Acceptance>('droid_send_message', rewind);
    expect(again.metadata).toMatchObject({ run: view.latestRun.run, replayed: true });
    expect(again.status.latestRun.state).toBe('unknown');
  });
});
