/**
 * The controller's orchestration with its effects replaced: an in-memory
 * store and scripted workers. (The real store, workers and droid are covered
 * by the store, wire and end-to-end tiers.)
 */
import { describe, expect, it, vi } from 'vitest';
import { create, setup, tick } from './harness.js';

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
    turns[0]!.finish({ stop: { kind: 'ended', end: 'cancelled' } });
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
    turns[0]!.finish({ stop: { kind: 'ended', end: 'cancelled' } });
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
    turns[0]!.finish({ stop: { kind: 'failed', end: null, error: { code: 'droid_exited', message: 'gone', retryable: true } } });
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
    await expect(controller.send({ requestKey: 's9', session: a.metadata.session, prompt: 'p9' })).rejects.toMatchObject({
      code: 'queue_full',
      retryable: true,
    });
  });

  it('rejects unknown sessions, reply-back and unapproved workspaces with public errors', async () => {
    const { controller, store } = setup();
    expect(() => controller.status('nope')).toThrow(expect.objectContaining({ code: 'session_not_found' }));
    await expect(
      controller.create({ requestKey: 'r', workspace: '/ok/a', prompt: 'p', replyTo: 'T-11111111-2222-4333-8444-555555555555' }),
    ).rejects.toMatchObject({ code: 'reply_back_unavailable' });
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
      const keys = (change.runs ?? [])
        .filter((r) => r.state === 'queued')
        .map((r) => r.requestKey!)
        .sort();
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
