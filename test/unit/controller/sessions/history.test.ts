/**
 * Paged session history: what each kind of run shows, when history is
 * incomplete, and cursors that visit every item once and survive new turns.
 */
import { describe, expect, it } from 'vitest';
import { encodeCursor, pageHistory, type HistoryInput, type HistoryItem } from '../../../../src/controller/sessions/history.js';
import type { TranscriptEntry } from '../../../../src/droid/turn-collector.js';
import type { RunRecord, RunResultFile } from '../../../../src/shared/records.js';
import { runRecord } from '../../../support/records.js';
import { expectRejection } from '../../../support/assertions.js';

const SESSION = 'sess-1';
const AT = '2030-01-01T00:00:00.000Z';

function run(seq: number, over: Partial<RunRecord> = {}): RunRecord {
  return runRecord({ id: `run-${seq}`, sessionId: SESSION, seq, requestKey: `key-${seq}`, acceptedAt: AT, startedAt: AT, endedAt: AT, ...over });
}

function said(text: string): TranscriptEntry {
  return { kind: 'assistant', text };
}

function tool(id: string, over: Partial<Extract<TranscriptEntry, { kind: 'tool' }>> = {}): TranscriptEntry {
  return { kind: 'tool', toolUseId: id, name: 'Read', input: '{"path":"a.ts"}', status: 'done', isError: false, result: 'ok', ...over };
}

function result(runId: string, transcript: TranscriptEntry[]): RunResultFile {
  return { runId, finalText: '', transcript, permissionsApproved: [], diagnostics: ['private diagnostic'], stderrTail: 'PRIVATE STDERR' };
}

function input(runs: RunRecord[], results: RunResultFile[], over: Partial<HistoryInput> = {}): HistoryInput {
  return {
    sessionId: SESSION,
    runs,
    results: new Map(results.map((r) => [r.runId, r])),
    livePartialText: new Map(),
    ...over,
  };
}

/** Follows nextCursor from the start, checking each page's size. */
function readAll(base: HistoryInput, limit: number): { items: HistoryItem[]; pages: number } {
  const items: HistoryItem[] = [];
  let cursor: string | undefined;
  let pages = 0;
  for (;;) {
    const page = pageHistory({ ...base, limit, ...(cursor === undefined ? {} : { cursor }) });
    pages++;
    expect(page.items.length).toBeLessThanOrEqual(limit);
    if (page.nextCursor !== null) expect(page.items.length).toBe(limit);
    items.push(...page.items);
    if (page.nextCursor === null) return { items, pages };
    cursor = page.nextCursor;
    if (pages > 10_000) throw new Error('cursor loop');
  }
}

