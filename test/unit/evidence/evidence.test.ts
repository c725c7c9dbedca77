/**
 * The pure parts of a turn's evidence: the diff of two tree states, the
 * schema bounds, the verdict on droid's structured output, context stats.
 */
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openStore, removeTemps, step, tempBase } from '../store/store-fixtures.js';
import { fingerprint, type Intent } from '../../../src/controller/acceptance/fingerprint.js';
import { contextOf, judgeOutput } from '../../../src/evidence/turn-evidence.js';
import {
  canonicalJson,
  checkOutputSchema,
  judgeStructuredOutput,
  MAX_SCHEMA_BYTES,
  MAX_SCHEMA_DEPTH,
  MAX_SCHEMA_KEYS,
} from '../../../src/evidence/output-schema.js';
import {
  capChanges,
  diffTreeStates,
  namesPathOutside,
  parseNameStatusZ,
  parsePorcelainV2Z,
  type DirtyPath,
  type TreeState,
} from '../../../src/evidence/change-set.js';
import { hasChanges } from '../../../src/shared/evidence-types.js';
import type { TurnCollector } from '../../../src/droid/turn-collector.js';

const state = (dirty: Record<string, DirtyPath>, head: string | null = 'h1'): TreeState => ({ head, dirty: new Map(Object.entries(dirty)) });
const d = (xy: string, blob: string | null): DirtyPath => ({ xy, blob });

describe('diffTreeStates', () => {
  it('classifies paths that became dirty: untracked and staged-new are added, tracked ones modified or deleted', () => {
    const after = state({ 'u.txt': d('??', 'b1'), 'staged.txt': d('A ', 'b2'), 'm.txt': d(' M', 'b3'), 'gone.txt': d(' D', null) });
    expect(diffTreeStates(state({}), after)).toEqual({ added: ['staged.txt', 'u.txt'], modified: ['m.txt'], deleted: ['gone.txt'], renamed: [] });
  });

  it('sees a file dirty before and changed again (content id differs), and ignores one left as it was', () => {
    const before = state({ 'again.txt': d(' M', 'b1'), 'same.txt': d(' M', 'b2'), 'new-before.txt': d('??', 'b3') });
    const after = state({ 'again.txt': d(' M', 'b9'), 'same.txt': d(' M', 'b2'), 'new-before.txt': d('??', 'b3') });
    expect(diffTreeStates(before, after)).toEqual({ added: [], modified: ['again.txt'], deleted: [], renamed: [] });
  });

  it('a dirty file put back to HEAD content is modified; an untracked file removed is deleted', () => {
    const before = state({ 'reverted.txt': d(' M', 'b1'), 'scratch.txt': d('??', 'b2') });
    const after = state({ 'reverted.txt': d('CL', 'b0'), 'scratch.txt': d('CL', null) });
    expect(diffTreeStates(before, after)).toEqual({ added: [], modified: ['reverted.txt'], deleted: ['scratch.txt'], renamed: [] });
  });

  it('pairs a deleted and an added path with the same content as a rename', () => {
    const before = state({ 'old.txt': d('??', 'same') });
    const after = state({ 'old.txt': d('CL', null), 'new.txt': d('??', 'same'), 'other.txt': d('??', 'x') });
    expect(diffTreeStates(before, after)).toEqual({ added: ['other.txt'], modified: [], deleted: [], renamed: [{ from: 'old.txt', to: 'new.txt' }] });
    // A tracked clean file moved: its old blob comes from HEAD.
    const moved = state({ 'a.txt': d(' D', null), 'b.txt': d('??', 'blobA') });
    expect(diffTreeStates(state({}), moved, new Map(), new Map([['a.txt', 'blobA']])).renamed).toEqual([{ from: 'a.txt', to: 'b.txt' }]);
    expect(diffTreeStates(state({}), moved, new Map(), new Map()).renamed).toEqual([]);
  });

  it('counts what the turn committed when HEAD moved, but not earlier dirt it only committed', () => {
    const before = state({ 'wip.txt': d(' M', 'w1') }, 'h1');
    const after = state({}, 'h2');
    const committed = parseNameStatusZ('M\0wip.txt\0A\0fresh.txt\0D\0old.txt\0');
    const afterWithWip = state({ 'wip.txt': d('CL', 'w1') }, 'h2');
    expect(diffTreeStates(before, afterWithWip, committed)).toEqual({ added: ['fresh.txt'], modified: [], deleted: ['old.txt'], renamed: [] });
    expect(diffTreeStates(state({}, 'h1'), after, committed)).toEqual({ added: ['fresh.txt'], modified: ['wip.txt'], deleted: ['old.txt'], renamed: [] });
  });

  it('nothing dirty on either side and HEAD unmoved: no changes', () => {
    expect(diffTreeStates(state({}), state({}))).toEqual({ added: [], modified: [], deleted: [], renamed: [] });
  });
});

