/**
 * The controller's orchestration with its effects replaced: an in-memory
 * store and scripted workers. (The real store, workers and droid are covered
 * by the store, wire and end-to-end tiers.)
 */
import { describe, expect, it } from 'vitest';
import { SessionController } from '../../../../src/controller/controller.js';
import { create, setup, tick, type FakeTurn } from '../harness.js';

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
    await expect(on.controller.send({ requestKey: 'k3', session: a.metadata.session, prompt: 'p', replyTo: 'nope' })).rejects.toMatchObject({
      code: 'invalid_arguments',
    });
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
    live.finish({ stop: { kind: 'ended', end: 'cancelled' } });
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
    turns[0]!.finish({ stop: { kind: 'ended', end: 'cancelled' } });
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
    await expect(second.controller.send({ requestKey: 'k2', session: a.metadata.session, prompt: 'p' })).rejects.toMatchObject({
      code: 'reply_back_unavailable',
    });
    const d = await second.controller.send({ requestKey: 'k3', session: a.metadata.session, prompt: 'p', replyTo: null });
    await second.controller.waitForSessions([a.metadata.session], 5);
    expect(second.store.runs.get(d.metadata.run)!.reply).toBeUndefined();
  });
});
