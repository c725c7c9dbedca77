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
});
