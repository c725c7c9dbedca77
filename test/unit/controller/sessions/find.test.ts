/**
 * Finding sessions: each filter, newest-first order, and keyset cursors that
 * visit every match once and are not shifted by sessions created later.
 */
import { describe, expect, it } from 'vitest';
import { ControllerError } from '../../../../src/shared/public-error.js';
import { findSessions, parseInstant, SessionIndex, type FindFilters, type SessionSummary } from '../../../../src/controller/sessions/find.js';
import { encodeCursor } from '../../../../src/controller/sessions/history.js';
import type { SessionRecord } from '../../../../src/shared/records.js';
import { expectRejection } from '../../../support/assertions.js';

const T0 = Date.parse('2030-01-01T00:00:00.000Z');

function session(n: number, over: Partial<SessionRecord> = {}): SessionRecord {
  const at = new Date(T0 + n * 60_000).toISOString();
  return {
    id: `s-${String(n).padStart(4, '0')}`,
    createdAt: at,
    updatedAt: at,
    workspace: '/srv/repos/app',
    title: null,
    labels: [],
    archived: false,
    replyTo: null,
    droidSessionId: `droid-${n}`,
    headRunId: `r-${n}`,
    factoryTitle: null,
    ...over,
  };
}

const idle = (): SessionSummary => ({ agentState: 'idle', preview: '' });

function ids(sessions: readonly SessionRecord[]): string[] {
  return sessions.map((s) => s.id);
}

/** Every page of a query, following nextCursor. */
function allPages(
  sessions: Iterable<SessionRecord>,
  filters: FindFilters,
  limit: number,
  view: (s: SessionRecord) => SessionSummary = idle,
): SessionRecord[][] {
  const pages: SessionRecord[][] = [];
  let cursor: string | undefined;
  for (;;) {
    const page = findSessions(sessions, view, filters, cursor, limit);
    expect(page.sessions.length).toBeLessThanOrEqual(limit);
    if (page.nextCursor !== null) expect(page.sessions.length).toBe(limit);
    pages.push(page.sessions);
    if (page.nextCursor === null) return pages;
    cursor = page.nextCursor;
    if (pages.length > 10_000) throw new Error('cursor loop');
  }
}

