import { describe, expect, it } from 'vitest';
import type { CatalogModel } from '../../../../src/droid/client.js';
import { ModelCatalog, visibleModels, type CatalogEvent, type CatalogTimers } from '../../../../src/controller/catalog/model-catalog.js';

const model = (id: string, extra: Partial<CatalogModel> = {}): CatalogModel => ({ id, displayName: id, ...extra });
const ids = (models: readonly CatalogModel[]) => models.map((m) => m.id);
const TTL = 1_000;

describe('visibleModels', () => {
  it('hides disabled, deprecated, dated and excluded models', () => {
    const all = [model('a'), model('b', { disabled: true }), model('c', { deprecated: true }), model('d', { deprecationDate: '2030-01-01' }), model('e')];
    expect(visibleModels(all, ['e']).map((m) => m.id)).toEqual(['a']);
  });
});

/** Settles every promise the catalog chains (the fetcher's, the read's finally). */
const flush = () => new Promise<void>((resolve) => setImmediate(resolve));

/** A clock and timers the test moves by hand: `advance` fires each timer that falls due, at its time. */
function fakeTime() {
  let now = 0;
  let nextId = 0;
  const pending = new Map<number, { fn: () => void; at: number }>();
  const timers: CatalogTimers = {
    start(fn, ms) {
      pending.set(++nextId, { fn, at: now + ms });
      return nextId;
    },
    stop: (handle) => void pending.delete(handle as number),
  };
  return {
    now: () => now,
    timers,
    pending: () => pending.size,
    async advance(ms: number) {
      const end = now + ms;
      for (;;) {
        const due = [...pending].filter(([, t]) => t.at <= end).sort((a, b) => a[1].at - b[1].at)[0];
        if (!due) break;
        pending.delete(due[0]);
        now = due[1].at;
        due[1].fn();
        await flush();
      }
      now = end;
      await flush();
    },
  };
}

/** A catalog over a fake droid: each read answers `list(n)` for read n, or fails; reads can be held open. */
function setup(list: (n: number) => CatalogModel[] = (n) => [model(`m${n}`)]) {
  const time = fakeTime();
  const reads: number[] = [];
  const backgrounds: Array<boolean | undefined> = [];
  const events: CatalogEvent[] = [];
  let fail = false;
  let held: Array<() => void> | null = null;
  const catalog = new ModelCatalog({
    fetcher: async (background) => {
      reads.push(time.now());
      backgrounds.push(background);
      const n = reads.length;
      if (held) await new Promise<void>((resolve) => held!.push(resolve));
      if (fail) throw new Error('droid exploded at /secret/path');
      return list(n);
    },
    ttlMs: TTL,
    excludeIds: [],
    onEvent: (e) => events.push(e),
    now: time.now,
    timers: time.timers,
  });
  return {
    catalog,
    time,
    events,
    reads: () => reads.length,
    readAt: () => [...reads],
    backgrounds: () => [...backgrounds],
    fail: (v: boolean) => (fail = v),
    hold: () => (held = []),
    release: () => {
      const waiting = held ?? [];
      held = null;
      for (const go of waiting) go();
    },
  };
}