describe('history items', () => {
  it('maps transcript entries of each run in order, then its notices', () => {
    const runs = [
      run(1, {
        permissionsDeclined: [{ tool: 'Execute', summary: 'rm -rf build' }],
        questions: [{ topic: 'Scope', question: 'Which files?', options: ['a', 'b'] }],
      }),
      run(2),
    ];
    const page = pageHistory(
      input(runs, [
        result('run-1', [said('looking'), tool('t1'), tool('t2', { status: 'aborted', isError: true, result: 'turn ended' }), said('done')]),
        result('run-2', [tool('t3', { status: 'open', result: undefined })]),
      ]),
    );
    expect(page.historyAvailable).toBe(true);
    expect(page.nextCursor).toBeNull();
    expect(page.items).toEqual([
      { type: 'assistant_text', run: 'run-1', text: 'looking' },
      { type: 'tool_call', run: 'run-1', toolUseId: 't1', tool: 'Read', input: '{"path":"a.ts"}', status: 'done', isError: false, result: 'ok' },
      { type: 'tool_call', run: 'run-1', toolUseId: 't2', tool: 'Read', input: '{"path":"a.ts"}', status: 'aborted', isError: true, result: 'turn ended' },
      { type: 'assistant_text', run: 'run-1', text: 'done' },
      { type: 'notice', run: 'run-1', kind: 'permission_declined', detail: 'Execute: rm -rf build' },
      { type: 'notice', run: 'run-1', kind: 'question_declined', detail: 'Scope: Which files? (options: a | b)' },
      { type: 'tool_call', run: 'run-2', toolUseId: 't3', tool: 'Read', input: '{"path":"a.ts"}', status: 'open', isError: false, result: null },
    ]);
  });

  it('has one notice per declined permission and per declined question', () => {
    const r = run(1, {
      permissionsDeclined: [
        { tool: 'Execute', summary: 'make' },
        { tool: 'Edit', summary: '' },
      ],
      questions: [
        { topic: '', question: 'Q1?', options: [] },
        { topic: 'T', question: 'Q2?', options: [] },
        { topic: 'T', question: 'Q3?', options: ['x'] },
      ],
    });
    const items = pageHistory(input([r], [result('run-1', [])])).items;
    expect(items.map((i) => (i.type === 'notice' ? `${i.kind}=${i.detail}` : i.type))).toEqual([
      'permission_declined=Execute: make',
      'permission_declined=Edit',
      'question_declined=Q1?',
      'question_declined=T: Q2?',
      'question_declined=T: Q3? (options: x)',
    ]);
  });

  it('derives outcome notices from the record', () => {
    const err = (code: string, message: string) => ({ code, message, retryable: false });
    const runs = [
      run(1, { state: 'interrupted', reason: 'cancelled' }),
      run(2, { state: 'failed', error: err('worker_failed', 'the worker exited') }),
      run(3, { state: 'timed_out', error: err('timed_out', 'deadline passed') }),
      run(4, { state: 'cancelled', cancelReason: 'cancelled', error: err('cancelled', 'cancelled while running') }),
      run(5, { state: 'unknown', hasResult: false, error: err('controller_stopped', 'outcome unknown') }),
      run(6, {
        state: 'cancelled',
        startedAt: null,
        hasResult: false,
        cancelReason: 'predecessor_failed',
        error: err('predecessor_failed', 'an earlier turn failed'),
        predecessorFailure: { runId: 'run-2', state: 'failed', error: null },
      }),
      run(7, {
        state: 'cancelled',
        startedAt: null,
        hasResult: false,
        cancelReason: 'superseded',
        error: err('superseded', 'superseded by a steering message'),
      }),
      run(8, { state: 'failed', error: null }),
    ];
    const results = [1, 2, 3, 4, 8].map((n) => result(`run-${n}`, []));
    const items = pageHistory(input(runs, results, { limit: 100 })).items;
    expect(items).toEqual([
      { type: 'notice', run: 'run-1', kind: 'interrupted', detail: 'the turn was interrupted before it finished (droid: cancelled)' },
      { type: 'notice', run: 'run-2', kind: 'failed', detail: 'worker_failed: the worker exited' },
      { type: 'notice', run: 'run-3', kind: 'timed_out', detail: 'timed_out: deadline passed' },
      { type: 'notice', run: 'run-4', kind: 'cancelled', detail: 'cancelled: cancelled while running' },
      { type: 'notice', run: 'run-5', kind: 'unknown', detail: 'controller_stopped: outcome unknown' },
      { type: 'notice', run: 'run-6', kind: 'cancelled', detail: 'predecessor_failed: an earlier turn failed (run run-2: failed)' },
      { type: 'notice', run: 'run-7', kind: 'cancelled', detail: 'superseded: superseded by a steering message' },
      { type: 'notice', run: 'run-8', kind: 'failed', detail: 'the turn ended failed' },
    ]);
  });

  it('shows a live run only as its latest partial text, and a queued run not at all', () => {
    const runs = [
      run(1),
      run(2, { state: 'running', endedAt: null, reason: null, hasResult: false }),
      run(3, { state: 'queued', startedAt: null, endedAt: null, reason: null, hasResult: false }),
    ];
    const partial = new Map([
      ['run-2', 'half a thought'],
      ['run-3', 'never shown'],
    ]);
    const page = pageHistory(input(runs, [result('run-1', [said('one')]), result('run-2', [said('stale file')])], { livePartialText: partial }));
    expect(page.items).toEqual([
      { type: 'assistant_text', run: 'run-1', text: 'one' },
      { type: 'partial_text', run: 'run-2', text: 'half a thought' },
    ]);
    expect(page.historyAvailable).toBe(true);

    for (const state of ['starting', 'cancelling'] as const) {
      const live = [run(1, { state, endedAt: null, hasResult: false })];
      expect(pageHistory(input(live, [], { livePartialText: new Map([['run-1', 'p']]) })).items).toEqual([{ type: 'partial_text', run: 'run-1', text: 'p' }]);
      expect(pageHistory(input(live, [], { livePartialText: new Map([['run-1', '']]) })).items).toEqual([]);
      expect(pageHistory(input(live, [])).items).toEqual([]);
    }
  });

  it('ignores partial text of a finished run: its transcript is the record', () => {
    const page = pageHistory(input([run(1)], [result('run-1', [said('final')])], { livePartialText: new Map([['run-1', 'stale partial']]) }));
    expect(page.items).toEqual([{ type: 'assistant_text', run: 'run-1', text: 'final' }]);
  });

  it('never carries private result fields or a user prompt', () => {
    const runs = [run(1, { state: 'failed', error: { code: 'x', message: 'boom', retryable: false } })];
    const page = pageHistory(input(runs, [result('run-1', [said('answer')])]));
    const text = JSON.stringify(page);
    expect(text).not.toContain('PRIVATE STDERR');
    expect(text).not.toContain('private diagnostic');
    expect(text).not.toContain('f'.repeat(64));
    expect(text).not.toContain('key-1');
    expect(new Set(page.items.map((i) => i.type))).toEqual(new Set(['assistant_text', 'notice']));
  });

  it('returns an empty page for a session with only queued work', () => {
    const page = pageHistory(input([run(1, { state: 'queued', startedAt: null, endedAt: null, hasResult: false })], []));
    expect(page).toEqual({ items: [], nextCursor: null, historyAvailable: true });
  });
});