describe('porcelain parsing', () => {
  it('reads v2 -z records: HEAD, changed, untracked and unmerged paths, keeping spaces in names', () => {
    const out = parsePorcelainV2Z(
      '# branch.oid 0123abcd\0# branch.head main\0' +
        '1 .M N... 100644 100644 100644 aaa aaa a b.txt\0' +
        '1 A. N... 000000 100644 100644 000 bbb staged.txt\0' +
        '1 D. N... 100644 000000 000000 ccc 000 gone\0' +
        '? dir/new -> x\0' +
        'u UU N... 100644 100644 100644 100644 h1 h2 h3 conflict.txt\0',
    );
    expect(out.head).toBe('0123abcd');
    expect([...out.entries]).toEqual([
      ['a b.txt', ' M'],
      ['staged.txt', 'A '],
      ['gone', 'D '],
      ['dir/new -> x', '??'],
      ['conflict.txt', 'UU'],
    ]);
    expect(parsePorcelainV2Z('# branch.oid (initial)\0? a\0').head).toBeNull();
  });
});

describe('capChanges', () => {
  it('keeps at most the cap over all lists and counts the rest', () => {
    const many = Array.from({ length: 150 }, (_, i) => `f${i}`);
    const c = capChanges({ added: many, modified: many, deleted: ['z'], renamed: [{ from: 'a', to: 'b' }] }, false);
    expect(c.added).toHaveLength(150);
    expect(c.modified).toHaveLength(50);
    expect(c.deleted).toEqual([]);
    expect(c.renamed).toEqual([]);
    expect(c.truncated).toBe(102);
    expect(hasChanges(c)).toBe(true);
    expect(hasChanges(capChanges({ added: [], modified: [], deleted: [], renamed: [] }, true))).toBe(false);
  });
});

describe('namesPathOutside', () => {
  const ws = '/srv/ws';
  it('flags path arguments and shell paths outside the workspace, by segments', () => {
    expect(namesPathOutside([JSON.stringify({ file_path: '/srv/ws/a.txt' })], ws)).toBe(false);
    expect(namesPathOutside([JSON.stringify({ file_path: '/srv/ws-other/a.txt' })], ws)).toBe(true);
    expect(namesPathOutside([JSON.stringify({ file_path: '/srv/ws/../secret' })], ws)).toBe(true);
    expect(namesPathOutside([JSON.stringify({ command: 'echo x > /tmp/out', riskLevel: 'low' })], ws)).toBe(true);
    expect(namesPathOutside([JSON.stringify({ command: 'ls /usr/bin > /dev/null; cat ./a', riskLevel: 'low' })], ws)).toBe(false);
    // Truncated JSON still yields its path argument.
    expect(namesPathOutside(['{"file_path":"/etc/passwd","content":"aaaa'], ws)).toBe(true);
  });
});

describe('checkOutputSchema', () => {
  const ok = { type: 'object', properties: { a: { type: 'string' } } };
  it('accepts a valid object schema', () => {
    expect(checkOutputSchema(ok)).toMatchObject({ ok: true });
  });
  it('refuses with a reason: not an object, non-object root, too big, too deep, too many keys, invalid for ajv', () => {
    const reason = (s: unknown) => {
      const c = checkOutputSchema(s);
      return c.ok ? null : c.reason;
    };
    expect(reason([ok])).toMatch(/JSON object/);
    expect(reason({ type: 'array', items: {} })).toMatch(/object root/);
    expect(reason({ ...ok, description: 'x'.repeat(MAX_SCHEMA_BYTES) })).toMatch(/bytes serialized/);
    let deep: Record<string, unknown> = { type: 'string' };
    for (let i = 0; i < MAX_SCHEMA_DEPTH; i++) deep = { type: 'object', properties: { a: deep } };
    expect(reason(deep)).toMatch(/levels deep/);
    const wide = { type: 'object', properties: Object.fromEntries(Array.from({ length: MAX_SCHEMA_KEYS }, (_, i) => [`p${i}`, {}])) };
    expect(reason(wide)).toMatch(/keys/);
    expect(reason({ type: 'object', properties: { a: { minLength: 'x' } } })).toMatch(/not a valid JSON Schema/);
    expect(reason({ type: 'object', properties: { a: { $ref: '#/nope' } } })).toMatch(/not a valid JSON Schema/);
  });
  it('sizes just under the limits pass', () => {
    let deep: Record<string, unknown> = { type: 'string' };
    for (let i = 0; i < (MAX_SCHEMA_DEPTH - 1) / 2 - 1; i++) deep = { type: 'object', properties: { a: deep } };
    expect(checkOutputSchema(deep)).toMatchObject({ ok: true });
  });
});

