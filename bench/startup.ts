/**
 * How soon a stdio MCP client is answered (issue 19, goal 3): spawn →
 * `initialize` answered and spawn → `tools/list` answered, as a client sees
 * them (a line-JSON client that writes initialize at once, then, on its
 * answer, notifications/initialized and tools/list), and spawn → the
 * server's "droid-mcp ready" line (its state loaded: tool calls are served).
 * Three servers, interleaved round by round (each round in a rotated order)
 * so machine noise hits each alike, medians of ROUNDS:
 *  - the floor: a minimal MCP SDK stdio server listing the same 11 tools
 *    (floor-server.ts, fed the tools/list droid-mcp answered in this run);
 *  - droid-mcp with an empty state directory;
 *  - droid-mcp with 10,000 sessions / 100,000 runs (through the run index).
 * Goals: empty ≤ 1.15× the floor, 100k ≤ 1.05× empty (both initialize and
 * tools/list).
 *
 * Run: npm run build && node dist/bench/startup.js [rounds]
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SERVER_ENTRY } from '../src/testbed/mcp-driver.js';
import { writeConfig } from '../test/support/mcp-server.js';
import { DROID_PATH } from '../test/support/paths.js';
import { recordGoal } from './goals.js';
import { seedState } from './seed.js';
import { median } from './stats.js';

const DEFAULT_ROUNDS = 15;
const FLOOR_ENTRY = fileURLToPath(new URL('./floor-server.js', import.meta.url));
const INITIALIZE = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'startup-bench', version: '1.0.0' } },
};

export interface Handshake {
  initializeMs: number;
  toolsListMs: number;
  /** The server's CPU time (user + system) when tools/list was answered: what machine noise does not inflate. */
  toolsListCpuMs: number;
  /** Spawn → the "droid-mcp ready" line on stderr; null when not waited for. */
  readyMs: number | null;
  tools: unknown[];
}

/**
 * Spawns `node <args>` and times the answers from just before the spawn. With
 * `waitReady`, also waits for the ready line. Then closes stdin and waits
 * for the process to exit.
 */
export function handshake(args: string[], waitReady: boolean): Promise<Handshake> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    // Its own process group: what it started (droid --version, the sandbox trial run) is waited for too.
    const child = spawn(process.execPath, args, { stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env }, detached: true });
    const got: Partial<Handshake> = { readyMs: waitReady ? undefined : null } as Partial<Handshake>;
    let out = '';
    let err = '';
    const timer = setTimeout(() => fail(new Error(`no handshake within 60 s; stderr: ${err.slice(-2000)}`)), 60_000);
    const fail = (e: Error) => {
      clearTimeout(timer);
      child.kill('SIGKILL');
      reject(e);
    };
    const maybeDone = () => {
      if (got.toolsListMs === undefined || got.readyMs === undefined) return;
      clearTimeout(timer);
      child.once('exit', () => void groupGone(child.pid!).then(() => resolve(got as Handshake)));
      child.stdin.end();
      setTimeout(() => child.kill('SIGKILL'), 10_000).unref();
    };
    child.on('error', fail);
    child.on('exit', (code) => {
      if (got.toolsListMs === undefined || got.readyMs === undefined) fail(new Error(`exited (${code}) before the handshake; stderr: ${err.slice(-2000)}`));
    });
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString('utf8');
      let nl: number;
      while ((nl = out.indexOf('\n')) >= 0) {
        const line = out.slice(0, nl);
        out = out.slice(nl + 1);
        const message = JSON.parse(line) as { id?: number; result?: { tools?: unknown[] } };
        if (message.id === 1) {
          got.initializeMs = performance.now() - t0;
          child.stdin.write(
            `${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' })}\n${JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' })}\n`,
          );
        } else if (message.id === 2) {
          got.toolsListMs = performance.now() - t0;
          got.toolsListCpuMs = cpuMs(child.pid!);
          got.tools = message.result?.tools ?? [];
          maybeDone();
        }
      }
    });
    child.stderr.on('data', (chunk: Buffer) => {
      err += chunk.toString('utf8');
      if (got.readyMs === undefined && err.includes('"msg":"droid-mcp ready"')) {
        got.readyMs = performance.now() - t0;
        maybeDone();
      }
    });
    child.stdin.write(`${JSON.stringify(INITIALIZE)}\n`);
  });
}

/**
 * Resolves once no process of the group is left (at most 10 s), so nothing
 * one sample started still runs during the next.
 */
