/**
 * The controller's orchestration with its effects replaced: an in-memory
 * store and scripted workers. (The real store, workers and droid are covered
 * by the store, wire and end-to-end tiers.)
 */
import { describe, expect, it } from 'vitest';
import type { CatalogModel } from '../../src/droid/client.js';
import { SessionController, type ControllerStore } from '../../src/controller/controller.js';
import { ControllerError } from '../../src/controller/errors.js';
import type { RunRecord, RunResultFile, SessionRecord } from '../../src/store/records.js';
import { emptyFailure, type TurnResult, type TurnSpec } from '../../src/worker/protocol.js';
import type { WorkerHandle, WorkerOptions } from '../../src/worker/runner.js';

class MemoryStore implements ControllerStore {
  sessions = new Map<string, SessionRecord>();
  runs = new Map<string, RunRecord>();
  results = new Map<string, RunResultFile>();
  commits = 0;
  /** Commits that will fail, as a failing disk would. */
  failNext = 0;
  runsBySession(id: string) {
    return [...this.runs.values()].filter((r) => r.sessionId === id).sort((a, b) => a.seq - b.seq);
  }
  runByRequestKey(key: string) {
    return [...this.runs.values()].find((r) => r.requestKey === key);
  }
  async commit(change: { sessions?: SessionRecord[]; runs?: RunRecord[] }) {
    if (this.failNext > 0) {
      this.failNext--;
      throw new Error('EIO: i/o error, write');
    }
    this.commits++;
    for (const s of change.sessions ?? []) this.sessions.set(s.id, structuredClone(s));
    for (const r of change.runs ?? []) this.runs.set(r.id, structuredClone(r));
  }
  async writeResult(result: RunResultFile) {
    this.results.set(result.runId, result);
  }
  async readResult(runId: string) {
    return this.results.get(runId);
  }
}

interface FakeTurn {
  spec: TurnSpec;
  options: WorkerOptions;
  cancelled: boolean;
  finish(result: Partial<TurnResult>): void;
}

function setup(over: { maxConcurrentRuns?: number } = {}) {
  const store = new MemoryStore();
  /** Workspaces whose real path changed since (a symlink swapped in). */
  const moved = new Map<string, string>();
  const turns: FakeTurn[] = [];
  const catalog: CatalogModel[] = [{ id: 'm1', supportedReasoningEfforts: ['low', 'high'], defaultReasoningEffort: 'low' }];
  const startWorker = (spec: TurnSpec, options: WorkerOptions): WorkerHandle => {
    let settle!: (r: TurnResult) => void;
    const result = new Promise<TurnResult>((r) => (settle = r));
    let acked!: () => void;
    const cleanedUp = new Promise<void>((r) => (acked = r));
    const turn: FakeTurn = {
      spec,
      options,
      cancelled: false,
      finish: (partial) => settle({ ...emptyFailure({ code: 'x', message: 'x', retryable: false }), error: null, outcome: 'succeeded', reason: 'completed', submitted: true, droidSessionId: 'droid-1', ...partial }),
    };
    turns.push(turn);
    return {
      pid: 0,
      result,
      cleanedUp,
      cancel: () => {
        turn.cancelled = true;
      },
      acknowledge: () => acked(),
    };
  };
  const quiet = { info() {}, warn() {}, error() {} };
  const controller = new SessionController({
    store,
    models: async () => catalog,
    resolveWorkspace: async (p) => {
      if (!p.startsWith('/ok')) throw new ControllerError('workspace_not_approved', 'no', 'add it');
      return moved.get(p) ?? p;
    },
    startWorker,
    policy: { defaultModel: 'm1', defaultAutonomy: 'medium', maxAutonomy: 'high', reasoningEffort: 'high' },
    maxConcurrentRuns: over.maxConcurrentRuns ?? 4,
    runTimeoutMs: 60_000,
    cancelGraceMs: 1_000,
    droidPath: '/bin/droid',
    droidEnv: {},
    replyBackConfigured: false,
    log: quiet,
  });
  return { store, turns, controller, moved };
}

const tick = async (n = 5) => {
  for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
};
const create = (c: SessionController, key: string, workspace = '/ok/a', extra: object = {}) =>
  c.create({ requestKey: key, workspace, prompt: `prompt ${key}`, replyTo: null, ...extra });