describe('historyAvailable', () => {
  const unknown = run(2, { state: 'unknown', hasResult: false, error: { code: 'controller_stopped', message: 'gone', retryable: false } });

  it('is false when a run that reached droid has no result, which then shows only its notices', () => {
    const page = pageHistory(input([run(1), unknown, run(3)], [result('run-1', [said('a')]), result('run-3', [said('c')])]));
    expect(page.historyAvailable).toBe(false);
    expect(page.items.map((i) => `${i.run}:${i.type}`)).toEqual(['run-1:assistant_text', 'run-2:notice', 'run-3:assistant_text']);
  });

  it('treats a result file missing from the map, or hasResult false, as missing', () => {
    expect(pageHistory(input([run(1)], [])).historyAvailable).toBe(false);
    const page = pageHistory(input([run(1, { hasResult: false })], [result('run-1', [said('not trusted')])]));
    expect(page.historyAvailable).toBe(false);
    expect(page.items).toEqual([]);
  });

  it('is false for a started cancelled run without a result, true for one never started', () => {
    const started = run(1, { state: 'cancelled', cancelReason: 'cancelled', hasResult: false });
    expect(pageHistory(input([started], [])).historyAvailable).toBe(false);
    const dropped = run(1, { state: 'cancelled', startedAt: null, cancelReason: 'queue_lost', hasResult: false });
    expect(pageHistory(input([dropped], [])).historyAvailable).toBe(true);
  });

  it('is not affected by live or queued runs, which have no result yet', () => {
    const runs = [run(1), run(2, { state: 'running', hasResult: false }), run(3, { state: 'queued', startedAt: null, hasResult: false })];
    expect(pageHistory(input(runs, [result('run-1', [])])).historyAvailable).toBe(true);
  });

  it('is about the whole session, not just the page', () => {
    const runs = [run(1), unknown];
    const page = pageHistory(input(runs, [result('run-1', [said('a'), said('b')])], { limit: 1 }));
    expect(page.items).toHaveLength(1);
    expect(page.historyAvailable).toBe(false);
  });
});

