/**
 * The controller's orchestration with its effects replaced: an in-memory
 * store and scripted workers. (The real store, workers and droid are covered
 * by the store, wire and end-to-end tiers.)
 */
import { describe, expect, it, vi } from 'vitest';
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
  /** Fails every commit this matches (a disk that fails some writes). */
  failWhen: ((change: { sessions?: SessionRecord[]; runs?: RunRecord[] }) => boolean) | null = null;
  /** Holds a matching commit until the returned promise settles (a slow disk). */
  holdWhen: ((change: { sessions?: SessionRecord[]; runs?: RunRecord[] }) => Promise<void> | null) | null = null;
  runsBySession(id: string) {
    return [...this.runs.values()].filter((r) => r.sessionId === id).sort((a, b) => a.seq - b.seq);
  }
  runByRequestKey(key: string) {
    return [...this.runs.values()].find((r) => r.requestKey === key);
  }
  async commit(change: { sessions?: SessionRecord[]; runs?: RunRecord[] }) {
    await this.holdWhen?.(change);
    if (this.failNext > 0 || this.failWhen?.(change)) {
      if (this.failNext > 0) this.failNext--;
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
  /** The run's durable state when the worker was acknowledged (undefined: never). */
  stateAtAck: string | undefined;
  finish(result: Partial<TurnResult>): void;
  /** The worker and its group are gone (automatic on acknowledge unless holdExit). */
  exit(): void;
}

function setup(over: { maxConcurrentRuns?: number; holdExit?: boolean; models?: () => Promise<CatalogModel[]>; sandboxUnavailable?: string } = {}) {
  const store = new MemoryStore();
  /** Workspaces whose real path changed since (a symlink swapped in). */
  const moved = new Map<string, string>();
  const turns: FakeTurn[] = [];
  const catalog: CatalogModel[] = [{ id: 'm1', supportedReasoningEfforts: ['low', 'high'], defaultReasoningEffort: 'low' }];
  const spawn = { fail: false };
  const startWorker = (spec: TurnSpec, options: WorkerOptions): WorkerHandle => {
    if (spawn.fail) throw new Error('spawn EAGAIN');
    let settle!: (r: TurnResult) => void;
    const result = new Promise<TurnResult>((r) => (settle = r));
    let exited!: () => void;
    const cleanedUp = new Promise<void>((r) => (exited = r));
    const turn: FakeTurn = {
      spec,
      options,
      cancelled: false,
      stateAtAck: undefined,
      finish: (partial) => settle({ ...emptyFailure({ code: 'x', message: 'x', retryable: false }), error: null, outcome: 'succeeded', reason: 'completed', submitted: true, droidSessionId: 'droid-1', ...partial }),
      exit: () => exited(),
    };
    turns.push(turn);
    return {
      pid: 0,
      result,
      cleanedUp,
      cancel: () => {
        turn.cancelled = true;
      },
      acknowledge: () => {
        turn.stateAtAck = store.runs.get(spec.runId)?.state;
        if (!over.holdExit) exited();
      },
    };
  };
  const quiet = { info() {}, warn() {}, error() {} };
  const controller = new SessionController({
    store,
    models: over.models ?? (async () => catalog),
    resolveWorkspace: async (p) => {
      if (!p.startsWith('/ok')) throw new ControllerError('workspace_not_approved', 'no', 'add it');
      return moved.get(p) ?? p;
    },
    startWorker,
    policy: { defaultModel: 'm1', defaultAutonomy: 'medium', maxAutonomy: 'high', reasoningEffort: 'high' },
    maxConcurrentRuns: over.maxConcurrentRuns ?? 4,
    runTimeoutMs: 60_000,
    cancelGraceMs: 1_000,
    sandbox: { mode: 'off' },
    sandboxUnavailable: over.sandboxUnavailable ?? null,
    droidPath: '/bin/droid',
    droidEnv: {},
    replyBackConfigured: false,
    log: quiet,
  });
  return { store, turns, controller, moved, spawn };
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

/** A run record becoming `state` is in this change. */
const becomes = (state: string) => (change: { runs?: RunRecord[] }) => (change.runs ?? []).some((r) => r.state === state);

describe('SessionController: one owner per turn, commit before memory', () => {
  it('a failed `starting` commit leaks no slot or lock: the turn stays queued, is retried, and others run meanwhile', async () => {
    const { controller, turns, store } = setup({ maxConcurrentRuns: 1 });
    store.failWhen = becomes('starting');
    const a = await create(controller, 'k1', '/ok/a');
    await tick(10);
    expect(turns).toHaveLength(0);
    expect(store.runs.get(a.metadata.run)!.state).toBe('queued');
    expect(controller.capacity()).toMatchObject({ active: 0, queued: 1 });
    // The disk heals. While a waits out its retry delay, b (another tree) takes the free slot;
    // a follow-up of a's session may not overtake a.
    store.failWhen = null;
    const b = await create(controller, 'k2', '/ok/b');
    const a2 = await controller.send({ requestKey: 'k1b', session: a.metadata.session, prompt: 'after a' });
    await tick(10);
    expect(turns.map((t) => t.spec.runId)).toEqual([b.metadata.run]);
    turns[0]!.finish({});
    await vi.waitFor(() => expect(turns).toHaveLength(2), { timeout: 3_000 });
    expect(turns[1]!.spec.runId).toBe(a.metadata.run);
    turns[1]!.finish({});
    await vi.waitFor(() => expect(turns).toHaveLength(3));
    expect(turns[2]!.spec.runId).toBe(a2.metadata.run);
    turns[2]!.finish({});
    await controller.waitForSessions([a.metadata.session, b.metadata.session], 5);
    await vi.waitFor(() => expect(controller.capacity()).toMatchObject({ active: 0, queued: 0 }));
  });

  it('a worker that cannot be spawned ends the run failed and releases its slot; its session stops, others go on', async () => {
    const { controller, turns, store, spawn } = setup({ maxConcurrentRuns: 1 });
    spawn.fail = true;
    const a = await create(controller, 'k1', '/ok/a');
    const followUp = await controller.send({ requestKey: 'k1b', session: a.metadata.session, prompt: 'next' });
    await controller.waitForSessions([a.metadata.session], 5);
    expect(store.runs.get(a.metadata.run)).toMatchObject({ state: 'failed', error: { code: 'worker_spawn_failed' }, needsAttention: true });
    expect(store.runs.get(followUp.metadata.run)).toMatchObject({ state: 'cancelled', cancelReason: 'predecessor_failed' });
    spawn.fail = false;
    const b = await create(controller, 'k2', '/ok/b');
    await tick(10);
    expect(turns.map((t) => t.spec.runId)).toEqual([b.metadata.run]);
    expect(controller.capacity().active).toBe(1);
  });

  it('a forced stop we asked for is a cancellation: the steering message still runs after it', async () => {
    const { controller, turns, store } = setup();
    const a = await create(controller, 'k1');
    await tick();
    const steer = await controller.send({ requestKey: 'k2', session: a.metadata.session, prompt: 'steer', interrupt: true });
    expect(turns[0]!.cancelled).toBe(true);
    turns[0]!.finish({ outcome: 'cancelled', reason: null, error: { code: 'interrupt_unconfirmed', message: 'killed', retryable: false } });
    await vi.waitFor(() => expect(turns).toHaveLength(2));
    expect(turns[1]!.spec.prompt).toBe('steer');
    expect(store.runs.get(a.metadata.run)).toMatchObject({ state: 'cancelled', cancelReason: 'interrupt_unconfirmed' });
    expect(store.runs.get(steer.metadata.run)!.state).toBe('starting');
  });

  it('a failed cancel commit changes nothing: the queued run stays runnable and cancellable', async () => {
    const { controller, turns, store } = setup();
    const a = await create(controller, 'k1');
    await tick();
    const q = await controller.send({ requestKey: 'k2', session: a.metadata.session, prompt: 'queued' });
    store.failNext = 1;
    await expect(controller.cancel(a.metadata.session)).rejects.toThrow('EIO');
    expect(turns[0]!.cancelled).toBe(false);
    expect(store.runs.get(q.metadata.run)!.state).toBe('queued');
    expect(controller.capacity()).toMatchObject({ queued: 1 });
    turns[0]!.finish({});
    await vi.waitFor(() => expect(turns).toHaveLength(2));
    expect(turns[1]!.spec.runId).toBe(q.metadata.run);
  });

  it('a failed steering commit changes nothing: no interrupt, the queued run still runs next', async () => {
    const { controller, turns, store } = setup();
    const a = await create(controller, 'k1');
    await tick();
    const q = await controller.send({ requestKey: 'k2', session: a.metadata.session, prompt: 'queued' });
    store.failNext = 1;
    await expect(controller.send({ requestKey: 'k3', session: a.metadata.session, prompt: 'steer', interrupt: true })).rejects.toThrow('EIO');
    expect(turns[0]!.cancelled).toBe(false);
    expect(store.runByRequestKey('k3')).toBeUndefined();
    turns[0]!.finish({});
    await vi.waitFor(() => expect(turns).toHaveLength(2));
    expect(turns[1]!.spec.runId).toBe(q.metadata.run);
    // And it can still be cancelled.
    await controller.cancel(a.metadata.session);
    expect(turns[1]!.cancelled).toBe(true);
  });

  it('a slow model catalog does not hold up another session\'s cancel or result', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let slow = false;
    const catalog: CatalogModel[] = [{ id: 'm1', supportedReasoningEfforts: ['low', 'high'], defaultReasoningEffort: 'low' }];
    const { controller, turns, store } = setup({ models: async () => (slow ? gate.then(() => catalog) : catalog) });
    const a = await create(controller, 'k1', '/ok/a');
    await tick();
    slow = true;
    const pending = create(controller, 'k2', '/ok/b');
    await tick();
    // Neither the cancel nor recording a's result waits for the catalog.
    await controller.cancel(a.metadata.session);
    turns[0]!.finish({ outcome: 'interrupted', reason: 'cancelled' });
    await vi.waitFor(() => expect(store.runs.get(a.metadata.run)!.state).toBe('interrupted'));
    release();
    await expect(pending).resolves.toMatchObject({ metadata: { replayed: false } });
  });

  it('a result that cannot be recorded halts the controller: nothing runs across it, and waits settle', async () => {
    const { controller, turns, store } = setup();
    const a = await create(controller, 'k1');
    await tick();
    const q = await controller.send({ requestKey: 'k2', session: a.metadata.session, prompt: 'queued' });
    store.failWhen = () => true;
    turns[0]!.finish({ finalText: 'lost' });
    const waited = await controller.waitForSessions([a.metadata.session], 5);
    expect(waited.timedOut).toBe(false);
    // Shown as a restart will record it; the disk still holds what it held.
    expect(store.runs.get(a.metadata.run)!.state).toBe('starting');
    expect(store.runs.get(q.metadata.run)!.state).toBe('queued');
    expect(controller.status(a.metadata.session)).toMatchObject({ agentState: 'unknown', needsAttention: true, latestRun: { state: 'cancelled', cancelReason: 'queue_lost' } });
    expect(turns[0]!.stateAtAck).toBeUndefined();
    await tick(20);
    expect(turns).toHaveLength(1);
    store.failWhen = null;
    await expect(create(controller, 'k3', '/ok/b')).rejects.toMatchObject({ code: 'state_unwritable', retryable: false });
    await expect(controller.cancel(a.metadata.session)).rejects.toMatchObject({ code: 'state_unwritable' });
    // A replay of what was accepted still answers.
    await expect(create(controller, 'k1')).resolves.toMatchObject({ metadata: { replayed: true } });
  });

  it('a graceful stop racing the `starting` commit starts no worker and records that nothing was submitted', async () => {
    const { controller, turns, store } = setup();
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    store.holdWhen = (change) => (becomes('starting')(change) ? gate : null);
    const a = await create(controller, 'k1');
    await tick();
    const stopped = controller.shutdown(2_000);
    release();
    await stopped;
    expect(turns).toHaveLength(0);
    expect(store.runs.get(a.metadata.run)).toMatchObject({ state: 'cancelled', error: { code: 'controller_stopping', retryable: true } });
  });

  it('a queued turn whose workspace changed before it started is refused without a worker', async () => {
    const { controller, turns, store, moved } = setup();
    const a = await create(controller, 'k1', '/ok/a');
    await tick();
    const q = await controller.send({ requestKey: 'k2', session: a.metadata.session, prompt: 'next' });
    moved.set('/ok/a', '/ok/elsewhere');
    turns[0]!.finish({});
    await controller.waitForSessions([a.metadata.session], 5);
    expect(store.runs.get(q.metadata.run)).toMatchObject({ state: 'failed', error: { code: 'workspace_changed' } });
    expect(turns).toHaveLength(1);
  });

  it('the worker is acknowledged only after its result is durable', async () => {
    const { controller, turns, store } = setup();
    const a = await create(controller, 'k1');
    await tick();
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    store.holdWhen = (change) => (becomes('succeeded')(change) ? gate : null);
    turns[0]!.finish({});
    await tick(20);
    expect(turns[0]!.stateAtAck).toBeUndefined();
    release();
    await controller.waitForSessions([a.metadata.session], 5);
    await vi.waitFor(() => expect(turns[0]!.stateAtAck).toBe('succeeded'));
  });

  it('the slot and lock are released only when the worker and its group are gone, not at the result', async () => {
    const { controller, turns } = setup({ maxConcurrentRuns: 1, holdExit: true });
    const a = await create(controller, 'k1', '/ok/a');
    await create(controller, 'k2', '/ok/b');
    await tick();
    turns[0]!.finish({});
    await controller.waitForSessions([a.metadata.session], 5);
    await tick(20);
    expect(turns[0]!.stateAtAck).toBe('succeeded');
    expect(turns).toHaveLength(1);
    expect(controller.capacity().active).toBe(1);
    turns[0]!.exit();
    await vi.waitFor(() => expect(turns).toHaveLength(2));
  });

  it('a wait stops when the client cancels its request', async () => {
    const { controller } = setup();
    const a = await create(controller, 'k1');
    const abort = new AbortController();
    const waiting = controller.waitForSessions([a.metadata.session], 30, abort.signal);
    abort.abort();
    await expect(waiting).rejects.toMatchObject({ code: 'request_cancelled' });
  });
});

describe('SessionController evidence (structured output, changes, context)', () => {
  const schema = { type: 'object', properties: { answer: { type: 'number' } }, required: ['answer'] };
  const changes = { added: ['a.txt'], modified: [], deleted: [], renamed: [], truncated: 0, outsideWorkspace: false };

  it('refuses a bad outputSchema with invalid_arguments before anything is accepted', async () => {
    const { controller, turns, store } = setup();
    for (const bad of [{ type: 'array' }, { type: 'object', properties: { a: { minLength: 'x' } } }, { type: 'object', description: 'x'.repeat(40_000) }]) {
      await expect(create(controller, 'k-bad', '/ok/a', { outputSchema: bad })).rejects.toMatchObject({ code: 'invalid_arguments' });
    }
    expect(store.sessions.size).toBe(0);
    expect(store.runs.size).toBe(0);
    const ok = await create(controller, 'k-ok');
    await tick();
    turns[0]!.finish({});
    await controller.waitForSessions([ok.metadata.session], 5);
    const runsBefore = structuredClone([...store.runs.values()]);
    await expect(
      controller.send({ requestKey: 'k-bad-send', session: ok.metadata.session, prompt: 'p', outputSchema: { type: 'object', properties: { a: { $ref: '#/nope' } } } }),
    ).rejects.toMatchObject({ code: 'invalid_arguments', message: expect.stringContaining('resolve reference') });
    expect([...store.runs.values()]).toEqual(runsBefore);
    expect(turns).toHaveLength(1);
  });

  it('passes the schema to that turn only, shows the evidence in status and read, and fingerprints the schema', async () => {
    const { controller, turns } = setup();
    const a = await create(controller, 'k1', '/ok/a', { outputSchema: schema });
    await tick();
    expect(turns[0]!.spec.outputSchema).toEqual(schema);
    turns[0]!.finish({ structuredOutput: { answer: 42 }, changes, context: { used: 100, limit: 1000, fraction: 0.1 } });
    await controller.waitForSessions([a.metadata.session], 5);
    expect(controller.status(a.metadata.session).latestRun).toMatchObject({
      state: 'succeeded',
      structuredOutput: { answer: 42 },
      changes,
      context: { used: 100, limit: 1000, fraction: 0.1 },
      needsAttention: false,
    });
    const items = (await controller.read(a.metadata.session)).items;
    expect(items).toContainEqual({ type: 'structured_output', run: a.metadata.run, value: { answer: 42 } });
    expect(items).toContainEqual({ type: 'changes', run: a.metadata.run, changes });
    // Same key: the same schema in another key order replays; another schema conflicts.
    const reordered = { required: ['answer'], properties: { answer: { type: 'number' } }, type: 'object' };
    expect((await create(controller, 'k1', '/ok/a', { outputSchema: reordered })).metadata.replayed).toBe(true);
    await expect(create(controller, 'k1', '/ok/a', { outputSchema: { type: 'object' } })).rejects.toMatchObject({ code: 'request_key_conflict' });
    await expect(create(controller, 'k1', '/ok/a')).rejects.toMatchObject({ code: 'request_key_conflict' });
    // The next turn carries no schema unless it gives one.
    await controller.send({ requestKey: 'k2', session: a.metadata.session, prompt: 'more' });
    await tick();
    expect(turns[1]!.spec.outputSchema).toBeUndefined();
    turns[1]!.finish({ changes: null });
    await controller.waitForSessions([a.metadata.session], 5);
    expect(controller.status(a.metadata.session).latestRun).toMatchObject({ structuredOutput: null, changes: null, context: null });
  });

  it('an off turn that shows changed files needs attention, loudly', async () => {
    const { controller, turns } = setup();
    const a = await create(controller, 'k-off', '/ok/a', { autonomy: 'off' });
    await tick();
    turns[0]!.finish({ changes });
    await controller.waitForSessions([a.metadata.session], 5);
    const run = controller.status(a.metadata.session).latestRun;
    expect(run.needsAttention).toBe(true);
    expect(run.events.map((e) => e.kind)).toContain('readonly_turn_changed_files');
    // Without changes an off turn is fine.
    const b = await create(controller, 'k-off-2', '/ok/b', { autonomy: 'off' });
    await tick();
    turns[1]!.finish({ changes: { ...changes, added: [] } });
    await controller.waitForSessions([b.metadata.session], 5);
    expect(controller.status(b.metadata.session).latestRun.needsAttention).toBe(false);
  });

  it('find filters on hasChanges', async () => {
    const { controller, turns } = setup();
    const a = await create(controller, 'ka', '/ok/a');
    const b = await create(controller, 'kb', '/ok/b');
    const c = await create(controller, 'kc', '/ok/c');
    await tick();
    turns[0]!.finish({ changes });
    turns[1]!.finish({ changes: { ...changes, added: [] } });
    turns[2]!.finish({ changes: null });
    await controller.waitForSessions([a.metadata.session, b.metadata.session, c.metadata.session], 5);
    const ids = async (hasChanges: boolean) => (await controller.find({ hasChanges })).sessions.map((s) => s.session).sort();
    expect(await ids(true)).toEqual([a.metadata.session]);
    expect(await ids(false)).toEqual([b.metadata.session, c.metadata.session].sort());
    expect((await controller.find({})).sessions).toHaveLength(3);
  });
});
