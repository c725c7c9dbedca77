/**
 * The controller's orchestration with its effects replaced: an in-memory
 * store and scripted workers. (The real store, workers and droid are covered
 * by the store, wire and end-to-end tiers.)
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it, vi } from 'vitest';
import type { CatalogModel } from '../../src/droid/client.js';
import { SessionController, type ControllerStore } from '../../src/controller/controller.js';
import { ControllerError } from '../../src/shared/public-error.js';
import type { RunRecord, RunResultFile, SessionRecord } from '../../src/shared/records.js';
import { emptyFailure, type TurnResult, type TurnSpec } from '../../src/worker/shared/protocol.js';
import type { WorkerHandle, WorkerOptions } from '../../src/worker/parent/runner.js';
import type { Prestart } from '../../src/worker/parent/prestart.js';

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
  /** Holds a matching result file write until the returned promise settles (a slow fsync). */
  holdResult: ((runId: string) => Promise<void> | null) | null = null;
  async writeResult(result: RunResultFile) {
    await this.holdResult?.(result.runId);
    this.results.set(result.runId, result);
  }
  async readResult(runId: string) {
    return this.results.get(runId);
  }
}

/** The model's first streamed words, as the worker reports them. */
const PARTIAL = { kind: 'assistant_partial', text: 'thinking' } as const;

interface FakePrestart extends Prestart {
  spec: TurnSpec;
  disposed: number;
}

interface FakeTurn {
  spec: TurnSpec;
  options: WorkerOptions;
  /** The droid started for it while it waited, if the launch was given one. */
  early: Prestart | undefined;
  cancelled: boolean;
  /** The controller asked the worker to leave the Factory title for a later turn. */
  renameSkipped: boolean;
  /** The run's durable state when the worker was acknowledged (undefined: never). */
  stateAtAck: string | undefined;
  finish(result: Partial<TurnResult>): void;
  /** The worker and its group are gone (automatic on acknowledge unless holdExit). */
  exit(): void;
}

function setup(
  over: {
    maxConcurrentRuns?: number;
    holdExit?: boolean;
    models?: () => Promise<CatalogModel[]>;
    offerModels?: (models: CatalogModel[], answeredAt: number) => void;
    sandboxUnavailable?: string;
    ampMcpUrl?: string;
    store?: MemoryStore;
    /** Boot droids for sessions' next turns (prestartWorker). */
    prestart?: boolean;
    /** How long such a droid waits once its session is idle. */
    nextTurnDroidIdleMs?: number;
    /** Called as each worker is started, before it exists. */
    onStartWorker?: (spec: TurnSpec) => void;
  } = {},
) {
  const store = over.store ?? new MemoryStore();
  /** Workspaces whose real path changed since (a symlink swapped in). */
  const moved = new Map<string, string>();
  const turns: FakeTurn[] = [];
  const catalog: CatalogModel[] = [{ id: 'm1', supportedReasoningEfforts: ['low', 'high'], defaultReasoningEffort: 'low' }];
  const spawn = { fail: false };
  /** Droids booted for sessions' next turns (next-turn-droids.ts), as the controller asked for them. */
  const prestarts: FakePrestart[] = [];
  const prestartWorker = (spec: TurnSpec): Prestart => {
    const early: FakePrestart = { spec, disposed: 0, worker: {} as Prestart['worker'], confined: {} as Prestart['confined'], dispose: async () => void early.disposed++ };
    prestarts.push(early);
    return early;
  };
  const startWorker = (spec: TurnSpec, options: WorkerOptions, early?: Prestart): WorkerHandle => {
    over.onStartWorker?.(spec);
    if (spawn.fail) throw new Error('spawn EAGAIN');
    let settle!: (r: TurnResult) => void;
    const result = new Promise<TurnResult>((r) => (settle = r));
    let exited!: () => void;
    const cleanedUp = new Promise<void>((r) => (exited = r));
    const turn: FakeTurn = {
      spec,
      options,
      early,
      cancelled: false,
      renameSkipped: false,
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
      skipRename: () => {
        turn.renameSkipped = true;
      },
    };
  };
  const quiet = { info() {}, warn() {}, error() {} };
  const controller = new SessionController({
    store,
    models: over.models ?? (async () => catalog),
    ...(over.offerModels && { offerModels: over.offerModels }),
    resolveWorkspace: async (p) => {
      if (!p.startsWith('/ok')) throw new ControllerError('workspace_not_approved', 'no', 'add it');
      return moved.get(p) ?? p;
    },
    startWorker,
    ...(over.prestart && { prestartWorker }),
    ...(over.nextTurnDroidIdleMs !== undefined && { nextTurnDroidIdleMs: over.nextTurnDroidIdleMs }),
    policy: { defaultModel: 'm1', defaultAutonomy: 'medium', maxAutonomy: 'high', reasoningEffort: 'high' },
    maxConcurrentRuns: over.maxConcurrentRuns ?? 4,
    runTimeoutMs: 60_000,
    cancelGraceMs: 1_000,
    sandbox: { mode: 'off' },
    sandboxUnavailable: over.sandboxUnavailable ?? null,
    droidPath: '/bin/droid',
    droidEnv: {},
    ampMcpUrl: over.ampMcpUrl ?? null,
    log: quiet,
  });
  return { store, turns, controller, moved, spawn, prestarts };
}

