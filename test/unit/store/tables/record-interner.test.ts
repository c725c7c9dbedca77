/**
 * The interner (src/store/tables/record-interner.ts) copies records into a
 * lean frozen form, field by field as the schemas list them. Its copies must
 * be the record exactly: checked on arbitrary records of every shape
 * (test/support/schema-arbitrary.ts), so a field added to a schema is
 * checked too.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { RecordInterner } from '../../../../src/store/tables/record-interner.js';
import { runRecordSchema, sessionRecordSchema, type RunRecord, type SessionRecord } from '../../../../src/shared/record-schemas.js';
import { runRecord, sessionRecord } from '../../../support/records.js';
import { arbitraryOf } from '../../../support/schema-arbitrary.js';

const interner = () => new RecordInterner({ maxStrings: 64, maxObjects: 16 });

/** Every object and array inside `v`, `v` included. */
function objectsOf(v: unknown, out: object[] = []): object[] {
  if (typeof v !== 'object' || v === null) return out;
  out.push(v);
  for (const child of Object.values(v)) objectsOf(child, out);
  return out;
}

describe.each([
  ['run', runRecordSchema, (pool: RecordInterner, v: unknown) => pool.run(v as RunRecord)],
  ['session', sessionRecordSchema, (pool: RecordInterner, v: unknown) => pool.session(v as SessionRecord)],
] as const)('interned %s records', (_kind, schema, intern) => {
  const valid = arbitraryOf(schema).filter((v) => schema.safeParse(v).success);

  it('are the record exactly, frozen at every level, and share no object with it', () => {
    // One pool over all samples, small enough to start over: shared strings and objects come and go.
    const pool = interner();
    fc.assert(
      fc.property(valid, (record) => {
        const copy = intern(pool, record);
        expect(copy).toStrictEqual(record);
        expect(schema.safeParse(copy).success).toBe(true);
        const copies = objectsOf(copy);
        for (const o of copies) expect(Object.isFrozen(o)).toBe(true);
        const originals = new Set(objectsOf(record));
        for (const o of copies) expect(originals.has(o)).toBe(false);
      }),
      { numRuns: 1000 },
    );
  });
});

describe('interned records share', () => {
  it('equal settings, errors and label lists, and every empty list', () => {
    const pool = interner();
    const error = { code: 'turn_failed', message: 'droid exited', retryable: true };
    const [a, b] = [1, 2].map((seq) =>
      pool.run(runRecord({ sessionId: 's1', seq, error: { ...error }, settings: { model: 'm', autonomy: 'high', reasoningEffort: null } })),
    );
    expect(a!.settings).toBe(b!.settings);
    expect(a!.error).toBe(b!.error);
    expect(a!.events).toBe(b!.questions);
    const [s, t] = ['s1', 's2'].map((id) => pool.session(sessionRecord({ id, labels: ['x', 'y'] })));
    expect(s!.labels).toBe(t!.labels);
  });

  it("a run's session id with the session it belongs to", () => {
    const asked: string[] = [];
    const pool = new RecordInterner({ maxStrings: 64, maxObjects: 16, sessionId: (id) => (asked.push(id), undefined) });
    pool.run(runRecord({ sessionId: 's1', seq: 1 }));
    expect(asked).toEqual(['s1']);
  });
});
