import { describe, expect, it } from 'vitest';
import { SessionReader, type ReadableStore } from '../../../../src/controller/sessions/session-reader.js';
import type { RunRecord, RunResultFile, SessionRecord } from '../../../../src/shared/records.js';
import { runRecord, sessionRecord } from '../../../support/records.js';

function store(runs: RunRecord[], sessions: SessionRecord[]) {
  const reads: string[] = [];
  const s: ReadableStore = {
    sessions: new Map(sessions.map((x) => [x.id, x])),
    runs: new Map(runs.map((r) => [r.id, r])),
    runsBySession: (id) => runs.filter((r) => r.sessionId === id),
    readResult: async (runId): Promise<RunResultFile> => {
      reads.push(runId);
      return { runId, finalText: 'x', transcript: [{ kind: 'assistant', text: `text of ${runId}` }], permissionsApproved: [], diagnostics: [], stderrTail: '' };
    },
  };
  return { s, reads };
}

describe('SessionReader', () => {
  it('reads each immutable result file once while paging', async () => {
    const runs = [runRecord({ sessionId: 'a', seq: 1 }), runRecord({ sessionId: 'a', seq: 2 })];
    const { s, reads } = store(runs, [sessionRecord({ id: 'a', headRunId: 'a-r2' })]);
    const reader = new SessionReader(s, { live: () => undefined, shown: (r) => r }, async (p) => p, { warn() {} });
    const first = await reader.read('a', undefined, 1);
    const second = await reader.read('a', first.nextCursor!, 1);
    expect([...first.items, ...second.items].map((i) => (i.type === 'assistant_text' ? i.text : i.type))).toEqual(['text of a-r1', 'text of a-r2']);
    expect(reads).toEqual(['a-r1', 'a-r2']);
  });

  it("sums a session's spend from its records when the store has no run facts: tokens, credits, a running turn's live figure", async () => {
    const usage = (inputTokens: number, factoryCredits: number | null) => ({
      inputTokens,
      outputTokens: 10,
      cacheCreationTokens: 1,
      cacheReadTokens: 2,
      thinkingTokens: 3,
      factoryCredits,
    });
    const runs = [
      runRecord({ sessionId: 'a', seq: 1, usage: usage(1000, 0.5) }),
      runRecord({ sessionId: 'a', seq: 2, usage: usage(200, 0.25) }),
      runRecord({ sessionId: 'b', seq: 1, usage: usage(1100, null) }),
      // Its record has no figure yet; the live one counts.
      runRecord({ sessionId: 'c', seq: 1, state: 'running', hasResult: false, usage: null }),
    ];
    const sessions = ['a', 'b', 'c'].map((id) => sessionRecord({ id, headRunId: id === 'a' ? 'a-r2' : `${id}-r1` }));
    const { s } = store(runs, sessions);
    const live = (id: string) => (id === 'c-r1' ? { events: [], partialText: '', usage: usage(5000, 2) } : undefined);
    const reader = new SessionReader(s, { live, shown: (r) => r }, async (p) => p, { warn() {} });
    const ids = async (filters: { tokensAbove?: number; creditsAbove?: number }) =>
      (await reader.find(filters, undefined, 10)).sessions.map((v) => v.session).sort();
    // a: 1,016 + 216 tokens and 0.75 credits; b: 1,116 and none; c: 5,016 and 2 (live).
    expect(await ids({ tokensAbove: 1231 })).toEqual(['a', 'c']);
    expect(await ids({ tokensAbove: 1232 })).toEqual(['c']);
    expect(await ids({ tokensAbove: 1115 })).toEqual(['a', 'b', 'c']);
    expect(await ids({ creditsAbove: 0.74 })).toEqual(['a', 'c']);
    expect(await ids({ creditsAbove: 0.75 })).toEqual(['c']);
    expect(await ids({ creditsAbove: 0 })).toEqual(['a', 'c']);
  });

  it('shows live progress events on status without storing them', () => {
    const runs = [runRecord({ sessionId: 'a', seq: 1, state: 'running', hasResult: false })];
    const { s } = store(runs, [sessionRecord({ id: 'a', headRunId: 'a-r1' })]);
    const events = new Map([['a-r1', [{ at: 't', kind: 'tool_started', detail: 'Read x' }]]]);
    const live = (id: string) => (events.has(id) ? { events: events.get(id)!, partialText: '', usage: null } : undefined);
    const reader = new SessionReader(s, { live, shown: (r) => r }, async (p) => p, { warn() {} });
    expect(reader.status('a')).toMatchObject({ agentState: 'working', latestRun: { events: [{ detail: 'Read x' }] } });
    expect(runs[0]!.events).toEqual([]);
  });
});