describe('structured output verdict', () => {
  const schema = { type: 'object', properties: { answer: { type: 'number' } }, required: ['answer'], additionalProperties: false };
  const collector = (structuredOutput: unknown) => ({ structuredOutput, droidErrors: [] }) as unknown as TurnCollector;
  const completed = { outcome: 'succeeded' as const, reason: 'completed', error: null };

  it('keeps a valid object', () => {
    expect(judgeOutput(schema, completed, collector({ answer: 1 }))).toEqual({ outcome: 'succeeded', error: null, structuredOutput: { answer: 1 } });
  });
  it('catches an object droid let through that violates the schema', () => {
    const v = judgeOutput(schema, completed, collector({ answer: 'one', more: 1 }));
    expect(v.outcome).toBe('failed');
    expect(v.structuredOutput).toBeNull();
    expect(v.error?.code).toBe('structured_output_invalid');
    expect(v.error?.message).toMatch(/answer must be number/);
  });
  it('a completed turn with no structured_output notification is missing', () => {
    expect(judgeOutput(schema, completed, collector(undefined)).error?.code).toBe('structured_output_missing');
  });
  it("droid's structured_output_missing reason becomes the named error", () => {
    const v = judgeOutput(
      schema,
      { outcome: 'failed', reason: 'structured_output_missing', error: { code: 'droid_turn_failed', message: 'x', retryable: false } },
      collector(undefined),
    );
    expect(v).toMatchObject({ outcome: 'failed', structuredOutput: null, error: { code: 'structured_output_missing' } });
  });
  it('an oversized answer is refused, not stored', () => {
    expect(judgeStructuredOutput({ type: 'object' }, { blob: 'x'.repeat(20_000) }).status).toBe('too_large');
  });
  it('other outcomes keep their error', () => {
    const e = { code: 'run_timed_out', message: 'late', retryable: true };
    expect(judgeOutput(schema, { outcome: 'timed_out', reason: null, error: e }, collector({ answer: 1 }))).toEqual({
      outcome: 'timed_out',
      error: e,
      structuredOutput: null,
    });
  });
});

describe('context stats', () => {
  it('computes the fraction and refuses nonsense', () => {
    expect(contextOf(14402, 250000)).toEqual({ used: 14402, limit: 250000, fraction: 0.0576 });
    expect(contextOf(1, 0)).toBeNull();
    expect(contextOf('1', 10)).toBeNull();
    expect(contextOf(-1, 10)).toBeNull();
  });
});

describe('schema in the fingerprint', () => {
  const intent: Intent = { kind: 'create', target: '/r', prompt: 'p', interrupt: false, replyTo: null, title: null, labels: [] };
  it('changes the fingerprint, ignores key order, and leaves schema-less fingerprints as they were', () => {
    const a = canonicalJson({ type: 'object', properties: { x: { type: 'string' } } });
    const b = canonicalJson({ properties: { x: { type: 'string' } }, type: 'object' });
    expect(a).toBe(b);
    expect(fingerprint({ ...intent, outputSchema: a })).not.toBe(fingerprint(intent));
    expect(fingerprint({ ...intent, outputSchema: a })).toBe(fingerprint({ ...intent, outputSchema: b }));
    // The digest of a schema-less intent is the one computed before outputSchema existed.
    const before = createHash('sha256')
      .update(JSON.stringify(['create', '/r', 'p', false, null, null, []]))
      .digest('hex');
    expect(fingerprint(intent)).toBe(before);
  });
});

describe('evidence in the store', () => {
  afterAll(removeTemps);
  it('round-trips runs with evidence, frozen, beside runs written before it existed (no fields at all)', async () => {
    const dir = join(await tempBase(), 'state');
    const store = await openStore(dir);
    const changes = { added: ['a'], modified: [], deleted: [], renamed: [{ from: 'x', to: 'y' }], truncated: 0, outsideWorkspace: true };
    await store.commit(step(1));
    await store.commit(step(2, { structuredOutput: { answer: { deep: [1, 2] } }, changes, context: { used: 1, limit: 10, fraction: 0.1 } }));
    await store.commit(step(3, { structuredOutput: null, changes: null, context: null }));
    const written = store.runs.get('r2')!;
    expect(Object.isFrozen(written.structuredOutput)).toBe(true);
    expect(Object.isFrozen((written.structuredOutput as { answer: { deep: number[] } }).answer.deep)).toBe(true);
    expect(Object.isFrozen(written.changes!.renamed[0])).toBe(true);
    await store.close();
    const reopened = await openStore(dir);
    expect('changes' in reopened.runs.get('r1')!).toBe(false);
    expect(reopened.runs.get('r2')).toMatchObject({ structuredOutput: { answer: { deep: [1, 2] } }, changes, context: { used: 1, limit: 10, fraction: 0.1 } });
    expect(reopened.runs.get('r3')).toMatchObject({ structuredOutput: null, changes: null, context: null });
    await reopened.close();
  });
});