async function groupGone(pgid: number): Promise<void> {
  const end = Date.now() + 10_000;
  while (Date.now() < end) {
    try {
      process.kill(-pgid, 0);
    } catch {
      return;
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** CPU time (user + system) a process has used, from /proc (clock ticks of 10 ms). */
function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

interface Case {
  label: string;
  args: string[];
  waitReady: boolean;
  samples: Handshake[];
}

export async function main(rounds = DEFAULT_ROUNDS): Promise<void> {
  const base = realpathSync(mkdtempSync(join(tmpdir(), 'droid-mcp-startup-')));
  try {
    const root = join(base, 'approved');
    const stateDir = join(base, 'state');
    const emptyDir = join(base, 'empty-state');
    mkdirSync(root);
    mkdirSync(stateDir, { mode: 0o700 });
    mkdirSync(emptyDir, { mode: 0o700 });
    for (let p = 0; p < 50; p++) mkdirSync(join(root, `project-${p}`));
    await seedState(stateDir, { sessions: 10_000, runsPerSession: 10, root, distinctTimes: true });
    const server = (dir: string) => [SERVER_ENTRY, '--config', writeConfig(base, { approvedDirectories: [root], stateDirectory: dir, droidPath: DROID_PATH })];
    // The floor lists what droid-mcp lists: taken from its own answer, in this run.
    const dump = join(base, 'tools.json');
    writeFileSync(dump, JSON.stringify((await handshake(server(emptyDir), true)).tools));
    const cases: Case[] = [
      { label: 'floor: MCP SDK stdio server, the same 11 tools', args: [FLOOR_ENTRY, dump], waitReady: false, samples: [] },
      { label: 'droid-mcp, empty state directory', args: server(emptyDir), waitReady: true, samples: [] },
      { label: 'droid-mcp, 10k sessions / 100k runs', args: server(stateDir), waitReady: true, samples: [] },
    ];
    await handshake(cases[2]!.args, true); // warms the page cache for the state files, as for the others' files
    // Each round in another order, so no case always follows the same one.
    for (let r = 0; r < rounds; r++) {
      for (let k = 0; k < cases.length; k++) {
        const c = cases[(r + k) % cases.length]!;
        c.samples.push(await handshake(c.args, c.waitReady));
      }
    }
    report(cases, rounds);
  } finally {
    rmSync(base, { recursive: true, force: true });
  }
}

function report(cases: readonly Case[], rounds: number): void {
  const m = cases.map((c) => ({
    label: c.label,
    initialize: median(c.samples.map((s) => s.initializeMs)),
    toolsList: median(c.samples.map((s) => s.toolsListMs)),
    cpu: median(c.samples.map((s) => s.toolsListCpuMs)),
    ready: c.waitReady ? median(c.samples.map((s) => s.readyMs!)) : null,
    tools: c.samples[0]!.tools.length,
  }));
  const [floor, empty, large] = m as [(typeof m)[0], (typeof m)[0], (typeof m)[0]];
  console.log(`spawn -> answered, as a stdio client sees it (median of ${rounds} interleaved rounds; ms):`);
  console.log(`  ${''.padEnd(48)} ${'initialize'.padStart(10)} ${'tools/list'.padStart(10)} ${'its CPU'.padStart(8)} ${'ready'.padStart(8)}   tools`);
  for (const c of m) {
    const ready = (c.ready === null ? '-' : c.ready.toFixed(0)).padStart(8);
    console.log(
      `  ${c.label.padEnd(48)} ${c.initialize.toFixed(0).padStart(10)} ${c.toolsList.toFixed(0).padStart(10)} ${c.cpu.toFixed(0).padStart(8)} ${ready}   ${c.tools}`,
    );
  }
  const goal = (name: string, value: number, of: number, limit: number, what: string) => {
    const ratio = value / of;
    recordGoal({
      name,
      measured: `${value.toFixed(0)} ms = ${ratio.toFixed(2)}x`,
      goal: `<= ${limit.toFixed(2)}x ${what} ${of.toFixed(0)} ms`,
      met: ratio <= limit,
    });
  };
  goal('stdio initialize, empty state vs the floor', empty.initialize, floor.initialize, 1.15, 'floor');
  goal('stdio tools/list, empty state vs the floor', empty.toolsList, floor.toolsList, 1.15, 'floor');
  goal('stdio initialize, 100k runs vs empty state', large.initialize, empty.initialize, 1.05, 'empty');
  goal('stdio tools/list, 100k runs vs empty state', large.toolsList, empty.toolsList, 1.05, 'empty');
  recordGoal({
    name: 'stdio spawn -> ready (state loaded), empty / 100k (no goal)',
    measured: `${empty.ready!.toFixed(0)} / ${large.ready!.toFixed(0)} ms`,
    goal: '-',
    met: true,
  });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { printGoals } = await import('./goals.js');
  await main(Number(process.argv[2] ?? DEFAULT_ROUNDS));
  printGoals();
}