const tick = async (n = 5) => {
  for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
};
const create = (c: SessionController, key: string, workspace = '/ok/a', extra: object = {}) =>
  c.create({ requestKey: key, workspace, prompt: `prompt ${key}`, replyTo: null, ...extra });

describe('SessionController', () => {
  it("offers the catalog a turn's droid answered with to the model catalog, with its time", async () => {
    const offered: Array<{ ids: string[]; answeredAt: number }> = [];
    const { controller, turns } = setup({ offerModels: (models, answeredAt) => offered.push({ ids: models.map((m) => m.id), answeredAt }) });
    await create(controller, 'k-catalog');
    await tick();
    turns[0]!.options.onCatalog!([{ id: 'm1' }, { id: 'm2' }], 1_234);
    expect(offered).toEqual([{ ids: ['m1', 'm2'], answeredAt: 1_234 }]);
    turns[0]!.finish({});
    await tick();
  });

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
    turns[0]!.options.onStarted!('droid-1', {});
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
    // The worker reports the rename after the result, as in src/worker/child/main.ts.
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
    await expect(controller.create({ requestKey: 'r', workspace: '/ok/a', prompt: 'p', replyTo: 'T-11111111-2222-4333-8444-555555555555' })).rejects.toMatchObject({ code: 'reply_back_unavailable' });
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

  it('acceptances waiting together are committed together, each answered only once that commit is durable; one refused there fails alone', async () => {
    const { controller, store } = setup();
    // A session whose last turn's outcome is unknown refuses follow-ups, in the chain.
    const x = await create(controller, 'k0', '/ok/x');
    store.runs.set(x.metadata.run, { ...store.runs.get(x.metadata.run)!, state: 'unknown' });
    const commits: string[][] = [];
    const gates = new Map<string, () => void>();
    const held = (key: string) => new Promise<void>((r) => gates.set(key, r));
    // Every acceptance commit is held until released, and recorded with the request keys it holds.
    store.holdWhen = (change) => {
      const keys = (change.runs ?? []).filter((r) => r.state === 'queued').map((r) => r.requestKey!).sort();
      if (keys.length === 0) return null;
      commits.push(keys);
      return held(keys.join());
    };
    const answered = new Set<string>();
    const accept = (key: string, workspace: string) => create(controller, key, workspace).then((a) => (answered.add(key), a));
    const a = accept('k1', '/ok/a');
    await vi.waitFor(() => expect(commits).toEqual([['k1']]));
    // Three more arrive while k1's commit is on disk, and a follow-up that is refused: one batch, one commit.
    const rest = [accept('k2', '/ok/b'), accept('k3', '/ok/c'), accept('k4', '/ok/d')];
    const refused = controller.send({ requestKey: 'k5', session: x.metadata.session, prompt: 'x' });
    await tick();
    gates.get('k1')!();
    await expect(refused).rejects.toMatchObject({ code: 'session_unknown_outcome' });
    await vi.waitFor(() => expect(commits).toEqual([['k1'], ['k2', 'k3', 'k4']]));
    await tick();
    expect([...answered].filter((key) => key !== 'k1')).toEqual([]);
    expect(store.runByRequestKey('k2')).toBeUndefined();
    gates.get('k2,k3,k4')!();
    await a;
    const accepted = await Promise.all(rest);
    expect(accepted.map((x) => x.metadata.replayed)).toEqual([false, false, false]);
    expect(new Set(accepted.map((x) => x.metadata.session)).size).toBe(3);
  });

  it('a failed batch commit fails exactly its acceptances, and nothing of them is in memory', async () => {
    const { controller, turns, store } = setup({ maxConcurrentRuns: 1 });
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    store.holdWhen = (change) => ((change.runs ?? []).some((r) => r.requestKey === 'k1') ? gate : null);
    const a = create(controller, 'k1', '/ok/a');
    await tick();
    store.failWhen = (change) => (change.runs ?? []).some((r) => r.requestKey === 'k2');
    const failing = [create(controller, 'k2', '/ok/b'), create(controller, 'k3', '/ok/c')];
    await tick();
    release();
    await a;
    for (const f of failing) await expect(f).rejects.toThrow('EIO');
    expect(store.runByRequestKey('k2') ?? store.runByRequestKey('k3')).toBeUndefined();
    expect(controller.capacity()).toMatchObject({ active: 1, queued: 0 });
    store.failWhen = null;
    // Nothing of them is in memory: the same keys are new requests now.
    await expect(create(controller, 'k2', '/ok/b')).resolves.toMatchObject({ metadata: { replayed: false } });
    await expect(create(controller, 'k3', '/ok/c')).resolves.toMatchObject({ metadata: { replayed: false } });
    expect(turns.length).toBeLessThanOrEqual(1);
  });

  it('follow-ups of one session waiting together are committed one after the other, in order', async () => {
    const { controller, store } = setup();
    const a = await create(controller, 'k1', '/ok/a');
    await tick();
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const commits: string[][] = [];
    store.holdWhen = (change) => {
      const keys = (change.runs ?? []).filter((r) => r.state === 'queued').map((r) => r.requestKey!);
      if (keys.length) commits.push(keys);
      return keys.includes('k0') ? gate : null;
    };
    const other = create(controller, 'k0', '/ok/b');
    await tick();
    const sends = ['k2', 'k3', 'k4'].map((key) => controller.send({ requestKey: key, session: a.metadata.session, prompt: key }));
    const elsewhere = create(controller, 'k5', '/ok/c');
    await tick();
    release();
    await Promise.all([other, elsewhere, ...sends]);
    expect(commits).toEqual([['k0'], ['k2', 'k5'], ['k3'], ['k4']]);
    expect(['k2', 'k3', 'k4'].map((key) => store.runByRequestKey(key)!.seq)).toEqual([2, 3, 4]);
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
    // The follow-up is accepted while the first turn is admitted (its `starting` commit held back).
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    store.holdWhen = (change) => (becomes('starting')(change) ? gate : null);
    const accepting = create(controller, 'k1', '/ok/a');
    await vi.waitFor(() => expect(store.sessions.size).toBe(1));
    const following = controller.send({ requestKey: 'k1b', session: [...store.sessions.keys()][0]!, prompt: 'next' });
    await tick();
    store.holdWhen = null;
    release();
    const [a, followUp] = await Promise.all([accepting, following]);
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
    // The acceptance of a turn admitted at once answers after its `starting` commit.
    const accepting = create(controller, 'k1');
    await tick();
    const stopped = controller.shutdown(2_000);
    release();
    const a = await accepting;
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

  it("a slow results file write holds up no other session's acceptance; its own run's record still waits for it", async () => {
    const { controller, turns, store } = setup();
    const a = await create(controller, 'k1', '/ok/a');
    await tick();
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    store.holdResult = (runId) => (runId === a.metadata.run ? gate : null);
    turns[0]!.finish({ finalText: 'slow disk' });
    await tick(20);
    // Another session's create (admitted at once: its starting commit too) and a cancel go through meanwhile.
    const b = await Promise.race([create(controller, 'k2', '/ok/b'), sleep(5_000).then(() => 'held up' as const)]);
    expect(b).toMatchObject({ admission: { action: 'started' }, status: { latestRun: { state: 'starting' } } });
    await expect(Promise.race([controller.cancel((b as { metadata: { session: string } }).metadata.session), sleep(5_000).then(() => 'held up')])).resolves.not.toBe('held up');
    // The record of the run whose file is still being written has not moved, and its worker has not been told.
    expect(store.runs.get(a.metadata.run)!.state).toBe('starting');
    expect(store.results.has(a.metadata.run)).toBe(false);
    expect(turns[0]!.stateAtAck).toBeUndefined();
    release();
    await vi.waitFor(() => expect(turns[0]!.stateAtAck).toBe('succeeded'));
    expect(store.results.get(a.metadata.run)).toMatchObject({ finalText: 'slow disk' });
  });

  it('a worker is forked only once the state changes queued before it are done and answered (a fork blocks the event loop)', async () => {
    let bAnswered = false;
    const answeredAtFork: boolean[] = [];
    const { controller, turns, store } = setup({ onStartWorker: () => answeredAtFork.push(bAnswered) });
    let releaseStarting!: () => void;
    let releaseAccepted!: () => void;
    const starting = new Promise<void>((r) => (releaseStarting = r));
    const accepted = new Promise<void>((r) => (releaseAccepted = r));
    store.holdWhen = (change) => (becomes('starting')(change) ? starting : change.runs?.some((r) => r.requestKey === 'k2') ? accepted : null);
    const a = create(controller, 'k1', '/ok/a');
    await tick();
    // Another session's acceptance joins the chain behind a's `starting` commit.
    const b = create(controller, 'k2', '/ok/b');
    void b.then(() => (bAnswered = true));
    await tick();
    releaseStarting();
    expect((await a).admission.action).toBe('started');
    await tick(20);
    expect(turns).toHaveLength(0);
    releaseAccepted();
    await b;
    await vi.waitFor(() => expect(turns.map((t) => t.spec.runId)).toContain(store.runByRequestKey('k1')!.id));
    // b's answer went out before a's fork.
    expect(answeredAtFork[0]).toBe(true);
  });

  it('workers due together are forked one per turn of the event loop, not back to back', async () => {
    const spaced: boolean[] = [];
    let previous = { ran: true };
    const { controller, turns } = setup({
      onStartWorker: () => {
        // Did a setImmediate queued at the previous fork run before this one? Only if the loop went round between them.
        spaced.push(previous.ran);
        const mark = { ran: false };
        setImmediate(() => (mark.ran = true));
        previous = mark;
      },
    });
    await Promise.all([create(controller, 'k1', '/ok/a'), create(controller, 'k2', '/ok/b'), create(controller, 'k3', '/ok/c')]);
    await vi.waitFor(() => expect(turns).toHaveLength(3));
    expect(spaced).toEqual([true, true, true]);
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

  it("a session's running turn boots the droid of its next turn once its model answers; the follow-up gets that run's id and that droid", async () => {
    const { controller, turns, prestarts } = setup({ holdExit: true, prestart: true });
    const a = await create(controller, 'k1');
    await tick(20);
    turns[0]!.options.onStarted!('droid-1', {});
    await tick(20);
    // Not beside the turn's own droid's start and first request.
    expect(prestarts).toHaveLength(0);
    turns[0]!.options.onProgress!(PARTIAL);
    turns[0]!.options.onProgress!(PARTIAL);
    await vi.waitFor(() => expect(prestarts).toHaveLength(1));
    // The launch the next turn would get with this one's settings, in folders named by the id the next run gets.
    expect(prestarts[0]!.spec).toMatchObject({ workspace: '/ok/a', autonomy: 'medium', session: { mode: 'resume', droidSessionId: 'droid-1' }, prompt: '' });
    expect(prestarts[0]!.spec.runId).not.toBe(a.metadata.run);
    const f = await controller.send({ requestKey: 'k2', session: a.metadata.session, prompt: 'next' });
    expect(f.metadata.run).toBe(prestarts[0]!.spec.runId);
    // The id goes to one run only.
    const g = await controller.send({ requestKey: 'k3', session: a.metadata.session, prompt: 'after' });
    expect(g.metadata.run).not.toBe(f.metadata.run);
    turns[0]!.finish({});
    await vi.waitFor(() => expect(turns[0]!.stateAtAck).toBe('succeeded'));
    turns[0]!.exit();
    await vi.waitFor(() => expect(turns).toHaveLength(2));
    expect(turns[1]!.spec.runId).toBe(f.metadata.run);
    expect(turns[1]!.early).toBe(prestarts[0]);
    expect(prestarts[0]!.disposed).toBe(0);
    // f's own turn boots one for g, under g's id; g's launch gets it.
    turns[1]!.options.onStarted!('droid-1', {});
    turns[1]!.options.onProgress!(PARTIAL);
    await vi.waitFor(() => expect(prestarts).toHaveLength(2));
    expect(prestarts[1]!.spec.runId).not.toBe(g.metadata.run);
    turns[1]!.finish({});
    await vi.waitFor(() => expect(turns[1]!.stateAtAck).toBe('succeeded'));
    turns[1]!.exit();
    await vi.waitFor(() => expect(turns).toHaveLength(3));
    // g was accepted before that droid existed: it starts its own, and the booted one stays for the run after g.
    expect(turns[2]!.early).toBeUndefined();
    expect(prestarts[1]!.disposed).toBe(0);
    const h = await controller.send({ requestKey: 'k4', session: a.metadata.session, prompt: 'last' });
    expect(h.metadata.run).toBe(prestarts[1]!.spec.runId);
  });

  it("a droid booted for a next turn that does not come goes once the session has been idle a while, and at shutdown; another session's turn never gets it", async () => {
    const { controller, turns, prestarts } = setup({ holdExit: true, prestart: true, nextTurnDroidIdleMs: 100 });
    await create(controller, 'k1', '/ok/a');
    await tick();
    turns[0]!.options.onStarted!('droid-1', {});
    turns[0]!.options.onProgress!(PARTIAL);
    await vi.waitFor(() => expect(prestarts).toHaveLength(1));
    // b's turn waits for the lock a holds, and gets a new id and no droid of a's.
    const b = await create(controller, 'k2', '/ok/a/sub');
    expect(b.metadata.run).not.toBe(prestarts[0]!.spec.runId);
    turns[0]!.finish({});
    await vi.waitFor(() => expect(turns[0]!.stateAtAck).toBe('succeeded'));
    await tick(150);
    // Still running (its group not gone): the droid waits.
    expect(prestarts[0]!.disposed).toBe(0);
    turns[0]!.exit();
    await vi.waitFor(() => expect(turns).toHaveLength(2));
    expect(turns[1]!.early).toBeUndefined();
    await vi.waitFor(() => expect(prestarts[0]!.disposed).toBe(1));
    // b's own: gone at shutdown.
    turns[1]!.options.onStarted!('droid-2', {});
    turns[1]!.options.onProgress!(PARTIAL);
    await vi.waitFor(() => expect(prestarts).toHaveLength(2));
    turns[1]!.finish({});
    turns[1]!.exit();
    await controller.shutdown(1_000);
    expect(prestarts[1]!.disposed).toBe(1);
  });

  it('a turn cancelled before its droid started boots none for the next turn', async () => {
    const { controller, turns, prestarts } = setup({ holdExit: true, prestart: true });
    const a = await create(controller, 'k1');
    await tick();
    await controller.cancel(a.metadata.session);
    turns[0]!.options.onStarted!('droid-1', {});
    turns[0]!.options.onProgress!(PARTIAL);
    await tick(50);
    expect(prestarts).toHaveLength(0);
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

describe('SessionController: the acceptance says what was done with the turn', () => {
  it('an idle session starts its follow-up at once, and the acceptance already shows it starting', async () => {
    const { controller, turns } = setup();
    const a = await create(controller, 'k1');
    expect(a.admission).toMatchObject({ action: 'started', waitingFor: [], capacityFull: false });
    expect(a.status.latestRun.state).toBe('starting');
    // Its worker starts once the changes queued before it are done (turn-owner.ts), a moment after the answer.
    await tick();
    turns[0]!.finish({});
    await controller.waitForSessions([a.metadata.session], 5);
    await vi.waitFor(() => expect(controller.capacity().active).toBe(0));
    const f = await controller.send({ requestKey: 'k2', session: a.metadata.session, prompt: 'next' });
    expect(f.admission.action).toBe('started');
    expect(f.status).toMatchObject({ agentState: 'working', latestRun: { run: f.metadata.run, state: 'starting' } });
    await vi.waitFor(() => expect(turns).toHaveLength(2));
  });

  it('a follow-up behind a running turn is queued behind that run', async () => {
    const { controller, turns } = setup();
    const a = await create(controller, 'k1');
    await tick();
    turns[0]!.options.onStarted!('droid-1', {});
    await tick();
    const f = await controller.send({ requestKey: 'k2', session: a.metadata.session, prompt: 'next' });
    expect(f.admission).toMatchObject({
      action: 'queued',
      waitingFor: [{ session: a.metadata.session, run: a.metadata.run, state: 'running', reason: 'same_session' }],
      capacityFull: false,
    });
    expect(f.admission.detail).toContain(a.metadata.run);
    expect(f.status.latestRun.state).toBe('queued');
  });

  it("a follow-up arriving while the previous turn's droid closes waits for it, and that worker skips the Factory title", async () => {
    const { controller, turns } = setup({ holdExit: true });
    const a = await create(controller, 'k1', '/ok/a', { title: 'Titled' });
    await tick();
    expect(turns[0]!.spec.renameTo).toBe('Titled');
    turns[0]!.finish({});
    await controller.waitForSessions([a.metadata.session], 5);
    expect(turns[0]!.renameSkipped).toBe(false);
    const f = await controller.send({ requestKey: 'k2', session: a.metadata.session, prompt: 'next' });
    expect(f.admission).toMatchObject({ action: 'queued', waitingFor: [{ run: a.metadata.run, state: 'succeeded', reason: 'same_session' }] });
    expect(f.admission.detail).toContain('closing');
    expect(turns[0]!.renameSkipped).toBe(true);
    turns[0]!.exit();
    await vi.waitFor(() => expect(turns).toHaveLength(2));
    // The title was not applied, so the follow-up carries it on (spec: retried on the next turn).
    expect(turns[1]!.spec.renameTo).toBe('Titled');
  });

  it('a follow-up accepted while the turn runs also makes it skip the title; another session does not', async () => {
    const { controller, turns } = setup();
    const a = await create(controller, 'k1', '/ok/a', { title: 'A' });
    const b = await create(controller, 'k2', '/ok/b', { title: 'B' });
    await tick();
    await controller.send({ requestKey: 'k3', session: a.metadata.session, prompt: 'next' });
    expect(turns[0]!.renameSkipped).toBe(true);
    expect(turns[1]!.renameSkipped).toBe(false);
    expect(b.admission.action).toBe('started');
  });

  it('steering says it is interrupting the live turn', async () => {
    const { controller } = setup();
    const a = await create(controller, 'k1');
    const steer = await controller.send({ requestKey: 'k2', session: a.metadata.session, prompt: 'steer', interrupt: true });
    expect(steer.admission).toMatchObject({ action: 'interrupting', waitingFor: [{ run: a.metadata.run, reason: 'same_session', state: 'cancelling' }] });
  });

  it('names a workspace lock held by another session, and full capacity', async () => {
    const { controller } = setup({ maxConcurrentRuns: 2 });
    const a = await create(controller, 'k1', '/ok/w');
    const b = await create(controller, 'k2', '/ok/w/sub');
    expect(b.admission).toMatchObject({ action: 'queued', capacityFull: false, waitingFor: [{ session: a.metadata.session, run: a.metadata.run, reason: 'workspace_lock' }] });
    await create(controller, 'k3', '/ok/x');
    const d = await create(controller, 'k4', '/ok/y');
    expect(d.admission).toMatchObject({ action: 'queued', capacityFull: true, waitingFor: [] });
    expect(d.admission.detail).toContain('all 2 run slots are busy');
  });

  it('a replay says nothing new was queued', async () => {
    const { controller } = setup();
    await create(controller, 'k1');
    const again = await create(controller, 'k1');
    expect(again.admission).toMatchObject({ action: 'replayed', waitingFor: [] });
  });
});

describe('SessionController reply-back', () => {
  const AMP = 'http://127.0.0.1:9/mcp';
  const A = 'T-11111111-2222-4333-8444-555555555555';
  const B = 'T-99999999-2222-4333-8444-555555555555';
  const send = (conversationID: string) => ({ action: 'send', params: { conversationID, message: 'progress' } });
  const read = (replyHandle: string) => ({ action: 'read_reply', params: { replyHandle } });
  const routed = (c: SessionController, key: string, replyTo: string = A, extra: object = {}) =>
    c.create({ requestKey: key, workspace: '/ok/a', prompt: `prompt ${key}`, replyTo, ...extra });
  /** Asks the live turn's gate, as the worker does for each puck permission request. */
  const gate = (turn: FakeTurn, toolUseId: string, input: unknown) => turn.options.onReplyCall!({ toolUseId, input });
  /** Reports what an approved send returned, as the worker does. */
  const sent = async (turn: FakeTurn, toolUseId: string, handle: string | null, ok = true) => {
    turn.options.onReplyEvent!({ kind: 'send_result', toolUseId, ok, handle });
    await tick(10);
  };

  it('refuses a route when reply-back is off, or a conversation id of the wrong shape, recording nothing', async () => {
    const off = setup();
    await expect(routed(off.controller, 'k1')).rejects.toMatchObject({ code: 'reply_back_unavailable' });
    const on = setup({ ampMcpUrl: AMP });
    await expect(routed(on.controller, 'k1', 'T-1')).rejects.toMatchObject({ code: 'invalid_arguments' });
    const a = await create(on.controller, 'k2');
    await tick();
    const commits = on.store.commits;
    await expect(off.controller.send({ requestKey: 'x', session: a.metadata.session, prompt: 'p' })).rejects.toMatchObject({ code: 'session_not_found' });
    await expect(on.controller.send({ requestKey: 'k3', session: a.metadata.session, prompt: 'p', replyTo: 'nope' })).rejects.toMatchObject({ code: 'invalid_arguments' });
    expect(on.store.commits).toBe(commits);
    expect(off.store.commits).toBe(0);
  });

  it('a routed turn gets the Amp server and the coordination instructions; nothing about them is stored', async () => {
    const { controller, turns, store } = setup({ ampMcpUrl: AMP });
    const a = await routed(controller, 'k1');
    expect(a.status).toMatchObject({ replyTo: A, notification: 'pending', notificationError: null });
    await tick();
    const spec = turns[0]!.spec;
    expect(spec.replyBack).toEqual({ url: AMP, replyTo: A });
    expect(spec.autonomy).toBe('medium'); // the caller's level; the worker maps high to droid medium
    expect(spec.prompt.endsWith('prompt k1')).toBe(true);
    for (const part of [A, a.metadata.session, a.metadata.run, 'CHECKPOINT']) expect(spec.prompt).toContain(part);
    const stored = JSON.stringify([...store.runs.values(), ...store.sessions.values()]);
    expect(stored).not.toContain('CHECKPOINT');
    expect(stored).not.toContain('prompt k1');
    turns[0]!.finish({});
    await controller.waitForSessions([a.metadata.session], 5);
    expect(controller.status(a.metadata.session)).toMatchObject({ notification: 'not_sent', needsAttention: false });
  });

  it('a detached turn gets neither, and reads disabled', async () => {
    const { controller, turns } = setup({ ampMcpUrl: AMP });
    const a = await create(controller, 'k1');
    await tick();
    expect(turns[0]!.spec).not.toHaveProperty('replyBack');
    expect(turns[0]!.spec.prompt).toBe('prompt k1');
    expect(a.status.notification).toBe('disabled');
  });

  it('approves a send to replyTo, records its handle durably, and accepts read_reply with it only', async () => {
    const { controller, turns, store } = setup({ ampMcpUrl: AMP });
    const a = await routed(controller, 'k1');
    await tick();
    const t = turns[0]!;
    expect(await gate(t, 'call_1', send(A))).toBe(true);
    await sent(t, 'call_1', 'rh-1');
    expect(store.runs.get(a.metadata.run)!.reply).toMatchObject({ accepted: 1, handles: [{ handle: 'rh-1' }], failure: null });
    expect(controller.status(a.metadata.session).notification).toBe('accepted');
    expect(await gate(t, 'call_2', read('rh-1'))).toBe(true);
    expect(await gate(t, 'call_3', read('rh-foreign'))).toBe(false);
    expect(await gate(t, 'call_4', { action: 'read_reply', params: {} })).toBe(false);
    expect(await gate(t, 'call_5', { action: 'latest', params: {} })).toBe(false);
    t.finish({});
    await controller.waitForSessions([a.metadata.session], 5);
    expect(controller.status(a.metadata.session)).toMatchObject({ notification: 'accepted', needsAttention: false, latestRun: { state: 'succeeded' } });
  });

  it('a result nobody approved proves nothing, and one approval proves one result', async () => {
    const { controller, turns, store } = setup({ ampMcpUrl: AMP });
    const a = await routed(controller, 'k1');
    await tick();
    const t = turns[0]!;
    await sent(t, 'call_never_approved', 'rh-forged');
    expect(await gate(t, 'call_1', read('rh-forged'))).toBe(false);
    expect(await gate(t, 'call_2', send(A))).toBe(true);
    await sent(t, 'call_2', 'rh-1');
    await sent(t, 'call_2', 'rh-replayed');
    expect(store.runs.get(a.metadata.run)!.reply!.handles.map((h) => h.handle)).toEqual(['rh-1']);
  });

  it('denies a misroute before droid runs it, records reply_misrouted, and never fails the run for it', async () => {
    const { controller, turns, store } = setup({ ampMcpUrl: AMP });
    const a = await routed(controller, 'k1', A, { autonomy: 'high' });
    await tick();
    expect(await gate(turns[0]!, 'call_1', send(B))).toBe(false);
    expect(store.runs.get(a.metadata.run)!.reply!.failure).toMatchObject({ code: 'reply_misrouted' });
    expect(controller.status(a.metadata.session)).toMatchObject({ notification: 'failed', notificationError: { code: 'reply_misrouted' } });
    // A later good send does not hide the misroute.
    expect(await gate(turns[0]!, 'call_2', send(A))).toBe(true);
    await sent(turns[0]!, 'call_2', 'rh-1');
    turns[0]!.finish({});
    await controller.waitForSessions([a.metadata.session], 5);
    expect(controller.status(a.metadata.session)).toMatchObject({ notification: 'failed', needsAttention: true, latestRun: { state: 'succeeded' } });
  });

  it('an errored send and an Amp tool run unasked both read failed', async () => {
    const { controller, turns } = setup({ ampMcpUrl: AMP });
    const a = await routed(controller, 'k1');
    const b = await routed(controller, 'k2', B, { workspace: '/ok/b' });
    await tick();
    expect(await gate(turns[0]!, 'call_1', send(A))).toBe(true);
    await sent(turns[0]!, 'call_1', null, false);
    expect(controller.status(a.metadata.session)).toMatchObject({ notification: 'failed', notificationError: { code: 'reply_send_failed' } });
    turns[1]!.options.onReplyEvent!({ kind: 'bypass', tool: 'amp-puck___puck', toolUseId: 'call_9' });
    await tick(10);
    expect(controller.status(b.metadata.session)).toMatchObject({ notification: 'failed', notificationError: { code: 'reply_gate_bypassed' } });
  });

  it('handles survive a follow-up and a controller restart on the same route', async () => {
    const first = setup({ ampMcpUrl: AMP });
    const a = await routed(first.controller, 'k1');
    await tick();
    expect(await gate(first.turns[0]!, 'call_1', send(A))).toBe(true);
    await sent(first.turns[0]!, 'call_1', 'rh-1');
    first.turns[0]!.finish({});
    await first.controller.waitForSessions([a.metadata.session], 5);
    await first.controller.send({ requestKey: 'k2', session: a.metadata.session, prompt: 'next' });
    await tick(20);
    expect(await gate(first.turns[1]!, 'call_2', read('rh-1'))).toBe(true);
    first.turns[1]!.finish({});
    await first.controller.waitForSessions([a.metadata.session], 5);
    await first.controller.shutdown(1_000);

    const second = setup({ ampMcpUrl: AMP, store: first.store });
    await second.controller.send({ requestKey: 'k3', session: a.metadata.session, prompt: 'after restart' });
    await tick(20);
    expect(await gate(second.turns[0]!, 'call_3', read('rh-1'))).toBe(true);
    expect(await gate(second.turns[0]!, 'call_4', send(A))).toBe(true);
  });

  it('a retarget starts a new route: old handles die at once, even for the live turn and even if the retarget is cancelled', async () => {
    const { controller, turns, store } = setup({ ampMcpUrl: AMP });
    const a = await routed(controller, 'k1');
    await tick();
    const live = turns[0]!;
    expect(await gate(live, 'call_1', send(A))).toBe(true);
    await sent(live, 'call_1', 'rh-1');
    expect(await gate(live, 'call_2', read('rh-1'))).toBe(true);
    const retarget = await controller.send({ requestKey: 'k2', session: a.metadata.session, prompt: 'now report to B', replyTo: B });
    expect(retarget.status.replyTo).toBe(B);
    const route = store.sessions.get(a.metadata.session)!.replyRouteId;
    // The live turn is still under the old route: its handle and old recipient are gone.
    expect(await gate(live, 'call_3', read('rh-1'))).toBe(false);
    expect(await gate(live, 'call_4', send(A))).toBe(false);
    expect(await gate(live, 'call_5', send(B))).toBe(true);
    await controller.cancel(a.metadata.session);
    live.finish({ outcome: 'interrupted', reason: 'cancelled' });
    await controller.waitForSessions([a.metadata.session], 5);
    expect(store.runs.get(retarget.metadata.run)!.state).toBe('cancelled');
    // Routing back to A later is a third route: rh-1 stays dead.
    await controller.send({ requestKey: 'k3', session: a.metadata.session, prompt: 'back to A', replyTo: A });
    await tick(20);
    const next = turns[1]!;
    expect(store.sessions.get(a.metadata.session)!.replyRouteId).not.toBe(route);
    expect(next.spec.replyBack).toEqual({ url: AMP, replyTo: A });
    expect(await gate(next, 'call_6', read('rh-1'))).toBe(false);
  });

  it('detaching stops routing: the next turn is detached and reads disabled', async () => {
    const { controller, turns, store } = setup({ ampMcpUrl: AMP });
    const a = await routed(controller, 'k1');
    await tick();
    turns[0]!.finish({});
    await controller.waitForSessions([a.metadata.session], 5);
    const d = await controller.send({ requestKey: 'k2', session: a.metadata.session, prompt: 'detached now', replyTo: null });
    expect(d.status).toMatchObject({ replyTo: null, notification: 'disabled' });
    expect(store.sessions.get(a.metadata.session)!.replyRouteId).toBeUndefined();
    await tick(20);
    expect(turns[1]!.spec).not.toHaveProperty('replyBack');
    expect(await gate(turns[1]!, 'call_1', send(A))).toBe(false);
  });

  it('the route is part of the request key: omitted, repeated and new recipients are different requests', async () => {
    const { controller } = setup({ ampMcpUrl: AMP });
    const a = await routed(controller, 'k1');
    expect((await routed(controller, 'k1')).metadata.replayed).toBe(true);
    await expect(routed(controller, 'k1', B)).rejects.toMatchObject({ code: 'request_key_conflict' });
    await expect(create(controller, 'k1')).rejects.toMatchObject({ code: 'request_key_conflict' });
    const session = a.metadata.session;
    await controller.send({ requestKey: 'k2', session, prompt: 'p', replyTo: B });
    expect((await controller.send({ requestKey: 'k2', session, prompt: 'p', replyTo: B })).metadata.replayed).toBe(true);
    await expect(controller.send({ requestKey: 'k2', session, prompt: 'p' })).rejects.toMatchObject({ code: 'request_key_conflict' });
    await controller.send({ requestKey: 'k3', session, prompt: 'p' });
    // A replay of an omitted replyTo still replays after the route changed since.
    await controller.send({ requestKey: 'k4', session, prompt: 'p', replyTo: A });
    expect((await controller.send({ requestKey: 'k3', session, prompt: 'p' })).metadata.replayed).toBe(true);
  });

  it('approves nothing once the controller is stopping', async () => {
    const { controller, turns } = setup({ ampMcpUrl: AMP });
    await routed(controller, 'k1');
    await tick();
    expect(await gate(turns[0]!, 'call_1', send(A))).toBe(true);
    const stopping = controller.shutdown(1_000);
    expect(await gate(turns[0]!, 'call_2', send(A))).toBe(false);
    turns[0]!.finish({ outcome: 'interrupted', reason: 'cancelled' });
    await stopping;
  });

  it('a routed session whose host no longer offers reply-back fails its turn unsubmitted', async () => {
    const first = setup({ ampMcpUrl: AMP });
    const a = await routed(first.controller, 'k1');
    await tick();
    first.turns[0]!.finish({});
    await first.controller.waitForSessions([a.metadata.session], 5);
    await first.controller.shutdown(1_000);
    const second = setup({ store: first.store });
    // Omitted replyTo keeps the route, which this host can no longer serve: refused up front.
    await expect(second.controller.send({ requestKey: 'k2', session: a.metadata.session, prompt: 'p' })).rejects.toMatchObject({ code: 'reply_back_unavailable' });
    const d = await second.controller.send({ requestKey: 'k3', session: a.metadata.session, prompt: 'p', replyTo: null });
    await second.controller.waitForSessions([a.metadata.session], 5);
    expect(second.store.runs.get(d.metadata.run)!.reply).toBeUndefined();
  });
});

describe('SessionController sandbox', () => {
  it('a sandbox that cannot run fails every turn sandbox_unavailable and starts no worker (never an unconfined droid)', async () => {
    const { controller, turns, store } = setup({ sandboxUnavailable: 'no bwrap executable was found on PATH' });
    const a = await create(controller, 'k1');
    await controller.waitForSessions([a.metadata.session], 5);
    expect(turns).toEqual([]);
    expect(store.runs.get(a.metadata.run)).toMatchObject({
      state: 'failed',
      needsAttention: true,
      error: { code: 'sandbox_unavailable', retryable: false, message: expect.stringContaining('no bwrap executable was found on PATH') },
    });
    expect(controller.capacity().active).toBe(0);
  });
});
