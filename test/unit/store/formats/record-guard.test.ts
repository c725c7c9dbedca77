/**
 * The fast record checks used at start-up (src/store/formats/record-guard.ts) may
 * speed loading up but never accept what the zod schemas refuse: checked on
 * valid records of every shape and on many damaged copies of them. Being
 * derived from the schemas, they also agree with them both ways: on arbitrary
 * records (test/support/schema-arbitrary.ts) and every mutation of every field.
 */
import { isDeepStrictEqual } from 'node:util';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { z } from 'zod';
import { isRunRecord, isSessionRecord, recordGuards } from '../../../../src/store/formats/record-guard.js';
import { runRecordSchema, sessionRecordSchema } from '../../../../src/shared/record-schemas.js';
import { runRecord, sessionRecord } from '../../../support/records.js';
import { arbitraryOf } from '../../../support/schema-arbitrary.js';

const error = { code: 'turn_failed', message: 'droid exited', retryable: true };
const runs: unknown[] = [
  runRecord({ sessionId: 's1', seq: 1 }),
  runRecord({
    sessionId: 's1',
    seq: 2,
    requestKey: null,
    state: 'failed',
    cancelReason: 'predecessor_failed',
    error,
    usage: { inputTokens: 1, outputTokens: 2.5, cacheCreationTokens: 0, cacheReadTokens: 0, thinkingTokens: 0, factoryCredits: null },
    permissionsDeclined: [{ tool: 'Execute', summary: 'rm -rf' }],
    questions: [{ topic: 't', question: 'q?', options: ['a', 'b'] }],
    predecessorFailure: { runId: 's1-r1', state: 'failed', error: null },
    events: [{ at: 'x', kind: 'tool_started', detail: 'Read' }],
    reply: { routeId: 'route-1', accepted: 2, handles: [{ handle: 'h1', routeId: 'route-1' }], failure: error },
    settings: { model: 'm', autonomy: 'high', reasoningEffort: 'high' },
  }),
  // Budgets and live usage (issue 22): a running figure, the caller's budget and the limit it runs under.
  runRecord({
    sessionId: 's1',
    seq: 3,
    state: 'running',
    usage: { inputTokens: 220, outputTokens: 20, cacheCreationTokens: 0, cacheReadTokens: 0, thinkingTokens: 0, factoryCredits: 0.25 },
    usageLive: true,
    budget: { maxTokens: 1_000, maxCredits: null },
    limit: { maxTokens: 1_000, maxCredits: 2.5 },
  }),
];
const sessions: unknown[] = [
  sessionRecord({ id: 's1' }),
  sessionRecord({ id: 's2', title: 'T', labels: ['a', 'b'], replyTo: 'T-1', replyRouteId: 'route-1', droidSessionId: 'd', factoryTitle: 'T' }),
  sessionRecord({ id: 's3', budget: { maxTokens: null, maxCredits: 0.5 } }),
];

/** Every path to a value inside `v` (objects and arrays included), the root excluded. */
function paths(v: unknown, prefix: (string | number)[] = []): (string | number)[][] {
  if (typeof v !== 'object' || v === null) return [];
  const out: (string | number)[][] = [];
  for (const [k, child] of Object.entries(v)) {
    const key = Array.isArray(v) ? Number(k) : k;
    out.push([...prefix, key], ...paths(child, [...prefix, key]));
  }
  return out;
}

type Damage = { kind: 'delete' } | { kind: 'set'; value: unknown } | { kind: 'add'; key: string; value: unknown };

function damaged(base: unknown, path: (string | number)[], damage: Damage): unknown {
  const copy = structuredClone(base) as Record<string | number, unknown>;
  let parent: Record<string | number, unknown> = copy;
  const target = damage.kind === 'add' ? path : path.slice(0, -1);
  for (const key of target) {
    const next = parent[key];
    if (typeof next !== 'object' || next === null) return copy;
    parent = next as Record<string | number, unknown>;
  }
  // Records are parsed JSON: an array never has a named key (and setting `length` throws).
  if (damage.kind === 'add' && Array.isArray(parent)) return copy;
  const last = path[path.length - 1]!;
  if (damage.kind === 'delete') delete parent[last];
  else if (damage.kind === 'set') parent[last] = damage.value;
  else parent[damage.key] = damage.value;
  return copy;
}