describe('ModelCatalog', () => {
  it('serves the cache within the TTL', async () => {
    const t = setup();
    expect(ids(await t.catalog.models())).toEqual(['m1']);
    await t.time.advance(500);
    expect(ids(await t.catalog.models())).toEqual(['m1']);
    expect(t.reads()).toBe(1);
  });

  it('reads ahead before the TTL ends, so a caller after a long pause finds it fresh and starts no read', async () => {
    const t = setup();
    await t.catalog.models();
    await t.time.advance(799);
    expect(t.reads()).toBe(1);
    await t.time.advance(1);
    // At 80 % of the TTL, in the background.
    expect(t.readAt()).toEqual([0, 800]);
    // A pause of 7 TTLs with nobody asking.
    await t.time.advance(7 * TTL);
    const before = t.reads();
    expect(before).toBeGreaterThan(2);
    t.hold(); // a caller that started a read would wait here
    const models = await t.catalog.models();
    expect(t.reads()).toBe(before);
    expect(ids(models)).toEqual([`m${before}`]);
    t.release();
    expect(t.events.filter((e) => e.kind === 'read' && e.background)).toHaveLength(before - 1);
    // The fetcher is told which reads nobody waits for (their droid runs at a lower CPU priority).
    expect(t.backgrounds()).toEqual([false, ...Array(before - 1).fill(true)]);
  });

  it("a turn's list keeps the catalog fresh without a read", async () => {
    const t = setup(() => [model('a'), model('b')]);
    await t.catalog.models();
    await t.time.advance(500);
    t.catalog.offer([model('a', { displayName: 'A, newer' }), model('b')], 500);
    // Past the read's TTL, inside the offered list's: served from the turn's answer, no droid read.
    await t.time.advance(700);
    const models = await t.catalog.models();
    expect(models.map((m) => m.displayName)).toEqual(['A, newer', 'b']);
    expect(t.reads()).toBe(1);
    // The read ahead counts from the turn's answer (500 + 800), not from the read.
    await t.time.advance(99);
    expect(t.reads()).toBe(1);
    await t.time.advance(1);
    expect(t.readAt()).toEqual([0, 1_300]);
  });

  it("of a turn's list only models the last read reported enabled are used; an empty or useless list replaces nothing", async () => {
    const t = setup(() => [model('a'), model('b', { disabled: true }), model('c')]);
    expect(ids(await t.catalog.models())).toEqual(['a', 'c']);
    await t.time.advance(100);
    // The list has no disabled flag: b stays hidden; c is gone from it, so it goes.
    t.catalog.offer([model('a'), model('b')], 100);
    expect(ids(await t.catalog.models())).toEqual(['a']);
    await t.time.advance(100);
    t.catalog.offer([], 200);
    t.catalog.offer([model('b')], 200);
    expect(ids(await t.catalog.models())).toEqual(['a']);
    expect(t.events.filter((e) => e.kind === 'offer_ignored')).toHaveLength(2);
    // An answer older than the catalog changes nothing.
    t.catalog.offer([model('a'), model('c')], 50);
    expect(ids(await t.catalog.models())).toEqual(['a']);
    expect(t.reads()).toBe(1);
  });

  it('a model no read has listed is read for once, in the background', async () => {
    const t = setup((n) => (n === 1 ? [model('a')] : [model('a'), model('new')]));
    await t.catalog.models();
    await t.time.advance(100);
    t.catalog.offer([model('a'), model('new')], 100);
    // Not used before a read says whether it is enabled.
    await flush();
    expect(t.reads()).toBe(2);
    expect(ids(await t.catalog.models())).toEqual(['a', 'new']);
    await t.time.advance(100);
    t.catalog.offer([model('a'), model('new'), model('other')], 200);
    await t.time.advance(10);
    // Read for once: a model droid lists only to turns does not cost a read per turn.
    t.catalog.offer([model('a'), model('new'), model('other')], 210);
    await flush();
    expect(t.reads()).toBe(3);
  });

  it("a turn's list before any read, or one answered in the future, is never served past its TTL", async () => {
    const t = setup();
    t.catalog.offer([model('x')], 0);
    expect(t.events).toEqual([{ kind: 'offer_ignored', why: expect.stringContaining('no catalog read'), offered: 1 }]);
    await t.catalog.models();
    t.fail(true);
    await t.time.advance(100);
    // A clock ahead of ours counts as answered now.
    t.catalog.offer([model('m1')], 1_000_000);
    await t.time.advance(1_000);
    const err = await t.catalog.models().catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'model_discovery_failed' });
  });

  it('concurrent callers and the background read share one droid read', async () => {
    const t = setup();
    await t.catalog.models();
    t.hold();
    await t.time.advance(800); // the background read starts and is held
    expect(t.reads()).toBe(2);
    await t.time.advance(300); // the first catalog has expired meanwhile
    const all = Promise.all([t.catalog.models(), t.catalog.models(), t.catalog.models()]);
    await flush();
    t.release();
    const results = await all;
    expect(t.reads()).toBe(2);
    expect(results.map((r) => ids(r))).toEqual([['m2'], ['m2'], ['m2']]);
  });

  it('a failed background read keeps the valid catalog until its TTL; then a caller gets model_discovery_failed, never the expired one', async () => {
    const t = setup();
    await t.catalog.models();
    t.fail(true);
    await t.time.advance(850); // the read at 800 failed
    expect(t.reads()).toBe(2);
    expect(ids(await t.catalog.models())).toEqual(['m1']);
    expect(t.reads()).toBe(2);
    await t.time.advance(149); // a second try at 900, failed too
    expect(t.readAt()).toEqual([0, 800, 900]);
    expect(ids(await t.catalog.models())).toEqual(['m1']);
    await t.time.advance(1); // expired: the try at 1 000 fails, and the caller's own read too
    const err = await t.catalog.models().catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'model_discovery_failed', retryable: true });
    expect((err as Error).message).not.toContain('/secret/path');
    expect(t.events.filter((e) => e.kind === 'read_failed').map((e) => e.kind === 'read_failed' && e.background)).toEqual([true, true, true, false]);
    // Nothing valid left to keep fresh: no more background reads (and warnings) until a caller's read succeeds.
    expect(t.time.pending()).toBe(0);
    await t.time.advance(10 * TTL);
    expect(t.reads()).toBe(5);
    t.fail(false);
    expect(ids(await t.catalog.models())).toEqual(['m6']);
    expect(t.time.pending()).toBe(1);
  });

  it('a catalog nobody asked for reads nothing; close stops the refresh-ahead, leaving no timer', async () => {
    const t = setup();
    await t.time.advance(10 * TTL);
    expect(t.reads()).toBe(0);
    expect(t.time.pending()).toBe(0);
    await t.catalog.models();
    expect(t.time.pending()).toBe(1);
    await t.catalog.close();
    expect(t.time.pending()).toBe(0);
    await t.time.advance(10 * TTL);
    expect(t.reads()).toBe(1);
  });

  it('close waits for a read in flight, and no timer follows it', async () => {
    const t = setup();
    await t.catalog.models();
    t.hold();
    await t.time.advance(800);
    let closed = false;
    const closing = t.catalog.close().then(() => (closed = true));
    await flush();
    expect(closed).toBe(false);
    t.release();
    await closing;
    expect(t.time.pending()).toBe(0);
    await t.time.advance(10 * TTL);
    expect(t.reads()).toBe(2);
  });
});
