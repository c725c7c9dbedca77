/**
 * The server with 10,000 sessions and 100,000 runs stored: spawn to ready
 * (the "droid-mcp ready" line: the state is open and tool calls are served;
 * through the run index, and reading the whole snapshot, beside the same
 * build's start-up with an empty state directory), and p50/p99 latency of
 * status, find (with and without a text query) and read through the MCP SDK
 * client over stdio, and again through a raw client (raw-stdio.ts), on
 * which the goals are judged: the SDK client's own round trip on this host
 * has a p99 above the status goal. Each series runs on a server of its own, started for it
 * and measured from its first call after ready: nothing is warmed up, so the
 * first status of each session (its runs read back from the snapshot) and
 * the first text query (every session's summary) are in the figures. Each
 * series is followed by its floor: the same calls to an MCP SDK stdio server
 * that answers with droid-mcp's last answer and computes nothing
 * (floor-server.ts), so what the transport and the client cost on this host,
 * at this moment, is printed beside what droid-mcp costs.
 * Goals (issue 19): status p99 <= 3 ms, find p99 <= 10 ms, read p99 <= 5 ms,
 * resident memory at ready <= 160 MB; issue 12: ready <= 500 ms (printed, retired by issue 19).
 *
 * Run: npm run build && node dist/bench/session-scale.js
 */
import { mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { INDEX_FILE } from '../src/store/formats/run-index.js';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startServer, writeConfig, type RunningServer } from '../test/support/mcp-server.js';
import { DROID_PATH } from '../test/support/paths.js';
import { recordGoal } from './goals.js';
import { percentile, seedResults, seedState } from './seed.js';
import { openRawStdio, rawToolCall } from './raw-stdio.js';
import { SERVER_ENTRY } from '../src/testbed/mcp-driver.js';

const SESSIONS = 10_000;
const RUNS_PER_SESSION = 10;
const CALLS = 300;
/** Start-ups measured per case; the median is reported (a busy host varies a lot). */
const STARTS = 3;
/** Issue 19 goals. */
const GOALS = { statusP99Ms: 3, findP99Ms: 10, readP99Ms: 5, readyRssMb: 160 };

/** CPU time (user + system) the process has used, from /proc: unlike wall time, it does not count waiting for a busy CPU. */
function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) * (1000 / 100); // clock ticks (USER_HZ 100)
}

function residentMb(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8')
    .split('\n')
    .find((l) => l.startsWith('VmRSS:'))!;
  return Number(line.replace(/\D+/g, '')) / 1024;
}

interface Series {
  p50: number;
  p99: number;
  /** The first call after ready. */
  first: number;
  max: number;
  /** The server's CPU time per call (all its threads): what is ours, beside the client's share and the wait for a CPU. */
  cpuPerCall: number;
}

/** What a series needs of a server. */
type Callable = Pick<RunningServer, 'pid' | 'ok'>;

/** Which client drives a series: the MCP SDK's, or the raw one (raw-stdio.ts) that measures the server alone. */
type ClientKind = 'sdk' | 'raw';

const READY_LINE = '"msg":"droid-mcp ready"';

async function rawCallable(entry: string, args: string[], readyLine?: string): Promise<Callable & { close(): Promise<void> }> {
  const client = await openRawStdio(entry, args, { ...process.env } as Record<string, string>, readyLine);
  return {
    pid: client.pid,
    ok: async <T>(name: string, args?: Record<string, unknown>) => (await rawToolCall(client, name, args ?? {})).result!.structuredContent as T,
    close: () => client.close(),
  };
}

/**
 * The floor of a series (floor-server.ts): an MCP SDK stdio server that
 * answers every call with `answer`, computing nothing, driven by the same
 * SDK client.
 */
async function startFloor(answerFile: string, toolsFile: string, kind: ClientKind): Promise<Callable & { close(): Promise<void> }> {
  const entry = fileURLToPath(new URL('./floor-server.js', import.meta.url));
  if (kind === 'raw') return rawCallable(entry, [toolsFile, answerFile]);
  const transport = new StdioClientTransport({ command: process.execPath, args: [entry, toolsFile, answerFile], stderr: 'pipe' });
  const client = new Client({ name: 'session-scale-floor', version: '1.0.0' });
  await client.connect(transport);
  return {
    pid: transport.pid!,
    ok: async <T>(name: string, args?: Record<string, unknown>) => (await client.callTool({ name, arguments: args ?? {} })).structuredContent as T,
    close: () => client.close(),
  };
}

/** CALLS calls from the first after ready on: nothing warmed up. */
async function measure(server: Callable, name: string, args: (i: number) => Record<string, unknown>): Promise<Series & { last: unknown }> {
  const samples: number[] = [];
  const cpuBefore = cpuMs(server.pid);
  let last: unknown;
  for (let i = 0; i < CALLS; i++) {
    const t = performance.now();
    last = await server.ok(name, args(i));
    samples.push(performance.now() - t);
  }
  const cpuPerCall = (cpuMs(server.pid) - cpuBefore) / CALLS;
  const first = samples[0]!;
  samples.sort((a, b) => a - b);
  return { p50: percentile(samples, 50), p99: percentile(samples, 99), first, max: samples[samples.length - 1]!, cpuPerCall, last };
}

