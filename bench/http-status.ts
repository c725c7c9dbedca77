/**
 * Throughput and tail latency of `droid_get_session_status` over the HTTP
 * transport (16 concurrent SDK clients, each with its own connection) next to
 * the same call over stdio (one client: sequential, then 16 calls in flight).
 * Both run the built server as its own process on one seeded session, so no
 * droid turn is involved: the figures are transport + MCP + controller cost.
 *
 * A second HTTP row drives the same server with a lean client (node:http,
 * keep-alive, raw JSON-RPC bodies, no MCP client), to tell the client's own
 * cost from the server's; the goal line is judged on the SDK-client row. The
 * cpu columns are milliseconds of CPU per measured call, of the server
 * process and of this (client) process, both on the same machine.
 *
 * Run: npm run build && node dist/bench/http-status.js
 */
import { spawn } from 'node:child_process';
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
import { McpDriver, SERVER_ENTRY } from '../src/testbed/mcp-driver.js';
import { freePort, readyPort, spawnServer, stopServer } from '../src/testbed/server-process.js';
import { recordGoal } from './goals.js';

/** Any executable satisfies start-up; status never runs it. */
const DROID = fileURLToPath(new URL('../../node_modules/@factory/cli-linux-x64/bin/droid', import.meta.url));
const CONCURRENCY = 16;
const WARMUP_MS = 1_000;
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

/**
 * `lanes` loops calling `call` back to back; only calls started after the
 * warm-up count. With `serverPid`, CPU per call is taken over the measured window.
 */
