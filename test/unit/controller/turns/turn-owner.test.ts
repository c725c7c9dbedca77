/**
 * The controller's orchestration with its effects replaced: an in-memory
 * store and scripted workers. (The real store, workers and droid are covered
 * by the store, wire and end-to-end tiers.)
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it, vi } from 'vitest';
import type { CatalogModel } from '../../../../src/droid/client.js';
import type { RunRecord } from '../../../../src/shared/records.js';
import { create, PARTIAL, setup, tick } from '../harness.js';

/** A run record becoming `state` is in this change. */
const becomes = (state: string) => (change: { runs?: RunRecord[] }) => (change.runs ?? []).some((r) => r.state === state);

describe('SessionController: one owner per turn, commit before memory', () => {
  it('a commit tells listeners only once memory follows it: the cancelled turn has left the line, the started one is no longer in it', async () => {
    const { controller, turns } = setup({ maxConcurrentRuns: 1 });
    const a = await create(controller, 'k1');
    await tick();
    await controller.send({ requestKey: 'k2', session: a.metadata.session, prompt: 'queued behind a' });
    expect(controller.capacity()).toMatchObject({ active: 1, queued: 1 });
    const seen: Array<{ active: number; queued: number }> = [];
    const stop = controller.onChange(() => seen.push(controller.capacity()));
    await controller.cancel(a.metadata.session);
    // The first change heard after the cancel's commit already shows the queued turn gone.
    expect(seen[0]).toMatchObject({ queued: 0 });
    turns[0]!.finish({ stop: { kind: 'interrupted', by: 'cancel', end: 'cancelled' } });
    const b = await create(controller, 'k3', '/ok/b');
    seen.length = 0;
    await vi.waitFor(() => expect(turns).toHaveLength(2));
    // Every change heard once b committed `starting` shows it holding its claim, none as still queued.
    expect(seen.length).toBeGreaterThan(0);
    for (const c of seen) expect(c).toEqual(expect.objectContaining({ queued: 0 }));
    stop();
    turns[1]!.finish({});
    expect(b.metadata.run).toBe(turns[1]!.spec.runId);
  });

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
    turns[0]!.finish({ stop: { kind: 'interrupted', by: 'cancel', end: null, killed: 'killed' } });
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

  it("a slow model catalog does not hold up another session's cancel or result", async () => {
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
    turns[0]!.finish({ stop: { kind: 'ended', end: 'cancelled' } });
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
    expect(controller.status(a.metadata.session)).toMatchObject({
      agentState: 'unknown',
      needsAttention: true,
      latestRun: { state: 'cancelled', cancelReason: 'queue_lost' },
    });
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
    await expect(
      Promise.race([controller.cancel((b as { metadata: { session: string } }).metadata.session), sleep(5_000).then(() => 'held up')]),
    ).resolves.not.toBe('held up');
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

  it('a droid booted for a next turn stays while the acceptance that took its id is being committed, and that run gets it', async () => {
    const { controller, store, turns, prestarts } = setup({ holdExit: true, prestart: true, nextTurnDroidIdleMs: 30 });
    const a = await create(controller, 'k1');
    await tick();
    turns[0]!.options.onStarted!('droid-1', {});
    turns[0]!.options.onProgress!(PARTIAL);
    await vi.waitFor(() => expect(prestarts).toHaveLength(1));
    const booted = prestarts[0]!;
    turns[0]!.finish({});
    await vi.waitFor(() => expect(turns[0]!.stateAtAck).toBe('succeeded'));
    turns[0]!.exit();
    // The follow-up's records reach the disk slowly: the session's idle clock runs out meanwhile.
    let write!: () => void;
    const written = new Promise<void>((r) => (write = r));
    store.holdWhen = (change) => (change.runs?.some((r) => r.id === booted.spec.runId && r.state === 'queued') ? written : null);
    const sent = controller.send({ requestKey: 'k2', session: a.metadata.session, prompt: 'next' });
    await sleep(100);
    expect(booted.disposed).toBe(0);
    write();
    const f = await sent;
    expect(f.metadata.run).toBe(booted.spec.runId);
    await vi.waitFor(() => expect(turns).toHaveLength(2));
    expect(turns[1]!.early).toBe(booted);
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
