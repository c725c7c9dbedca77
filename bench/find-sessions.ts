/**
 * Latency of findSessions over 10,000 synthetic sessions (10 runs each),
 * with and without a text query. The summary is computed from the runs with
 * the real summarizeRuns, as the controller would, so a query that must read
 * previews pays that cost (one row uses cached summaries instead, to
 * separate the caller's cost from find's own). Target (issue 4): find p99 under 50 ms.
 *
 * Run: npm run build && node dist/bench/find-sessions.js
 */
import { fileURLToPath } from 'node:url';
import { findSessions, SessionIndex, type FindFilters, type SessionSummary } from '../src/controller/sessions/find.js';
import { summarizeRuns } from '../src/controller/sessions/views.js';
import type { RunRecord, RunState, SessionRecord } from '../src/shared/records.js';
import { runRecord } from '../test/support/records.js';

const SESSIONS = 10_000;
const RUNS_PER_SESSION = 10;
const WARMUP = 20;
const CALLS = 200;
const T0 = Date.parse('2030-01-01T00:00:00.000Z');
const WORDS = ['parser', 'deploy', 'refactor', 'tests', 'cache', 'schema', 'router', 'docs', 'auth', 'queue', 'build', 'lint'];

/** A small deterministic generator, so runs are comparable. */
function rng(seed: number): () => number {
  let x = seed;
  return () => {
    x = (x * 1103515245 + 12345) % 2147483648;
    return x / 2147483648;
  };
}

function seed(): { sessions: SessionRecord[]; runs: Map<string, RunRecord[]> } {
  const rand = rng(42);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(rand() * items.length)]!;
  const sessions: SessionRecord[] = [];
  const runs = new Map<string, RunRecord[]>();
  for (let n = 0; n < SESSIONS; n++) {
    const id = `s-${n.toString(36).padStart(5, '0')}`;
    const createdAt = new Date(T0 + n * 37_000).toISOString();
    const title = rand() < 0.7 ? `${pick(WORDS)} ${pick(WORDS)} #${n}` : null;
    const labels = [...new Set(Array.from({ length: Math.floor(rand() * 4) }, () => pick(['bug', 'web', 'api', 'ops', 'team:core', 'p1'])))].sort();
    sessions.push({
      id,
      createdAt,
      updatedAt: createdAt,
      workspace: `/srv/repos/${pick(['app', 'api', 'web', 'infra'])}${rand() < 0.5 ? '/packages/core' : ''}`,
      title,
      labels,
      archived: rand() < 0.1,
      replyTo: null,
      droidSessionId: null,
      headRunId: `${id}-r${RUNS_PER_SESSION}`,
      factoryTitle: null,
    });
    const list: RunRecord[] = [];
    for (let seq = 1; seq <= RUNS_PER_SESSION; seq++) {
      const last = seq === RUNS_PER_SESSION;
      const state: RunState = last && rand() < 0.05 ? 'running' : last && rand() < 0.02 ? 'unknown' : 'succeeded';
      // Previews are bounded to 2,000 characters upstream; most are shorter.
      const preview = Array.from({ length: 20 + Math.floor(rand() * 250) }, () => pick(WORDS))
        .join(' ')
        .slice(0, 2_000);
      list.push(
        runRecord({
          sessionId: id,
          seq,
          requestKey: `${id}-k${seq}`,
          state,
          acceptedAt: createdAt,
          startedAt: createdAt,
          endedAt: state === 'running' ? null : createdAt,
          preview,
        }),
      );
    }
    runs.set(id, list);
  }
  return { sessions, runs };
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

function measure(fn: () => unknown): { p50: number; p99: number } {
  for (let i = 0; i < WARMUP; i++) fn();
  const times: number[] = [];
  for (let i = 0; i < CALLS; i++) {
    const start = process.hrtime.bigint();
    fn();
    times.push(Number(process.hrtime.bigint() - start) / 1e6);
  }
  times.sort((a, b) => a - b);
  return { p50: percentile(times, 50), p99: percentile(times, 99) };
}

export function main(): void {
  const { sessions, runs } = seed();
  const view = (s: SessionRecord): SessionSummary => summarizeRuns(s.headRunId, runs.get(s.id)!);
  // Summaries kept by the caller (say, refreshed on each commit): separates
  // the cost of reading 100,000 run records from find's own.
  const cache = new Map(sessions.map((s) => [s.id, view(s)]));
  const cached = (s: SessionRecord): SessionSummary => cache.get(s.id)!;
  const index = new SessionIndex(sessions);
  // A cursor half way down, to show that later pages cost the same.
  const middle = findSessions(index, view, {}, undefined, 100);
  let cursor = middle.nextCursor!;
  for (let i = 0; i < 49; i++) cursor = findSessions(index, view, {}, cursor, 100).nextCursor!;

  const cases: Array<[string, () => unknown]> = [
    ['no filters, first page', () => findSessions(index, view, {})],
    ['no filters, page 51 of 100 (cursor)', () => findSessions(index, view, {}, cursor, 100)],
    ['labels + workspace', () => findSessions(index, view, { labels: ['bug', 'web'], workspace: '/srv/repos/api' })],
    ['state: working (view per session)', () => findSessions(index, view, { state: 'working' })],
    ['date range (one week, mid-history)', () => findSessions(index, view, { after: '2030-01-30T00:00:00Z', before: '2030-02-06T00:00:00Z' })],
    ['text query, common ("parser")', () => findSessions(index, view, { query: 'Parser' })],
    ['text query, no match (full scan)', () => findSessions(index, view, { query: 'zebra-unicorn' })],
    ['text query, no match, cached summaries', () => findSessions(index, cached, { query: 'zebra-unicorn' })],
    ['text query, no match + workspace', () => findSessions(index, view, { query: 'zebra-unicorn', workspace: '/srv/repos/app' } satisfies FindFilters)],
    ['plain array (sorts per call), no filters', () => findSessions(sessions, view, {})],
  ];
  console.log(`findSessions over ${SESSIONS} sessions, ${SESSIONS * RUNS_PER_SESSION} runs; ${CALLS} calls each after ${WARMUP} warm-up`);
  for (const [name, fn] of cases) {
    const { p50, p99 } = measure(fn);
    console.log(`${name.padEnd(44)} p50 ${p50.toFixed(3).padStart(8)} ms   p99 ${p99.toFixed(3).padStart(8)} ms`);
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) main();
