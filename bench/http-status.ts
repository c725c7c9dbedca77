/**
 * Throughput and tail latency of `droid_get_session_status` over the HTTP
 * transport (16 concurrent SDK clients, each with its own connection) next to
 * the same call over stdio (one client: sequential, then 16 calls in flight).
 * Both run the built server as its own process on one seeded session, so no
 * droid turn is involved: the figures are transport + MCP + controller cost.
 *
 * Run: npm run build && node dist/bench/http-status.js
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Log } from '../src/util/logger.js';
import type { RunRecord, SessionRecord } from '../src/store/records.js';
import { StateStore } from '../src/store/store.js';

const SERVER_ENTRY = fileURLToPath(new URL('../src/cli.js', import.meta.url));
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

/** `lanes` loops calling `call` back to back; only calls started after the warm-up count. */
async function drive(label: string, lanes: number, call: (lane: number) => Promise<void>): Promise<Figures> {
  const samples: number[] = [];
  const warmEnd = performance.now() + WARMUP_MS;
  const end = warmEnd + MEASURE_MS;
  await Promise.all(
    Array.from({ length: lanes }, async (_, lane) => {
      for (let t = performance.now(); t < end; t = performance.now()) {
        await call(lane);
        if (t >= warmEnd) samples.push(performance.now() - t);
      }
    }),
  );
  const sorted = samples.sort((a, b) => a - b);
  return { label, calls: sorted.length, rps: sorted.length / (MEASURE_MS / 1000), p50: percentile(sorted, 50), p99: percentile(sorted, 99) };
}

function statusCall(client: Client, session: string): () => Promise<void> {
  return async () => {
    const result = await client.callTool({ name: 'droid_get_session_status', arguments: { session } });
    if (result.isError) throw new Error(`status failed: ${JSON.stringify(result.content)}`);
  };
}

// info: the "ready" line is what tells the bench the listener is up.
const env = { ...process.env, DROID_MCP_LOG_LEVEL: 'info' } as Record<string, string>;

async function benchHttp(bed: Bed): Promise<Figures> {
  const token = randomBytes(32).toString('base64url');
  const tokenFile = join(bed.base, 'token');
  await writeFile(tokenFile, `${token}\n`, { mode: 0o600 });
  const port = 20_000 + Math.floor(Math.random() * 20_000);
  const child = spawn(process.execPath, [SERVER_ENTRY, '--config', await bed.config({ transport: 'http', port, tokenFile })], {
    env,
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  try {
    await ready(child);
    const clients = await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        const client = new Client({ name: 'bench-http', version: '0' });
        const url = new URL(`http://127.0.0.1:${port}/mcp`);
        await client.connect(new StreamableHTTPClientTransport(url, { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
        return client;
      }),
    );
    const calls = clients.map((c) => statusCall(c, bed.session));
    const figures = await drive(`http, ${CONCURRENCY} concurrent clients`, CONCURRENCY, (lane) => calls[lane]!());
    await Promise.all(clients.map((c) => c.close()));
    return figures;
  } finally {
    await stop(child);
  }
}

async function benchStdio(bed: Bed): Promise<Figures[]> {
  const transport = new StdioClientTransport({ command: process.execPath, args: [SERVER_ENTRY, '--config', await bed.config({})], env, stderr: 'ignore' });
  const client = new Client({ name: 'bench-stdio', version: '0' });
  await client.connect(transport);
  try {
    const call = statusCall(client, bed.session);
    const sequential = await drive('stdio, 1 client, sequential', 1, call);
    const pipelined = await drive(`stdio, 1 client, ${CONCURRENCY} in flight`, CONCURRENCY, call);
    return [sequential, pipelined];
  } finally {
    await client.close();
  }
}

/** Waits for the JSON "droid-mcp ready" line on stderr. */
function ready(child: ChildProcess): Promise<void> {
  return new Promise((resolve, reject) => {
    let err = '';
    const onData = (chunk: Buffer) => {
      err += chunk.toString();
      if (err.includes('"droid-mcp ready"')) {
        child.stderr?.off('data', onData);
        child.stderr?.resume(); // keep draining so the pipe never blocks the server
        child.off('exit', onExit);
        resolve();
      }
    };
    const onExit = (code: number | null) => reject(new Error(`server exited (${code}) before ready:\n${err}`));
    child.stderr?.on('data', onData);
    child.once('exit', onExit);
  });
}

function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
  });
}

export async function main(): Promise<Figures[]> {
  console.log(`droid_get_session_status: ${WARMUP_MS} ms warm-up, then ${MEASURE_MS} ms measured per row; built server as its own process`);
  const bed = await makeBed();
  let results: Figures[];
  try {
    // One after the other: the state directory has a single owner at a time.
    results = [await benchHttp(bed), ...(await benchStdio(bed))];
  } finally {
    await rm(bed.base, { recursive: true, force: true });
  }
  console.log('transport                          calls      rps    p50(ms)  p99(ms)');
  for (const f of results) {
    console.log(
      `${f.label.padEnd(34)} ${String(f.calls).padStart(6)} ${f.rps.toFixed(0).padStart(8)} ${f.p50.toFixed(2).padStart(9)} ${f.p99.toFixed(2).padStart(8)}`,
    );
  }
  const http = results[0]!;
  const stdio = results[2]!;
  const ratio = http.rps / stdio.rps;
  const met = http.p99 <= 20 && ratio >= 0.5;
  console.log(
    `goal (issue 12): http p99 <= 20 ms and >= 0.5x stdio throughput (${CONCURRENCY} in flight): ` +
      `p99 ${http.p99.toFixed(2)} ms, ${ratio.toFixed(2)}x -> ${met ? 'met' : 'NOT met'}`,
  );
  return results;
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  main().catch((err: unknown) => {
    console.error(err);
    process.exitCode = 1;
  });
}