interface Started {
  server: RunningServer;
  readyMs: number;
  cpuMs: number;
  rssMb: number;
}

/** Spawns the server and waits for its ready line (the state open, calls served): wall time, CPU time and RSS at that moment. */
async function start(config: string): Promise<Started> {
  const t = performance.now();
  const server = await startServer(config, { ...process.env } as Record<string, string>);
  while (!server.stderr().includes('"msg":"droid-mcp ready"')) await new Promise((r) => setImmediate(r));
  const readyMs = performance.now() - t;
  return { server, readyMs, cpuMs: cpuMs(server.pid), rssMb: residentMb(server.pid) };
}

/** Median of STARTS start-ups (each closed again), after `before` prepares each. */
async function startups(config: string, before: () => void = () => undefined): Promise<{ readyMs: number; cpuMs: number; rssMb: number }> {
  const runs: Started[] = [];
  for (let i = 0; i < STARTS; i++) {
    before();
    const s = await start(config);
    await s.server.close();
    runs.push(s);
  }
  const median = (f: (s: Started) => number): number => runs.map(f).sort((a, b) => a - b)[Math.floor(runs.length / 2)]!;
  return { readyMs: median((s) => s.readyMs), cpuMs: median((s) => s.cpuMs), rssMb: median((s) => s.rssMb) };
}

type Call = readonly [label: string, tool: string, args: (i: number) => Record<string, unknown>];

type Row = { label: string; tool: string; kind: ClientKind; f: Series; floor: Series; rssMb?: number };

/**
 * Each series on a server of its own, measured from its first call after
 * ready (RSS at each ready), then the same calls on its floor, answered with
 * the last answer droid-mcp gave.
 */
async function series(config: string, scratch: string, calls: readonly Call[], kind: ClientKind): Promise<Row[]> {
  const out: Row[] = [];
  const toolsFile = join(scratch, 'floor-tools.json');
  writeFileSync(toolsFile, '[]');
  for (const [label, tool, args] of calls) {
    let rssMb: number | undefined;
    let server: Callable & { close(): Promise<void> };
    if (kind === 'sdk') ({ server, rssMb } = await start(config));
    else server = await rawCallable(SERVER_ENTRY, ['--config', config], READY_LINE);
    let f: Series & { last: unknown };
    try {
      f = await measure(server, tool, args);
    } finally {
      await server.close();
    }
    const answerFile = join(scratch, 'floor-answer.json');
    writeFileSync(answerFile, JSON.stringify(f.last));
    const floorServer = await startFloor(answerFile, toolsFile, kind);
    try {
      out.push({ label, tool, kind, f, floor: await measure(floorServer, tool, args), ...(rssMb === undefined ? {} : { rssMb }) });
    } finally {
      await floorServer.close();
    }
  }
  return out;
}

export async function main(): Promise<void> {
  const base = realpathSync(mkdtempSync(join(tmpdir(), 'droid-mcp-scale-')));
  const root = join(base, 'approved');
  const stateDir = join(base, 'state');
  mkdirSync(root);
  mkdirSync(stateDir, { mode: 0o700 });
  for (let p = 0; p < 50; p++) mkdirSync(join(root, `project-${p}`));
  const { sessionIds } = await seedState(stateDir, { sessions: SESSIONS, runsPerSession: RUNS_PER_SESSION, root, distinctTimes: true });
  await seedResults(stateDir, sessionIds[0]!, RUNS_PER_SESSION);
  const config = writeConfig(base, { approvedDirectories: [root], stateDirectory: stateDir, droidPath: DROID_PATH });
  const emptyDir = join(base, 'empty-state');
  mkdirSync(emptyDir, { mode: 0o700 });
  const emptyConfig = writeConfig(base, { approvedDirectories: [root], stateDirectory: emptyDir, droidPath: DROID_PATH });
  try {
    const empty = await startups(emptyConfig);
    // Without the index the server reads the whole snapshot, and writes the index again: remove it before each.
    const whole = await startups(config, () => rmSync(join(stateDir, INDEX_FILE), { force: true }));
    const indexed = await startups(config);
    const pick = (i: number) => sessionIds[(i * 7919) % sessionIds.length]!;
    const calls: Call[] = [
      ['droid_get_session_status', 'droid_get_session_status', (i) => ({ session: pick(i) })],
      ['droid_find_sessions (no query, page 1)', 'droid_find_sessions', () => ({ limit: 25 })],
      ['droid_find_sessions (labels + workspace)', 'droid_find_sessions', (i) => ({ labels: ['backend'], workspace: join(root, `project-${i % 50}`) })],
      ['droid_find_sessions (text query, matches)', 'droid_find_sessions', (i) => ({ query: `session ${i * 31}` })],
      ['droid_find_sessions (text query, no match)', 'droid_find_sessions', (i) => ({ query: `absent-${i}` })],
      ['droid_read_session (10 turns)', 'droid_read_session', () => ({ session: sessionIds[0]!, limit: 25 })],
    ];
    const rows = [...(await series(config, base, calls, 'sdk')), ...(await series(config, base, calls, 'raw'))];
    report({ empty, whole, indexed }, rows);
  } finally {
    rmSync(base, { recursive: true, force: true });
  }
}

