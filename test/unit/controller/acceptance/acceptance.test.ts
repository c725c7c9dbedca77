/**
 * The controller's orchestration with its effects replaced: an in-memory
 * store and scripted workers. (The real store, workers and droid are covered
 * by the store, wire and end-to-end tiers.)
 */
import { describe, expect, it, vi } from 'vitest';
import { create, setup, tick } from '../harness.js';

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
    expect(b.admission).toMatchObject({
      action: 'queued',
      capacityFull: false,
      waitingFor: [{ session: a.metadata.session, run: a.metadata.run, reason: 'workspace_lock' }],
    });
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