describe('SessionController', () => {
  it('accepts durably, starts a worker with the resolved settings, and records the end', async () => {
    const { controller, turns, store } = setup();
    const accepted = await create(controller, 'k1');
    expect(accepted.metadata.replayed).toBe(false);
    await tick();
    expect(turns).toHaveLength(1);
    expect(turns[0]!.spec).toMatchObject({ model: 'm1', autonomy: 'medium', reasoningEffort: 'high', session: { mode: 'create' }, prompt: 'prompt k1' });
    turns[0]!.finish({ finalText: 'done!' });
    await controller.waitForSessions([accepted.metadata.session], 5);
    const status = controller.status(accepted.metadata.session);
    expect(status).toMatchObject({ agentState: 'idle', needsAttention: false, preview: 'done!', latestRun: { state: 'succeeded' } });
    expect(store.sessions.get(accepted.metadata.session)!.droidSessionId).toBe('droid-1');
    // The prompt is in no durable record.
    expect(JSON.stringify([...store.runs.values(), ...store.sessions.values()])).not.toContain('prompt k1');
  });

  it('replays a request key with the same intent and rejects a different one', async () => {
    const { controller, turns } = setup();
    const a = await create(controller, 'k1');
    const b = await create(controller, 'k1');
    expect(b.metadata).toEqual({ ...a.metadata, replayed: true });
    await expect(create(controller, 'k1', '/ok/other')).rejects.toMatchObject({ code: 'request_key_conflict' });
    await expect(create(controller, 'k1', '/ok/a', { model: 'm1' })).resolves.toMatchObject({ metadata: { replayed: true } });
    await expect(create(controller, 'k1', '/ok/a', { autonomy: 'high' })).rejects.toMatchObject({ code: 'request_key_conflict' });
    await tick();
    expect(turns).toHaveLength(1);
  });

  it('queues a follow-up behind a running turn and resumes the same droid session after it', async () => {
    const { controller, turns } = setup();
    const a = await create(controller, 'k1');
    await tick();
    turns[0]!.options.onStarted!('droid-1');
    await tick();
    const f = await controller.send({ requestKey: 'k2', session: a.metadata.session, prompt: 'next' });
    expect(f.status.latestRun.state).toBe('queued');
    await tick();
    expect(turns).toHaveLength(1);
    expect(turns[0]!.cancelled).toBe(false);
    turns[0]!.finish({});
    await tick(20);
    expect(turns).toHaveLength(2);
    expect(turns[1]!.spec.session).toEqual({ mode: 'resume', droidSessionId: 'droid-1' });
  });

  it('steering supersedes queued turns, interrupts the live one, and runs next', async () => {
    const { controller, turns, store } = setup();
    const a = await create(controller, 'k1');
    await tick();
    const queued = await controller.send({ requestKey: 'k2', session: a.metadata.session, prompt: 'queued' });
    const steer = await controller.send({ requestKey: 'k3', session: a.metadata.session, prompt: 'steer', interrupt: true });
    expect(store.runs.get(queued.metadata.run)).toMatchObject({ state: 'cancelled', cancelReason: 'superseded' });
    expect(turns[0]!.cancelled).toBe(true);
    expect(steer.status.latestRun.state).toBe('queued');
    turns[0]!.finish({ outcome: 'interrupted', reason: 'cancelled' });
    await tick(20);
    expect(turns).toHaveLength(2);
    expect(turns[1]!.spec.prompt).toBe('steer');
    expect(store.runs.get(a.metadata.run)).toMatchObject({ state: 'interrupted', needsAttention: false });
  });

  it('cancel interrupts the live turn and drops queued ones; repeating it is safe', async () => {
    const { controller, turns, store } = setup();
    const a = await create(controller, 'k1');
    await tick();
    const q = await controller.send({ requestKey: 'k2', session: a.metadata.session, prompt: 'queued' });
    await controller.cancel(a.metadata.session);
    await controller.cancel(a.metadata.session);
    expect(turns[0]!.cancelled).toBe(true);
    expect(store.runs.get(q.metadata.run)).toMatchObject({ state: 'cancelled', cancelReason: 'cancelled' });
    turns[0]!.finish({ outcome: 'interrupted', reason: 'cancelled' });
    await controller.waitForSessions([a.metadata.session], 5);
    await controller.cancel(a.metadata.session);
    expect(store.runs.get(a.metadata.run)!.state).toBe('interrupted');
    expect(turns).toHaveLength(1);
  });

  it('a failure drops later queued turns as predecessor_failed, needing attention', async () => {
    const { controller, turns, store } = setup();
    const a = await create(controller, 'k1');
    await tick();
    const q = await controller.send({ requestKey: 'k2', session: a.metadata.session, prompt: 'queued' });
    turns[0]!.finish({ outcome: 'failed', reason: null, error: { code: 'droid_exited', message: 'gone', retryable: true } });
    await controller.waitForSessions([a.metadata.session], 5);
    expect(store.runs.get(q.metadata.run)).toMatchObject({
      state: 'cancelled',
      cancelReason: 'predecessor_failed',
      needsAttention: true,
      predecessorFailure: { runId: a.metadata.run, state: 'failed' },
    });
    expect(controller.status(a.metadata.session)).toMatchObject({ needsAttention: true, latestRun: { predecessorFailure: { run: a.metadata.run } } });
    expect(turns).toHaveLength(1);
  });

  it('declined permissions and questions need attention even though droid completed', async () => {
    const { controller, turns } = setup();
    const a = await create(controller, 'k1');
    await tick();
    turns[0]!.finish({ questions: [{ topic: 't', question: 'q?', options: [] }] });
    const [status] = (await controller.waitForSessions([a.metadata.session], 5)).sessions;
    expect(status).toMatchObject({ agentState: 'idle', needsAttention: true, latestRun: { state: 'succeeded', questions: [{ question: 'q?' }] } });
  });

  it('a failed Factory title sync is noted on the run and retried on the next turn', async () => {
    const { controller, turns, store } = setup();
    const a = await create(controller, 'k1', '/ok/a', { title: 'First' });
    await tick();
    expect(turns[0]!.spec.renameTo).toBe('First');
    turns[0]!.finish({});
    await controller.waitForSessions([a.metadata.session], 5);
    // The worker reports the rename after the result, as in src/worker/main.ts.
    turns[0]!.options.onRename!({ title: 'First', ok: false, error: 'droid said no' });
    await tick(10);
    const first = store.runs.get(a.metadata.run)!;
    expect(first.state).toBe('succeeded');
    expect(first.events.at(-1)).toMatchObject({ kind: 'title_sync_failed', detail: expect.stringContaining('droid said no') });
    await controller.send({ requestKey: 'k2', session: a.metadata.session, prompt: 'again' });
    await tick(10);
    expect(turns[1]!.spec.renameTo).toBe('First');
    turns[1]!.finish({});
    await controller.waitForSessions([a.metadata.session], 5);
    turns[1]!.options.onRename!({ title: 'First', ok: true, error: null });
    await tick(10);
    expect(store.sessions.get(a.metadata.session)!.factoryTitle).toBe('First');
  });

  it('never runs more than maxConcurrentRuns turns', async () => {
    const { controller, turns } = setup({ maxConcurrentRuns: 2 });
    for (let i = 0; i < 5; i++) await create(controller, `k${i}`, `/ok/w${i}`);
    await tick();
    expect(turns).toHaveLength(2);
    expect(controller.capacity()).toEqual({ maximum: 2, active: 2, queued: 3, available: 0 });
    turns[0]!.finish({});
    await tick(20);
    expect(turns).toHaveLength(3);
  });

  it('bounds the queue per session', async () => {
    const { controller } = setup();
    const a = await create(controller, 'k0');
    for (let i = 1; i <= 8; i++) await controller.send({ requestKey: `s${i}`, session: a.metadata.session, prompt: `p${i}` });
    await expect(controller.send({ requestKey: 's9', session: a.metadata.session, prompt: 'p9' })).rejects.toMatchObject({ code: 'queue_full', retryable: true });
  });

  it('rejects unknown sessions, reply-back and unapproved workspaces with public errors', async () => {
    const { controller, store } = setup();
    expect(() => controller.status('nope')).toThrow(expect.objectContaining({ code: 'session_not_found' }));
    await expect(controller.create({ requestKey: 'r', workspace: '/ok/a', prompt: 'p', replyTo: 'T-1' })).rejects.toMatchObject({ code: 'reply_back_unavailable' });
    await expect(create(controller, 'r2', '/etc')).rejects.toMatchObject({ code: 'workspace_not_approved' });
    expect(store.commits).toBe(0);
  });

  it('refuses a follow-up when the workspace no longer resolves to the recorded directory', async () => {
    const { controller, turns, moved } = setup();
    const a = await create(controller, 'k1', '/ok/a');
    await tick();
    turns[0]!.finish({});
    await controller.waitForSessions([a.metadata.session], 5);
    moved.set('/ok/a', '/ok/elsewhere');
    await expect(controller.send({ requestKey: 'k2', session: a.metadata.session, prompt: 'p' })).rejects.toMatchObject({ code: 'workspace_changed' });
    await tick();
    expect(turns).toHaveLength(1);
  });

  it('a failed acceptance write accepts nothing and starts nothing; the same key then works', async () => {
    const { controller, turns, store } = setup();
    store.failNext = 1;
    await expect(create(controller, 'k1')).rejects.toThrow('EIO');
    await tick();
    expect(turns).toHaveLength(0);
    expect(store.runs.size).toBe(0);
    await expect(create(controller, 'k1')).resolves.toMatchObject({ metadata: { replayed: false } });
  });

  it('retries recording a result on a failing disk before acknowledging the worker', async () => {
    const { controller, turns, store } = setup();
    const a = await create(controller, 'k1');
    await tick();
    store.failNext = 2;
    turns[0]!.finish({ finalText: 'kept' });
    const [status] = (await controller.waitForSessions([a.metadata.session], 5)).sessions;
    expect(status).toMatchObject({ agentState: 'idle', preview: 'kept', latestRun: { state: 'succeeded' } });
    await tick(10);
    expect(controller.capacity().active).toBe(0);
  });

  it('wait returns timedOut without failing when work continues', async () => {
    const { controller } = setup();
    const a = await create(controller, 'k1');
    const waited = await controller.waitForSessions([a.metadata.session, a.metadata.session], 0);
    expect(waited.timedOut).toBe(true);
    expect(waited.sessions).toHaveLength(1);
  });
});