type Startup = { readyMs: number; cpuMs: number; rssMb: number };

function report(s: { empty: Startup; whole: Startup; indexed: Startup }, rows: Row[]): void {
  const line = (label: string, r: Startup): string =>
    `  ${label.padEnd(44)} ${r.readyMs.toFixed(0).padStart(6)} ms   CPU ${r.cpuMs.toFixed(0).padStart(6)} ms   RSS ${r.rssMb.toFixed(0).padStart(4)} MB`;
  console.log(`${SESSIONS} sessions, ${SESSIONS * RUNS_PER_SESSION} runs; ${CALLS} calls per series over stdio (MCP SDK client)`);
  console.log(`spawn -> ready (median of ${STARTS}; wall time, the server's CPU time, its resident memory at ready):`);
  console.log(line('empty state directory', s.empty));
  console.log(line('100k runs, whole snapshot read (no index)', s.whole));
  console.log(line('100k runs, through the run index', s.indexed));
  console.log(`each series from its own server's first call after ready (first call, p50, p99, slowest; the server's CPU per call),`);
  console.log(`and below it its floor: an SDK stdio server answering the same calls with droid-mcp's last answer, computing nothing:`);
  const ms = (v: number) => v.toFixed(2).padStart(7);
  const cells = (f: Series) => `first ${ms(f.first)}   p50 ${ms(f.p50)}   p99 ${ms(f.p99)}   max ${ms(f.max)} ms   CPU ${ms(f.cpuPerCall)} ms`;
  for (const kind of ['sdk', 'raw'] as const) {
    console.log(
      kind === 'sdk'
        ? ' driven by the MCP SDK client:'
        : ' driven by the raw client (raw-stdio.ts: JSON lines, no schema checks), which the goals are judged on:',
    );
    for (const { label, f, floor } of rows.filter((r) => r.kind === kind)) {
      console.log(`  ${label.padEnd(44)} ${cells(f)}`);
      console.log(`  ${'  its floor'.padEnd(44)} ${cells(floor)}`);
    }
  }
  const worst = (tool: string, kind: ClientKind) => rows.filter((r) => r.tool === tool && r.kind === kind).reduce((a, b) => (b.f.p99 > a.f.p99 ? b : a));
  const p99Goal = (tool: string, limit: number): void => {
    const r = worst(tool, 'raw');
    const label = r.label === tool ? tool : `${tool} (slowest: ${r.label.slice(tool.length + 2, -1)})`;
    recordGoal({ name: `${label} p99, first call in`, measured: `${r.f.p99.toFixed(2)} ms`, goal: `<= ${limit} ms`, met: r.f.p99 <= limit });
    recordGoal({ name: `  its floor (an SDK server answering, no goal)`, measured: `${r.floor.p99.toFixed(2)} ms`, goal: '-', met: true });
    const sdk = worst(tool, 'sdk');
    recordGoal({ name: `  the same with the SDK client (no goal)`, measured: `${sdk.f.p99.toFixed(2)} ms`, goal: '-', met: true });
    recordGoal({ name: `    its floor (SDK client and server)`, measured: `${sdk.floor.p99.toFixed(2)} ms`, goal: '-', met: true });
  };
  p99Goal('droid_get_session_status', GOALS.statusP99Ms);
  p99Goal('droid_find_sessions', GOALS.findP99Ms);
  p99Goal('droid_read_session', GOALS.readP99Ms);
  const rss = Math.max(s.indexed.rssMb, ...rows.map((r) => r.rssMb ?? 0));
  recordGoal({
    name: 'resident memory at ready, 100k runs (largest of the starts)',
    measured: `${rss.toFixed(0)} MB`,
    goal: `<= ${GOALS.readyRssMb} MB`,
    met: rss <= GOALS.readyRssMb,
  });
  // Issue 19 retired it: issue 12 measured an empty state directory alone at 622-636 ms to ready. Its goal 3 judges what a client waits for instead (startup.ts).
  recordGoal({
    name: 'spawn -> ready, 100k runs through the index (issue 12)',
    measured: `${s.indexed.readyMs.toFixed(0)} ms`,
    goal: '<= 500 ms',
    met: s.indexed.readyMs <= 500,
    retired: 'by issue 19 (below a floor issue 12 measured)',
  });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { printGoals } = await import('./goals.js');
  await main();
  printGoals();
}
