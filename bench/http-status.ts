/**
 * Tail latency and throughput of `droid_get_session_status` over the HTTP
 * transport, the built server as its own process on one seeded session, so
 * no droid turn is involved: the figures are transport + MCP + controller
 * cost.
 *
 * The goal (issue 39): callers need p99 <= 20 ms at 16 clients, in ROUNDS
 * rounds of RUNS runs: each round a fresh server, warmed up, then RUNS
 * measured windows; a round meets the goal when every one of its runs does.
 * It is judged with socket-level clients (raw-http.ts: prebuilt request
 * bytes, keep-alive, the answer read by its Content-Length), as issue 19
 * decided: the callers run on their own machines, and 16 SDK clients in
 * this process take more CPU per call than the server does, on the same two
 * cores, so their row measures the clients. (Issues 12 and 19 also asked
 * for >= 0.5x the throughput of stdio; issue 39 retired that ratio, and the
 * stdio rows with it.)
 *
 * Two rows before the rounds, with no goal, show what stock clients cost:
 * 16 MCP SDK clients (each with its own connection, the SDK's own callTool)
 * and node:http's client. The cpu columns are milliseconds of CPU per
 * measured call, of the server process and of this (client) process, both
 * on the same machine.
 *
 * Run: npm run build && node dist/bench/http-status.js
 */
import { readFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { Log } from '../src/util/logger.js';
import type { RunRecord, SessionRecord } from '../src/shared/records.js';
import { StateStore } from '../src/store/store.js';
import { McpDriver } from '../src/testbed/mcp-driver.js';
import { freePort, readyPort, spawnServer, stopServer } from '../src/testbed/server-process.js';
import { recordGoal } from './goals.js';
import { postBytes, rawHttpLane } from './raw-http.js';

/** Any executable satisfies start-up; status never runs it. */
const DROID = fileURLToPath(new URL('../../node_modules/@factory/cli-linux-x64/bin/droid', import.meta.url));
const CONCURRENCY = 16;
/** The goal (issue 39): p99 at CONCURRENCY clients. */
const P99_GOAL_MS = 20;
/** Rounds judged, each a fresh server: the goal must hold in every one. */
const ROUNDS = 3;
/** Measured windows (runs) per round: the goal must hold in every one. */
const RUNS = 3;
const RUN_MS = 3_000;
/**
 * Warm-up of each server before anything is measured. After 1 s a fresh HTTP
 * server still spent 0.94-1.07 ms of CPU per call, after 4 s 0.53-0.72 (V8 is
 * still compiling the longer HTTP path): the figures are those of a server
 * that has been up a while, as callers meet it.
 */
const WARMUP_MS = 4_000;
/** Each row with no goal (lean clients). */
const MEASURE_MS = 5_000;
const AT = '2030-01-01T00:00:00.000Z';
const quiet: Log = { info() {}, warn() {}, error() {} };

export interface Figures {
  label: string;
  calls: number;
  rps: number;
  p50: number;
  p99: number;
  /** CPU ms per measured call: the server process, and this process (the clients). */
  serverCpu?: number;
  clientCpu?: number;
}

interface Bed {
  base: string;
  session: string;
  config(extra: Record<string, unknown>): Promise<string>;
}

async function makeBed(): Promise<Bed> {
  const base = await mkdtemp(join(tmpdir(), 'droid-mcp-bench-http-'));
  const approved = join(base, 'approved');
  const state = join(base, 'state');
  await mkdir(approved);
  await mkdir(state, { mode: 0o700 });
  const session = randomUUID();
  const run = `${session}-r1`;
  const store = await StateStore.open(state, { logger: quiet });
  const sessionRecord: SessionRecord = {
    id: session,
    createdAt: AT,
    updatedAt: AT,
    workspace: approved,
    title: 'bench',
    labels: ['bench'],
    archived: false,
    replyTo: null,
    droidSessionId: null,
    headRunId: run,
    factoryTitle: null,
  };
  const runRecord: RunRecord = {
    id: run,
    sessionId: session,
    seq: 1,
    kind: 'create',
    requestKey: 'bench-1',
    fingerprint: 'a'.repeat(64),
    interrupt: false,
    settings: { model: 'model-a', autonomy: 'medium', reasoningEffort: 'high' },
    state: 'succeeded',
    acceptedAt: AT,
    startedAt: AT,
    endedAt: AT,
    cancelReason: null,
    reason: 'completed',
    error: null,
    usage: { inputTokens: 1200, outputTokens: 340, cacheCreationTokens: 0, cacheReadTokens: 800, thinkingTokens: 50, factoryCredits: null },
    preview: 'Done: updated the parser and added tests.',
    needsAttention: false,
    permissionsDeclined: [],
    questions: [],
    predecessorFailure: null,
    events: [{ at: AT, kind: 'tool_finished', detail: 'Read src/parser.ts: ok' }],
    hasResult: false,
  };
  await store.commit({ sessions: [sessionRecord], runs: [runRecord] });
  await store.close();
  let n = 0;
  return {
    base,
    session,
    async config(extra) {
      const path = join(base, `config-${++n}.json`);
      await writeFile(path, JSON.stringify({ approvedDirectories: [approved], stateDirectory: state, droidPath: DROID, ...extra }), { mode: 0o600 });
      return path;
    },
  };
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

/** User + system CPU time of a process, in ms (Linux /proc; 100 ticks a second). */
function processCpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  // After "pid (comm) ": state is field 0, utime 11, stime 12.
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

function ownCpuMs(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
}

interface Window {
  warmupMs: number;
  measureMs: number;
}

/** A measured window's raw figures, so windows can be joined (interleaved rounds). */
interface Measured {
  samples: number[];
  measureMs: number;
  serverCpuMs?: number;
  clientCpuMs?: number;
}

/**
 * `lanes` loops calling `call` back to back; only calls started after the
 * warm-up count. With `serverPid`, CPU is taken over the measured window.
 */
async function measureWindow(lanes: number, call: (lane: number) => Promise<void>, serverPid: number | undefined, window: Window): Promise<Measured> {
  const samples: number[] = [];
  const warmEnd = performance.now() + window.warmupMs;
  const end = warmEnd + window.measureMs;
  let cpuAtStart: [number, number] | undefined;
  const markCpu = () => (cpuAtStart = serverPid === undefined ? undefined : [processCpuMs(serverPid), ownCpuMs()]);
  const mark = window.warmupMs > 0 ? setTimeout(markCpu, window.warmupMs) : (markCpu(), undefined);
  await Promise.all(
    Array.from({ length: lanes }, async (_, lane) => {
      for (let t = performance.now(); t < end; t = performance.now()) {
        await call(lane);
        if (t >= warmEnd) samples.push(performance.now() - t);
      }
    }),
  );
  clearTimeout(mark);
  const measured: Measured = { samples, measureMs: window.measureMs };
  if (serverPid !== undefined && cpuAtStart !== undefined) {
    measured.serverCpuMs = processCpuMs(serverPid) - cpuAtStart[0];
    measured.clientCpuMs = ownCpuMs() - cpuAtStart[1];
  }
  return measured;
}

/** The figures of one or more measured windows taken together. */
function figuresOf(label: string, parts: readonly Measured[]): Figures {
  const sorted = parts.flatMap((p) => p.samples).sort((a, b) => a - b);
  const seconds = parts.reduce((sum, p) => sum + p.measureMs, 0) / 1000;
  const figures: Figures = { label, calls: sorted.length, rps: sorted.length / seconds, p50: percentile(sorted, 50), p99: percentile(sorted, 99) };
  if (sorted.length > 0 && parts.every((p) => p.serverCpuMs !== undefined)) {
    figures.serverCpu = parts.reduce((sum, p) => sum + p.serverCpuMs!, 0) / sorted.length;
    figures.clientCpu = parts.reduce((sum, p) => sum + p.clientCpuMs!, 0) / sorted.length;
  }
  return figures;
}

async function drive(label: string, lanes: number, call: (lane: number) => Promise<void>, serverPid?: number): Promise<Figures> {
  return figuresOf(label, [await measureWindow(lanes, call, serverPid, { warmupMs: WARMUP_MS, measureMs: MEASURE_MS })]);
}

function statusCall(client: Client, session: string): () => Promise<void> {
  return async () => {
    const result = await client.callTool({ name: 'droid_get_session_status', arguments: { session } });
    if (result.isError) throw new Error(`status failed: ${JSON.stringify(result.content)}`);
  };
}

// info: the "ready" line is what tells the bench the listener is up.
const env = { ...process.env, DROID_MCP_LOG_LEVEL: 'info' } as Record<string, string>;

/** Runs `rows` against the built server over HTTP (its own process, a fresh token), then stops it. */
async function withHttpServer(bed: Bed, rows: (port: number, token: string, pid: number | undefined) => Promise<Figures[]>): Promise<Figures[]> {
  const token = randomBytes(32).toString('base64url');
  const tokenFile = join(bed.base, 'token');
  await writeFile(tokenFile, `${token}\n`, { mode: 0o600 });
  const child = spawnServer(await bed.config({ transport: 'http', port: await freePort(), tokenFile }), env);
  try {
    return await rows(await readyPort(child), token, child.pid);
  } finally {
    await stopServer(child, 30_000);
  }
}

const leanHttpRow = (bed: Bed, port: number, token: string, pid: number | undefined) =>
  drive(`http, ${CONCURRENCY} node:http clients`, CONCURRENCY, leanStatusCall(port, token, bed.session), pid);

/** Socket-level clients (raw-http.ts), one keep-alive connection per lane; `call(lane)` checks its answer. */
async function openRawHttpLanes(bed: Bed, port: number, token: string): Promise<{ call(lane: number): Promise<void>; close(): void }> {
  const lanes = await Promise.all(
    Array.from({ length: CONCURRENCY }, (_, lane) => {
      const body = JSON.stringify({
        jsonrpc: '2.0',
        id: lane + 1,
        method: 'tools/call',
        params: { name: 'droid_get_session_status', arguments: { session: bed.session } },
      });
      return rawHttpLane(port, postBytes(port, '/mcp', { ...statusHeaders(token), 'content-type': 'application/json' }, body));
    }),
  );
  return {
    async call(lane) {
      const { status, body } = await lanes[lane]!.call();
      const answer = JSON.parse(body) as { id?: number; result?: { isError?: boolean } };
      if (status !== 200 || answer.id !== lane + 1 || answer.result === undefined || answer.result.isError !== undefined) {
        throw new Error(`status failed: ${status} ${body.slice(0, 300)}`);
      }
    },
    close: () => lanes.forEach((lane) => lane.close()),
  };
}

/** CONCURRENCY MCP SDK clients (the SDK's own callTool, so the row measures the SDK and nothing of the driver). */
async function sdkHttpRow(bed: Bed, port: number, token: string, pid: number | undefined): Promise<Figures> {
  const clients = await Promise.all(Array.from({ length: CONCURRENCY }, () => McpDriver.http(`http://127.0.0.1:${port}/mcp`, token)));
  try {
    const calls = clients.map((c) => statusCall(c.client, bed.session));
    return await drive(`http, ${CONCURRENCY} SDK clients`, CONCURRENCY, (lane) => calls[lane]!(), pid);
  } finally {
    await Promise.all(clients.map((c) => c.close()));
  }
}

function statusHeaders(token: string): Record<string, string> {
  return { accept: 'application/json, text/event-stream', authorization: `Bearer ${token}`, 'mcp-protocol-version': '2025-06-18' };
}

/**
 * A client that costs as little as HTTP allows: one keep-alive socket per
 * lane, a prebuilt tools/call body, the answer checked for its id and isError.
 */
function leanStatusCall(port: number, token: string, session: string): (lane: number) => Promise<void> {
  const agent = new Agent({ keepAlive: true, maxSockets: CONCURRENCY });
  const headers = { 'content-type': 'application/json', ...statusHeaders(token) };
  let next = 0;
  return () =>
    new Promise<void>((resolve, reject) => {
      const id = ++next;
      const body = JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'droid_get_session_status', arguments: { session } } });
      const req = request({ host: '127.0.0.1', port, path: '/mcp', method: 'POST', agent, headers }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const answer = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { id?: number; result?: { isError?: boolean } };
          if (res.statusCode !== 200 || answer.id !== id || answer.result?.isError !== undefined) {
            reject(new Error(`status failed: ${res.statusCode} ${JSON.stringify(answer).slice(0, 300)}`));
          } else resolve();
        });
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end(body);
    });
}

