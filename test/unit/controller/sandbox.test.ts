/**
 * The controller's orchestration with its effects replaced: an in-memory
 * store and scripted workers. (The real store, workers and droid are covered
 * by the store, wire and end-to-end tiers.)
 */
import { describe, expect, it } from 'vitest';
import { create, setup } from './harness.js';

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

  it('a model-only session never runs on a host since set to "sandbox": "off": its turn fails network_unavailable and starts no worker', async () => {
    const first = setup();
    const a = await create(first.controller, 'k1');
    await first.controller.waitForSessions([a.metadata.session], 5);
    await first.controller.shutdown(1_000);
    // Created model-only while the host confined its turns (a sandbox-off host refuses that at acceptance).
    const record = first.store.sessions.get(a.metadata.session)!;
    first.store.sessions.set(a.metadata.session, { ...record, network: 'model-only' });
    const second = setup({ store: first.store });
    const f = await second.controller.send({ requestKey: 'k2', session: a.metadata.session, prompt: 'next' });
    await second.controller.waitForSessions([a.metadata.session], 5);
    expect(second.turns).toEqual([]);
    expect(first.store.runs.get(f.metadata.run)).toMatchObject({ state: 'failed', error: { code: 'network_unavailable', retryable: false } });
  });
});
