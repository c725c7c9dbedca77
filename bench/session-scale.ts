/**
 * The server with 10,000 sessions and 100,000 runs stored: p50/p99 latency
 * of status, find (with and without a text query) and read through the MCP
 * SDK client over stdio, and the server's resident memory once loaded.
 * Targets: status p99 < 5 ms, find p99 < 50 ms, RSS < 300 MB.
 *
 * Run: npm run build && node dist/bench/session-scale.js
 */
import { mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startServer, writeConfig, type RunningServer } from '../test/support/mcp-server.js';
import { DROID_PATH } from '../test/support/paths.js';
import { percentile, seedResults, seedState } from './seed.js';

const SESSIONS = 10_000;
const RUNS_PER_SESSION = 10;
const CALLS = 300;

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

  const started = performance.now();
  const server = await startServer(config, { ...process.env } as Record<string, string>);
  const loadMs = performance.now() - started;
  try {
    const rssLoaded = residentMb(server.pid);
    const loadCpuMs = cpuMs(server.pid);
    const pick = (i: number) => sessionIds[(i * 7919) % sessionIds.length]!;
    const rows = [
      ['droid_get_session_status', await measure(server, 'droid_get_session_status', (i) => ({ session: pick(i) }))],
      ['droid_find_sessions (no query, page 1)', await measure(server, 'droid_find_sessions', () => ({ limit: 25 }))],
      ['droid_find_sessions (labels + workspace)', await measure(server, 'droid_find_sessions', (i) => ({ labels: ['backend'], workspace: join(root, `project-${i % 50}`) }))],
      ['droid_find_sessions (text query, matches)', await measure(server, 'droid_find_sessions', (i) => ({ query: `session ${i * 31}` }))],
      ['droid_find_sessions (text query, no match)', await measure(server, 'droid_find_sessions', (i) => ({ query: `absent-${i}` }))],
      ['droid_read_session (10 turns)', await measure(server, 'droid_read_session', () => ({ session: sessionIds[0]!, limit: 25 }))],
    ] as const;
    console.log(`${SESSIONS} sessions, ${SESSIONS * RUNS_PER_SESSION} runs; ${CALLS} calls each over stdio (MCP SDK client)`);
    console.log(
      `server start-up to ready: ${loadMs.toFixed(0)} ms (CPU ${loadCpuMs.toFixed(0)} ms); resident memory after loading: ${rssLoaded.toFixed(0)} MB ` +
        `(goal: ready <= 500 ms, RSS not above the previous build's)`,
    );
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
