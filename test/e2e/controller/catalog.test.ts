/**
 * The model catalog in the built server with the real droid CLI (issue 19):
 * a turn's own session answer refreshes the catalog, the catalog is read
 * again ahead of its TTL in the background (counted from that answer), and a
 * create after a pause longer than the TTL starts no catalog read of its own.
 * The background read's droid runs at a lower CPU priority than turns.
 * Seen through the server's debug log of catalog events (cli.ts logCatalog).
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { script } from '../../../src/testbed/scripted-model.js';
import { startServer, type RunningServer } from '../../support/mcp-server.js';
import { waitForNoProcesses } from '../../support/processes.js';
import { droidProcesses, makeContext, type E2EContext } from '../../support/e2e-context.js';
import { readFileSync } from 'node:fs';
import { getPriority } from 'node:os';

const TTL = 5_000;
let ctx: E2EContext;
let server: RunningServer | undefined;
const TAG = `e2e-catalog-${process.pid}-${Date.now()}`;

beforeAll(async () => {
  ctx = await makeContext(TAG);
});
afterEach(async () => {
  await server?.close();
  server = undefined;
  await waitForNoProcesses(TAG, 15_000);
});
afterAll(async () => {
  await ctx?.cleanup();
});

type Event =
  { kind: 'read'; background: boolean; models: number; startedAt: number; at: number } | { kind: 'offered'; models: number; at: number } | { kind: string };

/** The catalog events the server logged so far, in order. */
function catalogEvents(s: RunningServer): Event[] {
  const events: Event[] = [];
  for (const line of s.stderr().split('\n')) {
    if (!line.includes('"catalog"')) continue;
    try {
      const entry = JSON.parse(line) as { catalog?: Event };
      if (entry.catalog) events.push(entry.catalog);
    } catch {
      // not a log line
    }
  }
  return events;
}

const reads = (s: RunningServer) => catalogEvents(s).filter((e): e is Extract<Event, { kind: 'read' }> => e.kind === 'read');
const offers = (s: RunningServer) => catalogEvents(s).filter((e): e is Extract<Event, { kind: 'offered' }> => e.kind === 'offered');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until<T>(get: () => T | undefined, timeoutMs: number): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const value = get();
    if (value !== undefined) return value;
    if (Date.now() > end) throw new Error(`not reached in ${timeoutMs} ms; server log:\n${server?.stderr().slice(-4_000)}`);
    await sleep(25);
  }
}

/** CPU niceness of every live droid process of this test (bwrap's halves included). */
function droidNiceness(): number[] {
  const seen: number[] = [];
  for (const pid of droidProcesses(TAG).keys()) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      seen.push(Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]));
    } catch {
      // gone
    }
  }
  return seen;
}

let keys = 0;
async function turn(s: RunningServer, name: string): Promise<void> {
  const created = await s.ok<{ metadata: { session: string } }>('droid_create_session', {
    requestKey: `catalog-${++keys}`,
    replyTo: null,
    workspace: ctx.workspace(name),
    autonomy: 'off',
    prompt: `hello ${script({ text: 'ok' })}`,
  });
  await s.ok('droid_wait_for_sessions', { sessions: [created.metadata.session], timeoutSeconds: 60 });
}

describe('model catalog (real droid, TTL 5 s)', () => {
  it("is refreshed by a turn's own answer, read ahead from it in the background, and a create after a pause reads nothing", async () => {
    server = await startServer(ctx.config({ modelCacheTtlMs: TTL }), { ...ctx.env, DROID_MCP_LOG_LEVEL: 'debug' });
    const listed = await server.ok<{ models: unknown[] }>('droid_models');
    const first = await until(() => reads(server!)[0], 5_000);
    expect(first.background).toBe(false);
    // The turn's answer comes a while after the read, so the two schedules differ.
    await sleep(1_000);
    await turn(server, 'after-read');
    const offered = await until(() => offers(server!)[0], 5_000);
    expect(offered.models).toBe(listed.models.length);
    expect(offered.at).toBeGreaterThan(first.at);
    // A background read follows, its droid at a lower CPU priority.
    const niceness = new Set<number>();
    await until(() => {
      for (const n of droidNiceness()) niceness.add(n);
      return reads(server!).find((r) => r.startedAt > offered.at);
    }, 3 * TTL);
    // Nobody waits for it: its droid yields the CPU to turns (model-catalog.ts BACKGROUND_NICENESS).
    // Ten steps nicer than this test runs at (CI may itself run niced).
    expect([...niceness]).toContain(Math.min(19, getPriority() + 10));
    // Each background read starts 80 % of the TTL after the latest refresh, the turn's answer included, not after the last read.
    const refreshes = [...reads(server).map((r) => r.at), ...offers(server).map((o) => o.at)];
    for (const read of reads(server).slice(1)) {
      expect(read.background).toBe(true);
      const latest = Math.max(...refreshes.filter((at) => at <= read.startedAt));
      expect(read.startedAt - latest).toBeGreaterThanOrEqual(0.8 * TTL - 50);
    }
    // A pause past the TTL of everything a caller caused: the create finds the catalog fresh.
    await until(() => (Date.now() > offered.at + TTL + 500 ? true : undefined), 2 * TTL);
    await turn(server, 'after-pause');
    expect(reads(server).filter((r) => !r.background)).toEqual([first]);
  });
});