async function drive(label: string, lanes: number, call: (lane: number) => Promise<void>, serverPid?: number): Promise<Figures> {
  const samples: number[] = [];
  const warmEnd = performance.now() + WARMUP_MS;
  const end = warmEnd + MEASURE_MS;
  let cpuAtStart: [number, number] | undefined;
  const mark = setTimeout(() => (cpuAtStart = serverPid === undefined ? undefined : [processCpuMs(serverPid), ownCpuMs()]), WARMUP_MS);
  await Promise.all(
    Array.from({ length: lanes }, async (_, lane) => {
      for (let t = performance.now(); t < end; t = performance.now()) {
        await call(lane);
        if (t >= warmEnd) samples.push(performance.now() - t);
      }
    }),
  );
  clearTimeout(mark);
  const sorted = samples.sort((a, b) => a - b);
  const figures: Figures = { label, calls: sorted.length, rps: sorted.length / (MEASURE_MS / 1000), p50: percentile(sorted, 50), p99: percentile(sorted, 99) };
  if (serverPid !== undefined && cpuAtStart !== undefined && sorted.length > 0) {
    figures.serverCpu = (processCpuMs(serverPid) - cpuAtStart[0]) / sorted.length;
    figures.clientCpu = (ownCpuMs() - cpuAtStart[1]) / sorted.length;
  }
  return figures;
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
  drive(`http, ${CONCURRENCY} lean clients (raw)`, CONCURRENCY, leanStatusCall(port, token, bed.session), pid);

function benchHttp(bed: Bed): Promise<Figures[]> {
  return withHttpServer(bed, async (port, token, pid) => {
    const clients = await Promise.all(Array.from({ length: CONCURRENCY }, () => McpDriver.http(`http://127.0.0.1:${port}/mcp`, token)));
    // The SDK client's own callTool, so the row measures the SDK and nothing of the driver.
    const calls = clients.map((c) => statusCall(c.client, bed.session));
    const sdk = await drive(`http, ${CONCURRENCY} concurrent clients`, CONCURRENCY, (lane) => calls[lane]!(), pid);
    await Promise.all(clients.map((c) => c.close()));
    return [sdk, await leanHttpRow(bed, port, token, pid)];
  });
}

/**
 * A client that costs as little as HTTP allows: one keep-alive socket per
 * lane, a prebuilt tools/call body, the answer checked for its id and isError.
 */
function leanStatusCall(port: number, token: string, session: string): (lane: number) => Promise<void> {
  const agent = new Agent({ keepAlive: true, maxSockets: CONCURRENCY });
  const headers = {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    authorization: `Bearer ${token}`,
    'mcp-protocol-version': '2025-06-18',
  };
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
 * The stdio counterpart of the lean HTTP client: the server spawned with
 * pipes, one initialize, then prebuilt tools/call lines, each answer matched
 * to its request by id. It shows what the SDK client costs over stdio.
 */
async function benchLeanStdio(bed: Bed): Promise<Figures> {
  const child = spawn(process.execPath, [SERVER_ENTRY, '--config', await bed.config({})], { env, stdio: ['pipe', 'pipe', 'ignore'] });
  const waiting = new Map<number, { resolve(): void; reject(err: Error): void }>();
  let buffered = '';
  child.stdout!.setEncoding('utf8');
  child.stdout!.on('data', (chunk: string) => {
    buffered += chunk;
    for (let nl = buffered.indexOf('\n'); nl !== -1; nl = buffered.indexOf('\n')) {
      const line = buffered.slice(0, nl);
      buffered = buffered.slice(nl + 1);
      const answer = JSON.parse(line) as { id?: number; result?: { isError?: boolean } };
      const waiter = answer.id === undefined ? undefined : waiting.get(answer.id);
      if (!waiter) continue;
      waiting.delete(answer.id!);
      if (answer.result === undefined || answer.result.isError !== undefined) waiter.reject(new Error(`status failed: ${line.slice(0, 300)}`));
      else waiter.resolve();
    }
  });
  let next = 0;
  const send = (method: string, params: unknown) =>
    new Promise<void>((resolve, reject) => {
      const id = ++next;
      waiting.set(id, { resolve, reject });
      child.stdin!.write(`${JSON.stringify({ jsonrpc: '2.0', id, method, params })}\n`);
    });
  try {
    await send('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'bench-lean', version: '0' } });
    child.stdin!.write(`${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' })}\n`);
    const params = { name: 'droid_get_session_status', arguments: { session: bed.session } };
    return await drive(`stdio, ${CONCURRENCY} in flight (raw)`, CONCURRENCY, () => send('tools/call', params), child.pid);
  } finally {
    await stopServer(child, 30_000);
  }
}

async function benchStdio(bed: Bed): Promise<Figures[]> {
  const mcp = await McpDriver.stdio(await bed.config({}), env);
  try {
    const call = statusCall(mcp.client, bed.session);
    const pid = mcp.pid ?? undefined;
    const sequential = await drive('stdio, 1 client, sequential', 1, call, pid);
    const pipelined = await drive(`stdio, 1 client, ${CONCURRENCY} in flight`, CONCURRENCY, call, pid);
    return [sequential, pipelined];
  } finally {
    await mcp.close();
  }
}

/** Issue 19: the server's figure (raw clients on both sides) must hold in this many runs out of this many. */
const ROUNDS = 3;

export async function main(): Promise<Figures[]> {
  console.log(`droid_get_session_status: ${WARMUP_MS} ms warm-up, then ${MEASURE_MS} ms measured per row; built server as its own process`);
  const bed = await makeBed();
  let results: Figures[];
  const rounds: Array<[Figures, Figures]> = [];
  try {
    // One after the other: the state directory has a single owner at a time.
    results = [...(await benchHttp(bed)), ...(await benchStdio(bed)), await benchLeanStdio(bed)];
    rounds.push([results[1]!, results[4]!]);
    for (let i = 1; i < ROUNDS; i++) {
      const [http] = await withHttpServer(bed, async (port, token, pid) => [await leanHttpRow(bed, port, token, pid)]);
      rounds.push([http!, await benchLeanStdio(bed)]);
    }
  } finally {
    await rm(bed.base, { recursive: true, force: true });
  }
  console.log('transport                          calls      rps    p50(ms)  p99(ms)  cpu ms/call server  client');
  const cpu = (ms: number | undefined) => (ms === undefined ? '-' : ms.toFixed(3));
  for (const f of [...results, ...rounds.slice(1).flat().map((f, i) => ({ ...f, label: `${f.label}, run ${(i >> 1) + 2}` }))]) {
    console.log(
      `${f.label.padEnd(34)} ${String(f.calls).padStart(6)} ${f.rps.toFixed(0).padStart(8)} ${f.p50.toFixed(2).padStart(9)} ${f.p99.toFixed(2).padStart(8)}` +
        `${cpu(f.serverCpu).padStart(19)} ${cpu(f.clientCpu).padStart(7)}`,
    );
  }
  const [sdkHttp, , , sdkStdio] = results as [Figures, Figures, Figures, Figures, Figures];
  const judge = (what: string, http: Figures, stdio: Figures) => {
    const ratio = http.rps / stdio.rps;
    const met = http.p99 <= 20 && ratio >= 0.5;
    console.log(`  ${what.padEnd(40)} p99 ${http.p99.toFixed(2).padStart(6)} ms, ${ratio.toFixed(2)}x stdio -> ${met ? 'met' : 'NOT met'}`);
    recordGoal({ name: `http status, ${CONCURRENCY} clients, ${what}`, measured: `p99 ${http.p99.toFixed(1)} ms, ${ratio.toFixed(2)}x`, goal: 'p99 <= 20 ms, >= 0.5x', met });
  };
  console.log(`goal (issues 12, 19): http, ${CONCURRENCY} concurrent clients: p99 <= 20 ms and >= 0.5x stdio throughput (${CONCURRENCY} in flight)`);
  // The server's figure: clients that cost next to nothing on both transports, in every round.
  // With SDK clients on a 2-core host the HTTP client itself (fetch per call) takes a core.
  rounds.forEach(([http, stdio], i) => judge(`the server (raw clients on both sides), run ${i + 1} of ${ROUNDS}`, http, stdio));
  judge('with the SDK client on both sides', sdkHttp, sdkStdio);
  return results;
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  main().catch((err: unknown) => {
    console.error(err);
    process.exitCode = 1;
  });
}