/**
 * One judged round: a fresh server, CONCURRENCY socket-level clients,
 * warmed up, then RUNS measured windows of RUN_MS, each run's figures its own.
 */
async function judgedRound(bed: Bed, round: number): Promise<Figures[]> {
  return withHttpServer(bed, async (port, token, pid) => {
    const lanes = await openRawHttpLanes(bed, port, token);
    try {
      const call = (lane: number) => lanes.call(lane);
      await measureWindow(CONCURRENCY, call, undefined, { warmupMs: WARMUP_MS, measureMs: 0 });
      const runs: Figures[] = [];
      for (let run = 1; run <= RUNS; run++) {
        runs.push(
          figuresOf(`http, ${CONCURRENCY} clients (raw), round ${round} run ${run}`, [
            await measureWindow(CONCURRENCY, call, pid, { warmupMs: 0, measureMs: RUN_MS }),
          ]),
        );
      }
      return runs;
    } finally {
      lanes.close();
    }
  });
}

export async function main(): Promise<Figures[]> {
  console.log(`droid_get_session_status over HTTP, ${CONCURRENCY} clients; built server as its own process, ${WARMUP_MS} ms warm-up before each row and round`);
  const bed = await makeBed();
  let lean: Figures[];
  const rounds: Figures[][] = [];
  try {
    // One after the other: a state directory has a single owner at a time.
    lean = await withHttpServer(bed, async (port, token, pid) => [await sdkHttpRow(bed, port, token, pid), await leanHttpRow(bed, port, token, pid)]);
    for (let i = 1; i <= ROUNDS; i++) rounds.push(await judgedRound(bed, i));
  } finally {
    await rm(bed.base, { recursive: true, force: true });
  }
  console.log(
    `${'clients'.padEnd(40)} ${'calls'.padStart(6)} ${'rps'.padStart(8)} ${'p50(ms)'.padStart(9)} ${'p99(ms)'.padStart(8)}${'cpu ms/call server'.padStart(19)} ${'client'.padStart(7)}`,
  );
  const cpu = (ms: number | undefined) => (ms === undefined ? '-' : ms.toFixed(3));
  const row = (f: Figures) =>
    console.log(
      `${f.label.padEnd(40)} ${String(f.calls).padStart(6)} ${f.rps.toFixed(0).padStart(8)} ${f.p50.toFixed(2).padStart(9)} ${f.p99.toFixed(2).padStart(8)}` +
        `${cpu(f.serverCpu).padStart(19)} ${cpu(f.clientCpu).padStart(7)}`,
    );
  console.log(`stock clients, no goal (their own CPU shares the server's two cores), ${MEASURE_MS} ms measured per row:`);
  lean.forEach(row);
  console.log(`${ROUNDS} judged rounds, each a fresh server, ${RUNS} runs of ${RUN_MS} ms:`);
  rounds.flat().forEach(row);
  console.log(`goal (issue 39): http, ${CONCURRENCY} concurrent clients: p99 <= ${P99_GOAL_MS} ms in every run, ${ROUNDS} rounds of ${RUNS}`);
  let roundsMet = 0;
  rounds.forEach((runs, i) => {
    const met = runs.every((f) => f.p99 <= P99_GOAL_MS);
    if (met) roundsMet++;
    console.log(`  round ${i + 1} of ${ROUNDS}: p99 ${runs.map((f) => f.p99.toFixed(2)).join(' / ')} ms -> ${met ? 'met' : 'NOT met'}`);
    recordGoal({
      name: `http status, ${CONCURRENCY} clients, round ${i + 1} of ${ROUNDS}`,
      measured: `p99 ${runs.map((f) => f.p99.toFixed(1)).join('/')} ms`,
      goal: `p99 <= ${P99_GOAL_MS} ms, ${RUNS}/${RUNS} runs`,
      met,
    });
  });
  console.log(`  -> ${roundsMet === ROUNDS ? 'met' : 'NOT met'}: ${roundsMet} of ${ROUNDS} rounds`);
  return [...lean, ...rounds.flat()];
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  main().catch((err: unknown) => {
    console.error(err);
    process.exitCode = 1;
  });
}
