import { describe, expect, it } from 'vitest';
import { NextTurnDroids } from '../../../../src/controller/turns/next-turn-droids.js';
import type { Prestart } from '../../../../src/worker/parent/prestart.js';

function fakeDroid(): Prestart & { disposed: number } {
  const droid = { disposed: 0, worker: {} as Prestart['worker'], confined: {} as Prestart['confined'], dispose: async () => void droid.disposed++ };
  return droid;
}

const now = async () => true;

/** A moment the test lets come by hand; the ids booted for, and the droid each boot gives. */
function heldMoment(droid: Prestart | null = fakeDroid()) {
  let come!: (wanted: boolean) => void;
  const booted: string[] = [];
  const ready = () => new Promise<boolean>((resolve) => (come = resolve));
  const boot = (runId: string) => (booted.push(runId), droid);
  return { ready, boot, booted, come: (wanted = true) => come(wanted) };
}

describe('the droid booted for a session’s next turn', () => {
  it('is booted once per session, under the id its next acceptance gets, and that id is given once', async () => {
    const droids = new NextTurnDroids(60_000, 4, () => false);
    const droid = fakeDroid();
    const ids: string[] = [];
    await droids.prepare('s1', now, (runId) => (ids.push(runId), droid));
    await droids.prepare('s1', now, (runId) => (ids.push(runId), fakeDroid()));
    expect(ids).toHaveLength(1);
    expect(droids.runIdFor('s2')).not.toBe(ids[0]);
    expect(droids.runIdFor('s1')).toBe(ids[0]);
    expect(droids.runIdFor('s1')).not.toBe(ids[0]);
    // Another run of the session launching first leaves it for its own.
    expect(droids.take('s1', 'another')).toBeNull();
    expect(droids.take('s1', ids[0]!)).toBe(droid);
    expect(droids.take('s1', ids[0]!)).toBeNull();
    expect(droid.disposed).toBe(0);
    expect(droids.size).toBe(0);
  });

  it('its run launching before the moment to boot it came gets none, and none is booted: that run makes its own folders under the id', async () => {
    const droids = new NextTurnDroids(60_000, 4, () => false);
    const moment = heldMoment();
    const prepared = droids.prepare('s1', moment.ready, moment.boot);
    const id = droids.runIdFor('s1');
    expect(droids.take('s1', id)).toBeNull();
    moment.come();
    await prepared;
    expect(moment.booted).toEqual([]);
    expect(droids.size).toBe(0);
  });

  it('one no longer wanted when its moment comes is not booted', async () => {
    const droids = new NextTurnDroids(60_000, 4, () => false);
    const moment = heldMoment();
    const prepared = droids.prepare('s1', moment.ready, moment.boot);
    moment.come(false);
    await prepared;
    expect(moment.booted).toEqual([]);
    expect(droids.size).toBe(0);
  });

  it('one that could not boot leaves room for the next try', async () => {
    const droids = new NextTurnDroids(60_000, 4, () => false);
    await droids.prepare('s1', now, () => null);
    expect(droids.size).toBe(0);
    await droids
      .prepare('s1', now, () => {
        throw new Error('fork failed');
      })
      .catch(() => undefined);
    expect(droids.size).toBe(0);
    await droids.prepare('s1', now, () => fakeDroid());
    expect(droids.size).toBe(1);
  });

  it('goes once its session has been idle for the budget, and a launch of the session stops that clock', async () => {
    const droids = new NextTurnDroids(50, 4, () => false);
    const kept = fakeDroid();
    await droids.prepare('s1', now, () => kept);
    droids.idle('s1');
    // A turn of the session launched (not the one it was booted for): no clock while it runs.
    droids.take('s1', 'another');
    await new Promise((r) => setTimeout(r, 100));
    expect(kept.disposed).toBe(0);
    droids.idle('s1');
    await new Promise((r) => setTimeout(r, 100));
    expect(kept.disposed).toBe(1);
    expect(droids.size).toBe(0);
  });

  it('at shutdown every one goes, one waiting for its moment is never booted, and none is booted after', async () => {
    const droids = new NextTurnDroids(60_000, 4, () => false);
    const booted = fakeDroid();
    await droids.prepare('s1', now, () => booted);
    const moment = heldMoment();
    const prepared = droids.prepare('s2', moment.ready, moment.boot);
    await droids.stop();
    moment.come();
    await prepared;
    expect(booted.disposed).toBe(1);
    expect(moment.booted).toEqual([]);
    const never: string[] = [];
    await droids.prepare('s3', now, (runId) => (never.push(runId), fakeDroid()));
    expect(never).toEqual([]);
  });

  it('keeps at most `max`: a new one replaces the one idle longest, and none is booted while every one belongs to a running session', async () => {
    const droids = new NextTurnDroids(60_000, 2, () => false);
    const [a, b] = [fakeDroid(), fakeDroid()];
    await droids.prepare('a', now, () => a);
    await droids.prepare('b', now, () => b);
    const refused: string[] = [];
    await droids.prepare('c', now, (runId) => (refused.push(runId), fakeDroid()));
    expect(refused).toEqual([]);
    droids.idle('b');
    droids.idle('a');
    const c = fakeDroid();
    await droids.prepare('c', now, () => c);
    expect([a.disposed, b.disposed, c.disposed]).toEqual([0, 1, 0]);
    expect(droids.size).toBe(2);
    await droids.stop();
  });

  it('never goes while the run given its id waits to launch (its folders are that run’s), and goes once that run has ended without it', async () => {
    const waiting = new Set<string>();
    const droids = new NextTurnDroids(50, 1, (runId) => waiting.has(runId));
    const kept = fakeDroid();
    await droids.prepare('s1', now, () => kept);
    const id = droids.runIdFor('s1');
    waiting.add(id);
    droids.idle('s1');
    await new Promise((r) => setTimeout(r, 120));
    // Neither the clock nor a newer session's droid takes it.
    await droids.prepare('s2', now, () => fakeDroid());
    expect(kept.disposed).toBe(0);
    expect(droids.size).toBe(1);
    // Its run was dropped while in line: it goes at the next look.
    waiting.delete(id);
    await new Promise((r) => setTimeout(r, 120));
    expect(kept.disposed).toBe(1);
    await droids.stop();
  });
});
