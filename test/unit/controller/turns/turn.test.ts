/**
 * A turn's phase moves only along its diagram (src/controller/turns/turn.ts): the
 * legal paths work, and every other move throws a programming error.
 */
import { describe, expect, it } from 'vitest';
import { Turn } from '../../../../src/controller/turns/turn.js';
import type { WorkerHandle } from '../../../../src/worker/parent/runner.js';
import type { TurnResult } from '../../../../src/worker/contract/protocol.js';

function worker() {
  const calls = { cancel: 0, acknowledge: 0, skipRename: 0 };
  const handle: WorkerHandle = {
    pid: 0,
    result: new Promise<TurnResult>(() => {}),
    cleanedUp: Promise.resolve(),
    cancel: () => void calls.cancel++,
    acknowledge: () => void calls.acknowledge++,
    skipRename: () => void calls.skipRename++,
  };
  return { handle, calls };
}

const turn = () => new Turn('run-1', { sessionId: 's-1', workspace: '/ok/a', writer: true }, 'the prompt', null);
const settled = async (p: Promise<void>) => (await Promise.race([p.then(() => true), new Promise((r) => setImmediate(() => r(false)))])) as boolean;

describe('Turn', () => {
  it('queued → admitted → starting → live → ended → released, holding the claim from admit to release', async () => {
    const t = turn();
    const { handle, calls } = worker();
    expect([t.inLine(), t.holdsClaim()]).toEqual([true, false]);
    t.admit();
    expect([t.inLine(), t.holdsClaim()]).toEqual([false, true]);
    expect(await settled(t.launched)).toBe(false);
    t.start();
    expect(await settled(t.launched)).toBe(true);
    t.attach(handle);
    expect(calls.acknowledge).toBe(0);
    t.end();
    // The worker hears its result is durable only when the turn ends.
    expect(calls.acknowledge).toBe(1);
    expect(t.holdsClaim()).toBe(true);
    t.release();
    expect([t.inLine(), t.holdsClaim()]).toEqual([false, false]);
  });

  it('a failed start goes back in line and waits out a growing delay; a stop-time requeue adds none', async () => {
    const t = turn();
    t.admit();
    t.requeue(1_000);
    expect(await settled(t.launched)).toBe(true);
    expect([t.inLine(), t.retryAt]).toEqual([true, 2_000]);
    t.admit();
    t.requeue(5_000);
    expect(t.retryAt).toBe(7_000);
    t.admit();
    t.requeue();
    expect(t.retryAt).toBe(7_000);
    t.admit();
    t.start();
  });

  it('ends without a worker when refused before start, and is dropped from the line holding nothing', () => {
    const refused = turn();
    refused.admit();
    refused.end();
    refused.release();
    const dropped = turn();
    dropped.drop();
    expect(dropped.holdsClaim()).toBe(false);
  });

  it('a cancel that came while launching reaches the worker when it is attached', () => {
    const t = turn();
    const { handle, calls } = worker();
    t.requestStop();
    t.skipRename();
    t.admit();
    t.start();
    t.attach(handle);
    expect(calls).toMatchObject({ cancel: 1, skipRename: 1 });
    expect(t.cancelRequested).toBe(true);
  });

  it('every other move throws', () => {
    const illegal: Array<[string, (t: Turn) => void]> = [
      ['start while queued', (t) => t.start()],
      ['end while queued', (t) => t.end()],
      ['release while queued', (t) => t.release()],
      ['requeue while queued', (t) => t.requeue()],
      ['attach while admitted', (t) => (t.admit(), t.attach(worker().handle))],
      ['admit twice', (t) => (t.admit(), t.admit())],
      ['drop an admitted turn', (t) => (t.admit(), t.drop())],
      ['start twice', (t) => (t.admit(), t.start(), t.start())],
      ['requeue once starting', (t) => (t.admit(), t.start(), t.requeue())],
      ['attach twice', (t) => (t.admit(), t.start(), t.attach(worker().handle), t.attach(worker().handle))],
      ['end twice', (t) => (t.admit(), t.start(), t.end(), t.end())],
      ['release twice', (t) => (t.admit(), t.release(), t.release())],
      ['admit once released', (t) => (t.drop(), t.admit())],
    ];
    for (const [what, move] of illegal) expect(() => move(turn()), what).toThrow(/^internal: turn run-1 cannot /);
  });
});