/** A session whose runs produce varied item counts, including zero. */
function mixedSession(): HistoryInput {
  const runs: RunRecord[] = [];
  const results: RunResultFile[] = [];
  const sizes = [3, 0, 1, 5, 0, 0, 2, 7, 1];
  sizes.forEach((n, i) => {
    const seq = i + 1;
    const transcript = Array.from({ length: n }, (_, k) => (k % 2 ? tool(`t${seq}.${k}`) : said(`r${seq} item ${k}`)));
    runs.push(run(seq, seq === 4 ? { questions: [{ topic: '', question: 'why?', options: [] }] } : {}));
    results.push(result(`run-${seq}`, transcript));
  });
  runs.push(run(10, { state: 'cancelled', startedAt: null, hasResult: false, cancelReason: 'superseded' }));
  runs.push(run(11, { state: 'queued', startedAt: null, endedAt: null, hasResult: false }));
  return input(runs, results);
}

describe('pagination', () => {
  it('returns every item exactly once, in order, for every page size', () => {
    const base = mixedSession();
    const all = pageHistory({ ...base, limit: 100 });
    expect(all.nextCursor).toBeNull();
    const n = all.items.length;
    expect(n).toBe(3 + 1 + 5 + 1 + 2 + 7 + 1 + 1);
    for (let limit = 1; limit <= n + 1; limit++) {
      const { items, pages } = readAll(base, limit);
      expect(items).toEqual(all.items);
      expect(pages).toBe(Math.max(1, Math.ceil(n / limit)));
    }
  });

  it('defaults to 25 items and rejects limits outside 1..100', () => {
    const transcript = Array.from({ length: 30 }, (_, k) => said(`t${k}`));
    const base = input([run(1)], [result('run-1', transcript)]);
    const first = pageHistory(base);
    expect(first.items).toHaveLength(25);
    expect(first.nextCursor).not.toBeNull();
    expect(pageHistory({ ...base, limit: 100 }).items).toHaveLength(30);
    for (const limit of [0, -1, 101, 1.5, Number.NaN]) expectRejection(() => pageHistory({ ...base, limit }), 'invalid_arguments');
  });

  it('gives no cursor when the page ends exactly at the last item', () => {
    const base = input([run(1), run(2, { state: 'queued', startedAt: null, hasResult: false })], [result('run-1', [said('a'), said('b')])]);
    expect(pageHistory({ ...base, limit: 2 }).nextCursor).toBeNull();
  });

  it('keeps a cursor valid, and pointing at the same item, while new turns are appended', () => {
    const base = mixedSession();
    const before = pageHistory({ ...base, limit: 100 }).items;
    const first = pageHistory({ ...base, limit: 7 });
    const cursor = first.nextCursor!;

    const runs = base.runs.map((r) => (r.seq === 11 ? { ...r, state: 'succeeded' as const, startedAt: AT, hasResult: true } : r));
    runs.push(run(12, { state: 'running', hasResult: false }));
    const results = new Map(base.results);
    results.set('run-11', result('run-11', [said('eleven')]));
    const grown: HistoryInput = { ...base, runs, results, livePartialText: new Map([['run-12', 'twelve so far']]) };

    expect([...first.items, ...restFrom(grown, cursor, 4)]).toEqual([
      ...before,
      { type: 'assistant_text', run: 'run-11', text: 'eleven' },
      { type: 'partial_text', run: 'run-12', text: 'twelve so far' },
    ]);
    // The same cursor still names the same next item.
    expect(pageHistory({ ...grown, cursor, limit: 1 }).items).toEqual([before[7]]);
  });

  it('resumes at the start of a turn that was live at the page boundary and has since finished', () => {
    const live = run(2, { state: 'running', endedAt: null, hasResult: false });
    const base = input([run(1), live], [result('run-1', [said('a'), said('b')])], { livePartialText: new Map([['run-2', 'partial']]) });
    const first = pageHistory({ ...base, limit: 2 });
    expect(first.items.map((i) => i.type)).toEqual(['assistant_text', 'assistant_text']);
    expect(first.nextCursor).not.toBeNull();

    const done = { ...live, state: 'succeeded' as const, endedAt: AT, hasResult: true };
    const finished = input([run(1), done], [result('run-1', [said('a'), said('b')]), result('run-2', [said('x'), tool('t'), said('y')])]);
    expect(restFrom(finished, first.nextCursor!, 2).map((i) => (i.type === 'assistant_text' ? i.text : i.type))).toEqual(['x', 'tool_call', 'y']);

    // Still live, but its partial text was consumed by a completed message: nothing yet.
    const quiet = { ...base, livePartialText: new Map([['run-2', '']]) };
    expect(pageHistory({ ...quiet, cursor: first.nextCursor! })).toMatchObject({ items: [], nextCursor: null });
  });

  it('ends at a live partial text: nothing follows it now', () => {
    const base = input([run(1), run(2, { state: 'running', hasResult: false })], [result('run-1', [said('a')])], {
      livePartialText: new Map([['run-2', 'p']]),
    });
    const page = pageHistory({ ...base, limit: 2 });
    expect(page.items.map((i) => i.type)).toEqual(['assistant_text', 'partial_text']);
    expect(page.nextCursor).toBeNull();
  });
});

