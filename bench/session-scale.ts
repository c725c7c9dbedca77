/**
 * The server with 10,000 sessions and 100,000 runs stored: start-up to ready
 * (through the run index, and reading the whole snapshot, beside the same
 * build's start-up with an empty state directory: the fixed floor of Node and
 * our modules), p50/p99 latency of status, find (with and without a text
 * query) and read through the MCP SDK client over stdio, the first text
 * query after start-up (nothing warmed up), and the server's resident memory.
 * Targets: ready <= 500 ms with RSS not above the previous build's 177 MB;
 * status p99 < 5 ms, find p99 < 50 ms, RSS < 300 MB.
 *
 * Run: npm run build && node dist/bench/session-scale.js
 */
import { mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync } from 'node:fs';
import { INDEX_FILE } from '../src/store/formats/run-index.js';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startServer, writeConfig, type RunningServer } from '../test/support/mcp-server.js';
import { DROID_PATH } from '../test/support/paths.js';
import { percentile, seedResults, seedState } from './seed.js';

const SESSIONS = 10_000;
const RUNS_PER_SESSION = 10;
const CALLS = 300;
/** Start-ups measured per case; the median is reported (a busy host varies a lot). */
const STARTS = 3;
/** Resident memory after loading with the build before the run index (issue 12 part 4, measured on a quiet host). */
const PREVIOUS_RSS_MB = 177;

/** CPU time (user + system) the process has used, from /proc: unlike wall time, it does not count waiting for a busy CPU. */
function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) * (1000 / 100); // clock ticks (USER_HZ 100)
}

function residentMb(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8').split('\n').find((l) => l.startsWith('VmRSS:'))!;
  return Number(line.replace(/\D+/g, '')) / 1024;
}

async function measure(server: RunningServer, name: string, args: (i: number) => Record<string, unknown>): Promise<{ p50: number; p99: number }> {
  for (let i = 0; i < 20; i++) await server.ok(name, args(i)); // warm-up
  const samples: number[] = [];
  for (let i = 0; i < CALLS; i++) {
    const t = performance.now();
    await server.ok(name, args(i));
    samples.push(performance.now() - t);
  }
  samples.sort((a, b) => a - b);
  return { p50: percentile(samples, 50), p99: percentile(samples, 99) };
}

interface Started {
  server: RunningServer;
  readyMs: number;
  cpuMs: number;
  rssMb: number;
}

/** Spawns the server and waits for ready (the MCP handshake answered): wall time, CPU time and RSS at that moment. */
async function start(config: string): Promise<Started> {
  const t = performance.now();
  const server = await startServer(config, { ...process.env } as Record<string, string>);
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

  const floor = await startups(emptyConfig);
  // Without the index the server reads the whole snapshot, and writes the index again: remove it before each.
  const whole = await startups(config, () => rmSync(join(stateDir, INDEX_FILE), { force: true }));
  const indexed = await startups(config);
  const { server, readyMs: loadMs, cpuMs: loadCpuMs, rssMb: rssLoaded } = await start(config);
  try {
    const pick = (i: number) => sessionIds[(i * 7919) % sessionIds.length]!;
    // Before anything else: a lazy start-up must not hide its cost in the first query.
    let t = performance.now();
    await server.ok('droid_find_sessions', { query: 'session 4242' });
    const firstQueryMs = performance.now() - t;
    t = performance.now();
    await server.ok('droid_find_sessions', { query: 'absent-first' });
    const firstMissMs = performance.now() - t;
    const rows = [
      ['droid_get_session_status', await measure(server, 'droid_get_session_status', (i) => ({ session: pick(i) }))],
      ['droid_find_sessions (no query, page 1)', await measure(server, 'droid_find_sessions', () => ({ limit: 25 }))],
      ['droid_find_sessions (labels + workspace)', await measure(server, 'droid_find_sessions', (i) => ({ labels: ['backend'], workspace: join(root, `project-${i % 50}`) }))],
      ['droid_find_sessions (text query, matches)', await measure(server, 'droid_find_sessions', (i) => ({ query: `session ${i * 31}` }))],
      ['droid_find_sessions (text query, no match)', await measure(server, 'droid_find_sessions', (i) => ({ query: `absent-${i}` }))],
      ['droid_read_session (10 turns)', await measure(server, 'droid_read_session', () => ({ session: sessionIds[0]!, limit: 25 }))],
    ] as const;
    const line = (label: string, r: { readyMs: number; cpuMs: number; rssMb: number }): string =>
      `  ${label.padEnd(44)} ${r.readyMs.toFixed(0).padStart(6)} ms   CPU ${r.cpuMs.toFixed(0).padStart(6)} ms   RSS ${r.rssMb.toFixed(0).padStart(4)} MB`;
    console.log(`${SESSIONS} sessions, ${SESSIONS * RUNS_PER_SESSION} runs; ${CALLS} calls each over stdio (MCP SDK client)`);
    console.log(`spawn -> ready (median of ${STARTS}; wall time, the server's CPU time, its resident memory at ready):`);
    console.log(line('empty state directory (the fixed floor)', floor));
    console.log(line('100k runs, whole snapshot read (no index)', whole));
    console.log(line('100k runs, through the run index', indexed));
    console.log(line('  the server measured below', { readyMs: loadMs, cpuMs: loadCpuMs, rssMb: rssLoaded }));
    const ok = indexed.readyMs <= 500 && indexed.rssMb <= PREVIOUS_RSS_MB;
    console.log(
      `goal: ready <= 500 ms and RSS <= ${PREVIOUS_RSS_MB} MB (the previous build's): ${ok ? 'met' : 'NOT met'} ` +
        `(${indexed.readyMs.toFixed(0)} ms, ${indexed.rssMb.toFixed(0)} MB; of it the floor ${floor.readyMs.toFixed(0)} ms, loading ${(indexed.readyMs - floor.readyMs).toFixed(0)} ms)`,
    );
    console.log(`  first droid_find_sessions after start-up (text query, no warm-up): ${firstQueryMs.toFixed(1)} ms; the next (no match) ${firstMissMs.toFixed(1)} ms`);
    for (const [label, f] of rows) console.log(`  ${label.padEnd(44)} p50 ${f.p50.toFixed(2).padStart(7)} ms   p99 ${f.p99.toFixed(2).padStart(7)} ms`);
    console.log(`resident memory after the calls: ${residentMb(server.pid).toFixed(0)} MB (targets: status p99 < 5 ms, find p99 < 50 ms, RSS < 300 MB)`);
  } finally {
    await server.close();
    rmSync(base, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