const damage: fc.Arbitrary<Damage> = fc.oneof(
  fc.constant<Damage>({ kind: 'delete' }),
  fc.jsonValue({ maxDepth: 2 }).map<Damage>((value) => ({ kind: 'set', value })),
  fc.constantFrom(0, -1, 1.5, '', 'x', null, true, [], {}).map<Damage>((value) => ({ kind: 'set', value })),
  fc.record({ key: fc.string({ maxLength: 12 }), value: fc.jsonValue({ maxDepth: 1 }) }).map<Damage>(({ key, value }) => ({ kind: 'add', key, value })),
);

describe.each([
  ['run', runs, isRunRecord, runRecordSchema],
  ['session', sessions, isSessionRecord, sessionRecordSchema],
] as const)('fast %s record check', (_kind, bases, guard, schema) => {
  it('accepts the valid records (so loading takes the fast path)', () => {
    for (const base of bases) {
      expect(schema.safeParse(base).success).toBe(true);
      expect(guard(structuredClone(base))).toBe(true);
    }
  });

  it('accepts a damaged record only if the schema accepts it too', () => {
    const cases = fc.integer({ min: 0, max: bases.length - 1 }).chain((i) => {
      const all = paths(bases[i]);
      // The path to damage; an "add" also goes on the root object.
      return fc.tuple(fc.constant(i), fc.oneof(fc.constantFrom(...all), fc.constant([] as (string | number)[])), damage);
    });
    fc.assert(
      fc.property(cases, ([i, path, d]) => {
        if (path.length === 0 && d.kind !== 'add') return;
        const value = damaged(bases[i], path, d);
        if (guard(value)) expect(schema.safeParse(value).success).toBe(true);
      }),
      { numRuns: 3000 },
    );
  });
});

/** What the guard must answer: the schema accepts `value`, and as it is (nothing stripped or changed). */
function acceptedUnchanged(schema: z.ZodType, value: unknown): boolean {
  const parsed = schema.safeParse(value);
  return parsed.success && isDeepStrictEqual(parsed.data, value);
}

/** A mutation of one field: gone, of another type (or out of bounds), or beside an unknown key. */
const mutation: fc.Arbitrary<Damage> = fc.oneof(
  fc.constant<Damage>({ kind: 'delete' }),
  fc.constantFrom(0, -1, 1.5, 2 ** 53, '', 'x', '/x', null, true, false, [], {}, ['x'], { x: 1 }).map<Damage>((value) => ({ kind: 'set', value })),
  fc.jsonValue({ maxDepth: 2 }).map<Damage>((value) => ({ kind: 'set', value })),
  fc.record({ key: fc.string({ maxLength: 12 }), value: fc.jsonValue({ maxDepth: 1 }) }).map<Damage>(({ key, value }) => ({ kind: 'add', key, value })),
);

// The guards are derived from the schemas (record-guard.ts): these hold for every field a schema
// has, including one added after these lines were written.
describe.each([
  ['run', runRecordSchema, recordGuards.run],
  ['session', sessionRecordSchema, recordGuards.session],
] as const)('derived %s record guard', (_kind, schema, guard) => {
  const valid = arbitraryOf(schema).filter((v) => schema.safeParse(v).success);

  it('covers every part of its schema (nothing is left to zod on a valid record)', () => {
    expect(guard.uncovered).toEqual([]);
  });

  it('accepts every valid record, of arbitrary shape (so loading takes the fast path)', () => {
    fc.assert(
      fc.property(valid, (record) => {
        expect(guard.accepts(record)).toBe(true);
        expect(acceptedUnchanged(schema, record)).toBe(true);
      }),
      { numRuns: 500 },
    );
  });

  it('agrees with the schema on every mutation of every field: yes exactly when zod accepts it unchanged', () => {
    const cases = valid.chain((record) =>
      fc.tuple(fc.constant(record), fc.oneof(fc.constantFrom(...paths(record)), fc.constant([] as (string | number)[])), mutation),
    );
    fc.assert(
      fc.property(cases, ([record, path, m]) => {
        if (path.length === 0 && m.kind !== 'add') return;
        // As the state files hold it: through JSON.
        const value = JSON.parse(JSON.stringify(damaged(record, path, m))) as unknown;
        expect(guard.accepts(value)).toBe(acceptedUnchanged(schema, value));
      }),
      { numRuns: 3000 },
    );
  });
});