/** A deterministic shuffle, so order never comes from insertion order. */
function shuffled<T>(items: readonly T[], seed = 7): T[] {
  const out = [...items];
  let x = seed;
  for (let i = out.length - 1; i > 0; i--) {
    x = (x * 1103515245 + 12345) % 2147483648;
    const j = x % (i + 1);
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

describe('SessionIndex', () => {
  it('iterates newest created first, ties by id descending, whatever the insertion order', () => {
    const same = new Date(T0).toISOString();
    const sessions = [
      session(3),
      session(1),
      session(2),
      session(0, { id: 'b', createdAt: same }),
      session(0, { id: 'a', createdAt: same }),
      session(0, { id: 'c', createdAt: same }),
    ];
    const expected = ['s-0003', 's-0002', 's-0001', 'c', 'b', 'a'];
    expect(ids([...new SessionIndex(sessions)])).toEqual(expected);
    const incremental = new SessionIndex();
    for (const s of shuffled(sessions)) incremental.upsert(s);
    expect(ids([...incremental])).toEqual(expected);
    expect(incremental.size).toBe(6);
  });

  it('orders by instant, not by how the time is spelled', () => {
    const a = session(0, { id: 'a', createdAt: '2030-01-01T10:00:00.000+07:00' }); // 03:00Z
    const b = session(0, { id: 'b', createdAt: '2030-01-01T05:00:00.000Z' });
    expect(ids([...new SessionIndex([a, b])])).toEqual(['b', 'a']);
  });

  it('replaces a session in place, and moves it if its creation time changes', () => {
    const index = new SessionIndex([session(1), session(2), session(3)]);
    index.upsert(session(2, { title: 'renamed' }));
    expect(index.get('s-0002')?.title).toBe('renamed');
    expect(ids([...index])).toEqual(['s-0003', 's-0002', 's-0001']);
    index.upsert(session(2, { createdAt: new Date(T0 + 10 * 60_000).toISOString() }));
    expect(ids([...index])).toEqual(['s-0002', 's-0003', 's-0001']);
    expect(index.size).toBe(3);
  });

  it('matches a sort of the same sessions after many random upserts', () => {
    const index = new SessionIndex();
    const latest = new Map<string, SessionRecord>();
    let x = 3;
    for (let i = 0; i < 500; i++) {
      x = (x * 1103515245 + 12345) % 2147483648;
      const s = session(x % 50, { id: `id-${x % 80}`, title: `v${i}` });
      index.upsert(s);
      latest.set(s.id, s);
    }
    const sorted = [...latest.values()].sort((a, b) => Date.parse(b.createdAt) - Date.parse(a.createdAt) || (a.id < b.id ? 1 : -1));
    expect([...index]).toEqual(sorted);
  });

  it('a workspace filter finds what a scan of every session finds, through every page, after upserts that move sessions in time and between workspaces', () => {
    // A parent of one, of several and of more workspaces than are merged (17 under /many), siblings sharing a prefix.
    const workspaces = ['/w/a', '/w/a/sub', '/w/a/sub/deep', '/w/ab', '/w/b', '/x', ...Array.from({ length: 17 }, (_, i) => `/many/${i}`)];
    const index = new SessionIndex();
    const latest = new Map<string, SessionRecord>();
    let x = 11;
    const next = (n: number) => (x = (x * 1103515245 + 12345) % 2147483648) % n;
    for (let i = 0; i < 1_500; i++) {
      const s = session(next(400), { id: `id-${next(300)}`, workspace: workspaces[next(workspaces.length)]!, archived: next(10) === 0 });
      index.upsert(s);
      latest.set(s.id, s);
    }
    const newestFirst = [...latest.values()].sort((a, b) => Date.parse(b.createdAt) - Date.parse(a.createdAt) || (a.id < b.id ? 1 : -1));
    for (const scope of ['/w/a', '/w/a/', '/w/a/sub', '/w', '/many', '/many/3', '/', '/w/ab', '/nowhere']) {
      const dir = scope.replace(/\/+$/, '') || '/';
      const inScope = (ws: string) => ws === dir || ws.startsWith(dir.endsWith('/') ? dir : `${dir}/`);
      const expected = newestFirst.filter((s) => !s.archived && inScope(s.workspace));
      for (const limit of [1, 7, 100]) expect(ids(allPages(index, { workspace: scope }, limit).flat()), `${scope}, pages of ${limit}`).toEqual(ids(expected));
    }
  });

  it('keeps a session with a malformed creation time, as the oldest', () => {
    const index = new SessionIndex([session(1), session(2, { createdAt: 'garbage' })]);
    expect(ids([...index])).toEqual(['s-0001', 's-0002']);
    expect(ids(allPages(index, {}, 1).flat())).toEqual(['s-0001', 's-0002']);
  });
});

describe('ordering and pagination', () => {
  const sessions = shuffled(Array.from({ length: 23 }, (_, n) => session(n, { labels: n % 3 === 0 ? ['bug'] : [] })));
  const newestFirst = [...sessions].sort((a, b) => (a.createdAt < b.createdAt ? 1 : -1));

  it('returns newest created first with a default page of 25', () => {
    const page = findSessions(sessions, idle, {});
    expect(ids(page.sessions)).toEqual(ids(newestFirst));
    expect(page.nextCursor).toBeNull();
    const many = Array.from({ length: 30 }, (_, n) => session(n));
    expect(findSessions(many, idle, {}).sessions).toHaveLength(25);
  });

  it('returns every match exactly once, in order, for every page size, from an index or a plain list', () => {
    const index = new SessionIndex(sessions);
    for (const filters of [{}, { labels: ['bug'] }] satisfies FindFilters[]) {
      const expected = ids(findSessions(sessions, idle, filters, undefined, 100).sessions);
      expect(expected.length).toBeGreaterThan(0);
      for (let limit = 1; limit <= expected.length + 1; limit++) {
        const pages = allPages(index, filters, limit);
        expect(ids(pages.flat())).toEqual(expected);
        expect(pages).toHaveLength(Math.max(1, Math.ceil(expected.length / limit)));
        expect(ids(allPages(sessions, filters, limit).flat())).toEqual(expected);
      }
    }
  });

  it('pages through sessions created at the same instant by id', () => {
    const same = new Date(T0).toISOString();
    const tied = Array.from({ length: 9 }, (_, n) => session(0, { id: `t${n}`, createdAt: same }));
    for (let limit = 1; limit <= 10; limit++) {
      expect(ids(allPages(tied, {}, limit).flat())).toEqual(['t8', 't7', 't6', 't5', 't4', 't3', 't2', 't1', 't0']);
    }
  });

  it('is not shifted by sessions created between pages', () => {
    const index = new SessionIndex(sessions);
    const first = findSessions(index, idle, {}, undefined, 5);
    const expectedRest = ids(newestFirst.slice(5));
    for (let n = 100; n < 110; n++) index.upsert(session(n));
    index.upsert(session(-5, { id: 'early' })); // older than everything (only possible with a skewed clock): appears later, in order
    const rest = allPagesFrom(index, first.nextCursor!, 4);
    expect(ids(rest)).toEqual([...expectedRest, 'early']);
    // A fresh search sees the new sessions first.
    expect(findSessions(index, idle, {}, undefined, 1).sessions[0]!.id).toBe('s-0109');
  });

  it('keeps working when the session under the cursor is archived between pages', () => {
    const index = new SessionIndex(sessions);
    const first = findSessions(index, idle, {}, undefined, 3);
    const boundary = first.sessions[2]!;
    index.upsert({ ...boundary, archived: true });
    expect(ids(allPagesFrom(index, first.nextCursor!, 3))).toEqual(ids(newestFirst.slice(3)));
  });

  it('has no cursor when the matches end exactly at the page end', () => {
    const page = findSessions(sessions, idle, {}, undefined, 23);
    expect(page.sessions).toHaveLength(23);
    expect(page.nextCursor).toBeNull();
  });

  it('rejects limits outside 1..100', () => {
    for (const limit of [0, 101, 2.5, -3, Number.NaN]) expectRejection(() => findSessions(sessions, idle, {}, undefined, limit), 'invalid_arguments');
  });
});

function allPagesFrom(index: SessionIndex, cursor: string, limit: number, filters: FindFilters = {}): SessionRecord[] {
  const out: SessionRecord[] = [];
  let next: string | null = cursor;
  while (next !== null) {
    const page = findSessions(index, idle, filters, next, limit);
    out.push(...page.sessions);
    next = page.nextCursor;
  }
  return out;
}

describe('cursors', () => {
  const sessions = Array.from({ length: 10 }, (_, n) => session(n, { labels: ['bug', 'web'], title: `task ${n}` }));
  const filters: FindFilters = { labels: ['bug', 'web'], query: 'Task', workspace: '/srv/repos', after: '2029-01-01' };
  const cursor = findSessions(sessions, idle, filters, undefined, 3).nextCursor!;

  it('is bound to the filters, not to their spelling', () => {
    const respelled: FindFilters = { labels: ['web', 'bug', 'web'], query: 'TASK', workspace: '/srv/repos/', after: '2029-01-01T00:00:00Z', archived: false };
    expect(ids(findSessions(sessions, idle, respelled, cursor, 3).sessions)).toEqual(['s-0006', 's-0005', 's-0004']);
  });

  it.each([
    ['another query', { ...filters, query: 'other' }],
    ['no query', { ...filters, query: undefined }],
    ['fewer labels', { ...filters, labels: ['bug'] }],
    ['another workspace', { ...filters, workspace: '/srv' }],
    ['another range', { ...filters, after: '2029-01-02' }],
    ['a state', { ...filters, state: 'idle' as const }],
    ['archived', { ...filters, archived: true }],
  ])('rejects a cursor used with %s', (_name, changed) => {
    expectRejection(() => findSessions(sessions, idle, changed, cursor, 3), 'invalid_cursor');
  });

  it.each([
    ['garbage', '%%%'],
    ['not JSON', Buffer.from('nope').toString('base64url')],
    ['a history cursor', encodeCursor({ k: 'h', v: 1, s: 's-0001', q: 1, i: 0 })],
    ['another version', reencode(cursor, { v: 9 })],
    ['a bad date', reencode(cursor, { createdAt: 'soon' })],
    ['no id', reencode(cursor, { id: 7 })],
  ])('rejects %s', (_name, bad) => {
    expectRejection(() => findSessions(sessions, idle, filters, bad, 3), 'invalid_cursor');
  });

  it('does not reveal the query', () => {
    const secret = findSessions(sessions, idle, { query: 'task zebra-secret' }, undefined, 1);
    expect(secret.nextCursor).toBeNull();
    const paged = findSessions(sessions, idle, { query: 'task' }, undefined, 1).nextCursor!;
    expect(Buffer.from(paged, 'base64url').toString()).not.toContain('task');
  });
});

function reencode(cursor: string, change: Record<string, unknown>): string {
  const payload = JSON.parse(Buffer.from(cursor, 'base64url').toString()) as Record<string, unknown>;
  return encodeCursor({ ...payload, ...change });
}

describe('filters', () => {
  it('hides archived sessions by default and selects only archived ones with archived: true', () => {
    const sessions = [session(1), session(2, { archived: true }), session(3)];
    expect(ids(findSessions(sessions, idle, {}).sessions)).toEqual(['s-0003', 's-0001']);
    expect(ids(findSessions(sessions, idle, { archived: false }).sessions)).toEqual(['s-0003', 's-0001']);
    expect(ids(findSessions(sessions, idle, { archived: true }).sessions)).toEqual(['s-0002']);
  });

  it('matches a workspace and its descendants by path segment, never a sibling prefix', () => {
    const sessions = [
      session(1, { workspace: '/a/b' }),
      session(2, { workspace: '/a/b/c' }),
      session(3, { workspace: '/a/bc' }),
      session(4, { workspace: '/a' }),
      session(5, { workspace: '/a/b/c/d' }),
    ];
    expect(ids(findSessions(sessions, idle, { workspace: '/a/b' }).sessions)).toEqual(['s-0005', 's-0002', 's-0001']);
    expect(ids(findSessions(sessions, idle, { workspace: '/a/b/' }).sessions)).toEqual(['s-0005', 's-0002', 's-0001']);
    expect(ids(findSessions(sessions, idle, { workspace: '/a/bc' }).sessions)).toEqual(['s-0003']);
    expect(ids(findSessions(sessions, idle, { workspace: '/a/b/c/d' }).sessions)).toEqual(['s-0005']);
    expect(findSessions(sessions, idle, { workspace: '/' }).sessions).toHaveLength(5);
    expect(findSessions(sessions, idle, { workspace: '/x' }).sessions).toHaveLength(0);
    for (const workspace of ['a/b', '', '../a']) expectRejection(() => findSessions(sessions, idle, { workspace }), 'invalid_arguments');
  });

  it('requires every listed label', () => {
    const sessions = [
      session(1, { labels: ['bug'] }),
      session(2, { labels: ['bug', 'web'] }),
      session(3, { labels: ['web'] }),
      session(4, { labels: ['bugfix', 'web'] }),
    ];
    expect(ids(findSessions(sessions, idle, { labels: ['bug'] }).sessions)).toEqual(['s-0002', 's-0001']);
    expect(ids(findSessions(sessions, idle, { labels: ['bug', 'web'] }).sessions)).toEqual(['s-0002']);
    expect(ids(findSessions(sessions, idle, { labels: [] }).sessions)).toHaveLength(4);
    for (const labels of [['Bug'], ['has space'], [''], ['x'.repeat(51)]]) expectRejection(() => findSessions(sessions, idle, { labels }), 'invalid_arguments');
  });

  it('filters by agent state through the view', () => {
    const states: Record<string, SessionSummary['agentState']> = { 's-0001': 'working', 's-0002': 'idle', 's-0003': 'unknown', 's-0004': 'idle' };
    const view = (s: SessionRecord): SessionSummary => ({ agentState: states[s.id]!, preview: '' });
    const sessions = [1, 2, 3, 4].map((n) => session(n));
    expect(ids(findSessions(sessions, view, { state: 'idle' }).sessions)).toEqual(['s-0004', 's-0002']);
    expect(ids(findSessions(sessions, view, { state: 'working' }).sessions)).toEqual(['s-0001']);
    expect(ids(findSessions(sessions, view, { state: 'unknown' }).sessions)).toEqual(['s-0003']);
    expectRejection(() => findSessions(sessions, view, { state: 'busy' as 'idle' }), 'invalid_arguments');
  });

  it('matches the query case-insensitively in the title, the labels or the preview, and nowhere else', () => {
    const previews: Record<string, string> = { 's-0003': 'Refactored the PARSER module', 's-0004': 'nothing relevant' };
    const view = (s: SessionRecord): SessionSummary => ({ agentState: 'idle', preview: previews[s.id] ?? '' });
    const sessions = [
      session(1, { title: 'Fix the Parser' }),
      session(2, { labels: ['parser-v2'] }),
      session(3),
      session(4, { workspace: '/srv/parser', replyTo: 'parser', headRunId: 'parser', factoryTitle: 'parser' }),
      session(5, { id: 'parser-session', droidSessionId: 'parser' }),
    ];
    expect(ids(findSessions(sessions, view, { query: 'parser' }).sessions)).toEqual(['s-0003', 's-0002', 's-0001']);
    expect(ids(findSessions(sessions, view, { query: 'PaRsEr' }).sessions)).toEqual(['s-0003', 's-0002', 's-0001']);
    expect(ids(findSessions(sessions, view, { query: 'the parser' }).sessions)).toEqual(['s-0003', 's-0001']);
    expect(findSessions(sessions, view, { query: '' }).sessions).toHaveLength(5);
  });

  it('takes the query literally, including regex characters and non-ASCII letters', () => {
    const titles = ['cost is $5 (approx.)', 'a.b', 'axb', 'path C:\\tmp\\x', 'Ünïcode Straße', 'brackets [x]', 'caret ^x|y'];
    const sessions = titles.map((title, n) => session(n, { title }));
    const find = (query: string) => findSessions(sessions, idle, { query }).sessions.map((s) => s.title);
    expect(find('$5 (APPROX.)')).toEqual(['cost is $5 (approx.)']);
    expect(find('a.b')).toEqual(['a.b']);
    expect(find('c:\\TMP')).toEqual(['path C:\\tmp\\x']);
    expect(find('[X]')).toEqual(['brackets [x]']);
    expect(find('^x|y')).toEqual(['caret ^x|y']);
    expect(find('ünïCODE')).toEqual(['Ünïcode Straße']);
    expect(find('STRASSE')).toEqual([]);
    expect(find('straße')).toEqual(['Ünïcode Straße']);
  });

  it('over prepared summaries, finds what the view finds without asking for it, until a session or its runs change', () => {
    const previews: Record<string, string> = { 's-0001': 'Refactored the PARSER', 's-0002': 'nothing', 's-0003': 'straße done' };
    const view = (s: SessionRecord): SessionSummary => ({ agentState: 'idle', preview: previews[s.id] ?? '' });
    const sessions = [session(1, { title: 'one' }), session(2, { labels: ['parser-v2'] }), session(3, { title: 'Ünïcode' }), session(4)];
    const index = new SessionIndex(sessions);
    for (const s of sessions) index.prepare(s.id, view(s));
    index.prepareText();
    const never = (): SessionSummary => {
      throw new Error('the prepared summary is used');
    };
    for (const query of ['parser', 'PARSER', 'ünïCODE', 'STRASSE', 'straße', 'one', 'nothing', 'zzz', 'e\u0000p']) {
      const expected = ids(findSessions(sessions, view, { query }).sessions);
      expect(ids(findSessions(index, query.includes('\u0000') ? view : never, { query }).sessions), query).toEqual(expected);
    }
    // A query never matches across two fields.
    expect(ids(findSessions(index, never, { query: 'one\u0000' }).sessions)).toEqual([]);
    // A changed title is searched at once; what was prepared for that session is asked for again.
    index.upsert({ ...sessions[3]!, title: 'renamed parser' });
    expect(ids(findSessions(index, never, { query: 'renamed' }).sessions)).toEqual(['s-0004']);
    expect(() => findSessions(index, never, { query: 'zzz' })).toThrow('the prepared summary is used');
    expect(ids(findSessions(index, view, { query: 'parser' }).sessions)).toEqual(['s-0004', 's-0002', 's-0001']);
    index.forget('s-0002');
    previews['s-0002'] = 'now about parsers';
    expect(ids(findSessions(index, view, { query: 'about' }).sessions)).toEqual(['s-0002']);
  });

  it('combines the query with the other filters', () => {
    const view = (s: SessionRecord): SessionSummary => ({ agentState: s.id === 's-0002' ? 'working' : 'idle', preview: 'deploy' });
    const sessions = [session(1, { labels: ['ops'] }), session(2, { labels: ['ops'] }), session(3, { labels: ['ops'], archived: true }), session(4)];
    expect(ids(findSessions(sessions, view, { query: 'deploy', labels: ['ops'], state: 'idle' }).sessions)).toEqual(['s-0001']);
  });

  it('asks for the view only when a filter needs it, and then once per session', () => {
    const calls: string[] = [];
    const view = (s: SessionRecord): SessionSummary => {
      calls.push(s.id);
      return { agentState: 'idle', preview: 'text' };
    };
    const sessions = [session(1, { title: 'hit' }), session(2, { archived: true }), session(3, { workspace: '/elsewhere' }), session(4)];
    findSessions(sessions, view, {});
    findSessions(sessions, view, { labels: ['x'] });
    expect(calls).toEqual([]);
    // s-0001 matches by title and s-0002 is archived: only the others need a preview.
    findSessions(sessions, view, { query: 'hit' });
    expect(calls).toEqual(['s-0004', 's-0003']);
    calls.length = 0;
    findSessions(sessions, view, { query: 'text', state: 'idle', workspace: '/srv' });
    expect(calls).toEqual(['s-0004', 's-0001']);
  });

  it('bounds creation time: after inclusive, before exclusive', () => {
    const sessions = Array.from({ length: 6 }, (_, n) => session(n)); // T0 + n minutes
    const at = (n: number) => new Date(T0 + n * 60_000).toISOString();
    expect(ids(findSessions(sessions, idle, { after: at(2) }).sessions)).toEqual(['s-0005', 's-0004', 's-0003', 's-0002']);
    expect(ids(findSessions(sessions, idle, { before: at(2) }).sessions)).toEqual(['s-0001', 's-0000']);
    expect(ids(findSessions(sessions, idle, { after: at(2), before: at(4) }).sessions)).toEqual(['s-0003', 's-0002']);
    expect(ids(findSessions(sessions, idle, { after: at(2), before: new Date(T0 + 2 * 60_000 + 1).toISOString() }).sessions)).toEqual(['s-0002']);
    // The same instant written with an offset.
    expect(ids(findSessions(sessions, idle, { after: '2030-01-01T07:03:00+07:00' }).sessions)).toEqual(['s-0005', 's-0004', 's-0003']);
    // A date alone is UTC midnight.
    expect(findSessions(sessions, idle, { before: '2030-01-01' }).sessions).toHaveLength(0);
    expect(findSessions(sessions, idle, { after: '2030-01-01' }).sessions).toHaveLength(6);
  });

  it('pages within a date range', () => {
    const sessions = Array.from({ length: 20 }, (_, n) => session(n));
    const filters = { after: new Date(T0 + 5 * 60_000).toISOString(), before: new Date(T0 + 15 * 60_000).toISOString() };
    for (let limit = 1; limit <= 11; limit++) {
      expect(ids(allPages(sessions, filters, limit).flat())).toEqual(Array.from({ length: 10 }, (_, k) => session(14 - k).id));
    }
  });

  it('rejects inverted ranges and unparsable dates', () => {
    const sessions = [session(1)];
    expectRejection(() => findSessions(sessions, idle, { after: '2030-01-02', before: '2030-01-01' }), 'invalid_arguments');
    expectRejection(() => findSessions(sessions, idle, { after: '2030-01-01T00:00:00Z', before: '2030-01-01' }), 'invalid_arguments');
    for (const bad of ['yesterday', '2030-02-30', '2030-13-01', '2030-01-01T10:00', '2030-01-01T24:00Z', '2030-01-01 10:00Z', '1/2/2030', '']) {
      const e = expectRejection(() => findSessions(sessions, idle, { after: bad }), 'invalid_arguments');
      expect(e.message).toContain('after');
      expectRejection(() => findSessions(sessions, idle, { before: bad }), 'invalid_arguments');
    }
  });

  it('rejects malformed filter values', () => {
    const sessions = [session(1)];
    expectRejection(() => findSessions(sessions, idle, { archived: 'yes' as unknown as boolean }), 'invalid_arguments');
    expectRejection(() => findSessions(sessions, idle, { query: 5 as unknown as string }), 'invalid_arguments');
    expectRejection(() => findSessions(sessions, idle, { labels: 'bug' as unknown as string[] }), 'invalid_arguments');
  });
});

describe('parseInstant', () => {
  it('reads dates and zoned date-times exactly', () => {
    expect(parseInstant('2030-01-31', 'x')).toBe(Date.parse('2030-01-31T00:00:00Z'));
    expect(parseInstant('2030-01-31T09:30Z', 'x')).toBe(Date.parse('2030-01-31T09:30:00Z'));
    expect(parseInstant('2030-01-31T09:30:15.5-02:30', 'x')).toBe(Date.parse('2030-01-31T12:00:15.500Z'));
    expect(parseInstant('2030-01-31T09:30:15.123456789Z', 'x')).toBe(Date.parse('2030-01-31T09:30:15.123Z'));
    expect(parseInstant('2028-02-29', 'x')).toBe(Date.parse('2028-02-29T00:00:00Z'));
    expect(() => parseInstant('2029-02-29', 'x')).toThrow(ControllerError);
    expect(() => parseInstant(20300101, 'x')).toThrow(ControllerError);
    expect(() => parseInstant('2030-01-01T10:00+24:00', 'x')).toThrow(ControllerError);
  });
});