/** Every item after `cursor`, following cursors to the end. */
function restFrom(base: HistoryInput, cursor: string, limit: number): HistoryItem[] {
  const items: HistoryItem[] = [];
  let next: string | null = cursor;
  while (next !== null) {
    const page = pageHistory({ ...base, limit, cursor: next });
    items.push(...page.items);
    next = page.nextCursor;
  }
  return items;
}

describe('bad cursors', () => {
  const base = mixedSession();
  const good = pageHistory({ ...base, limit: 2 }).nextCursor!;
  const forge = (payload: Record<string, unknown>) => encodeCursor({ k: 'h', v: 1, s: SESSION, q: 1, i: 0, ...payload });

  it('accepts a forged but well-formed cursor at a real position', () => {
    expect(pageHistory({ ...base, cursor: forge({ q: 4, i: 2 }), limit: 1 }).items).toEqual([{ type: 'assistant_text', run: 'run-4', text: 'r4 item 2' }]);
  });

  it.each([
    ['empty', ''],
    ['not base64url', 'abc+/=='],
    ['not JSON', Buffer.from('hello').toString('base64url')],
    ['a JSON array', Buffer.from('[1,2]').toString('base64url')],
    ['too long', 'A'.repeat(5000)],
    ['another version', forge({ v: 2 })],
    ['missing kind', encodeCursor({ v: 1, s: SESSION, q: 1, i: 0 })],
    ['a find cursor', encodeCursor({ k: 'f', v: 1, f: 'x', createdAt: AT, id: 'x' })],
    ["another session's", forge({ s: 'sess-2' })],
    ['a turn that does not exist', forge({ q: 99 })],
    ['seq zero', forge({ q: 0 })],
    ['negative index', forge({ i: -1 })],
    ['fractional index', forge({ i: 0.5 })],
    ['string seq', forge({ q: '1' })],
    ['past the end of its turn', forge({ q: 1, i: 4 })],
  ])('rejects %s', (_name, cursor) => {
    const e = expectRejection(() => pageHistory({ ...base, cursor }), 'invalid_cursor');
    expect(e.retryable).toBe(false);
    expect(e.message).not.toContain(SESSION);
  });

  it('rejects a cursor of this session used with another session', () => {
    expectRejection(() => pageHistory({ ...base, sessionId: 'sess-2', runs: [], cursor: good }), 'invalid_cursor');
  });

  it('accepts the position just past a turn (its live partial text has gone)', () => {
    expect(() => pageHistory({ ...base, cursor: forge({ q: 1, i: 3 }) })).not.toThrow();
  });
});
