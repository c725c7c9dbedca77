import { describe, expect, it } from 'vitest';
import type { CatalogModel } from '../../src/droid/client.js';
import { ModelCatalog, visibleModels } from '../../src/controller/model-catalog.js';

const model = (id: string, extra: Partial<CatalogModel> = {}): CatalogModel => ({ id, displayName: id, ...extra });

describe('visibleModels', () => {
  it('hides disabled, deprecated, dated and excluded models', () => {
    const all = [model('a'), model('b', { disabled: true }), model('c', { deprecated: true }), model('d', { deprecationDate: '2030-01-01' }), model('e')];
    expect(visibleModels(all, ['e']).map((m) => m.id)).toEqual(['a']);
  });
});

describe('ModelCatalog', () => {
  function setup(ttl = 1_000) {
    let now = 0;
    let calls = 0;
    let fail = false;
    let release: (() => void) | undefined;
    const gate = () => new Promise<void>((r) => (release = r));
    let gated = false;
    const catalog = new ModelCatalog(
      async () => {
        calls++;
        if (gated) await gate();
        if (fail) throw new Error('droid exploded at /secret/path');
        return [model(`m${calls}`)];
      },
      ttl,
      [],
      () => {},
      () => now,
    );
    return {
      catalog,
      advance: (ms: number) => (now += ms),
      calls: () => calls,
      failNext: (v: boolean) => (fail = v),
      gate: (v: boolean) => (gated = v),
      release: () => release?.(),
    };
  }

  it('serves the cache within the TTL and refreshes after it', async () => {
    const t = setup();
    expect((await t.catalog.models()).map((m) => m.id)).toEqual(['m1']);
    t.advance(999);
    expect((await t.catalog.models()).map((m) => m.id)).toEqual(['m1']);
    t.advance(1);
    expect((await t.catalog.models()).map((m) => m.id)).toEqual(['m2']);
    expect(t.calls()).toBe(2);
  });

  it('lets concurrent callers share one refresh', async () => {
    const t = setup();
    t.gate(true);
    const all = Promise.all([t.catalog.models(), t.catalog.models(), t.catalog.models()]);
    await new Promise((r) => setImmediate(r));
    t.release();
    const results = await all;
    expect(t.calls()).toBe(1);
    expect(results.every((r) => r[0]!.id === 'm1')).toBe(true);
  });

  it('never serves an expired catalog when the refresh fails', async () => {
    const t = setup();
    await t.catalog.models();
    t.advance(5_000);
    t.failNext(true);
    const err = await t.catalog.models().catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'model_discovery_failed', retryable: true });
    expect((err as Error).message).not.toContain('/secret/path');
    t.failNext(false);
    expect((await t.catalog.models()).map((m) => m.id)).toEqual(['m3']);
  });
});
