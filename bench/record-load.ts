/**
 * Loading 10,000 sessions / 100,000 runs, and what the fast paths derived
 * from the record schemas buy (issue 39, item 3). Each load is a fresh Node
 * process, cold as a server's start is, that reads the state directory with
 * store/load.ts: the whole snapshot (no run index: every run validated and
 * interned) and through the run index (sessions only, runs kept as stubs);
 * medians of CPU time, wall time and heap after loading, interleaved round
 * by round. Then, in this process, the snapshot's 100,000 run records, each
 * parsed from its line: checked by the derived guard
 * (store/formats/record-guard.ts), by zod alone (the path without a guard),
 * and copied by the interner (store/tables/record-interner.ts). The guard
 * buys what zod alone costs beyond it, on every record read; the interner
 * buys heap (docs/PERF.md has the figures without it). No goal.
 *
 * Run: npm run build && node dist/bench/record-load.js [rounds]
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadState } from '../src/store/load.js';
import { recordOfLine, STATE_FILE } from '../src/store/formats/snapshot.js';
import { isRunRecord } from '../src/store/formats/record-guard.js';
import { RecordInterner } from '../src/store/tables/record-interner.js';
import { runRecordSchema, type RunRecord } from '../src/shared/record-schemas.js';
import { recordGoal } from './goals.js';
import { seedState } from './seed.js';
import { median } from './stats.js';

const DEFAULT_ROUNDS = 5;
const SESSIONS = 10_000;
const RUNS_PER_SESSION = 10;
const SELF = fileURLToPath(import.meta.url);

interface Load {
  cpuMs: number;
  wallMs: number;
  heapMb: number;
}

/** In a child: loads `dir` once (whole or through its index), prints what it cost. */
async function child(dir: string, how: 'whole' | 'index'): Promise<void> {
  const cpu = process.cpuUsage();
  const t0 = performance.now();
  const loaded = await loadState(dir, undefined, { index: how === 'index' });
  const wallMs = performance.now() - t0;
  const used = process.cpuUsage(cpu);
  if (loaded.snapshot.via !== how) throw new Error(`read ${loaded.snapshot.via}, not ${how}`);
  (globalThis as { gc?: () => void }).gc?.();
  const load: Load = { cpuMs: (used.user + used.system) / 1000, wallMs, heapMb: process.memoryUsage().heapUsed / 2 ** 20 };
  await loaded.index.runs.close();
  process.stdout.write(`${JSON.stringify(load)}\n`);
}

function loadOnce(dir: string, how: 'whole' | 'index'): Load {
  const out = spawnSync(process.execPath, ['--expose-gc', SELF, '--child', dir, how], { encoding: 'utf8' });
  if (out.status !== 0) throw new Error(`load ${how} failed: ${out.stderr}`);
  return JSON.parse(out.stdout) as Load;
}

/** Median CPU ms of `work` over `rounds` rounds, each on freshly parsed records. */
function timed(records: () => unknown[], rounds: number, work: (values: unknown[]) => void): number {
  const samples: number[] = [];
  for (let r = 0; r < rounds; r++) {
    const values = records();
    const cpu = process.cpuUsage();
    work(values);
    const used = process.cpuUsage(cpu);
    samples.push((used.user + used.system) / 1000);
  }
  return median(samples);
}

export async function main(rounds = DEFAULT_ROUNDS): Promise<void> {
  const base = realpathSync(mkdtempSync(join(tmpdir(), 'droid-mcp-record-load-')));
  try {
    const dir = join(base, 'state');
    mkdirSync(dir, { mode: 0o700 });
    await seedState(dir, { sessions: SESSIONS, runsPerSession: RUNS_PER_SESSION, root: join(base, 'work'), distinctTimes: true });
    const loads = { whole: [] as Load[], index: [] as Load[] };
    for (let r = 0; r < rounds; r++) {
      for (const how of r % 2 === 0 ? (['whole', 'index'] as const) : (['index', 'whole'] as const)) loads[how].push(loadOnce(dir, how));
    }
    const lines = readFileSync(join(dir, STATE_FILE), 'utf8')
      .split('\n')
      .slice(1 + SESSIONS, 1 + SESSIONS + SESSIONS * RUNS_PER_SESSION);
    const records = () => lines.map((line) => recordOfLine(JSON.parse(line), 'run'));
    const guard = timed(records, rounds, (values) => {
      for (const v of values) if (!isRunRecord(v)) throw new Error('the guard refused a seeded run');
    });
    const zod = timed(records, rounds, (values) => {
      for (const v of values) if (!runRecordSchema.safeParse(v).success) throw new Error('zod refused a seeded run');
    });
    const intern = timed(records, rounds, (values) => {
      const pool = new RecordInterner({ maxStrings: 50_000, maxObjects: 4096 });
      for (const v of values) pool.run(v as RunRecord);
    });
    report(loads, { guard, zod, intern }, rounds);
  } finally {
    rmSync(base, { recursive: true, force: true });
  }
}

function report(loads: Record<'whole' | 'index', Load[]>, checks: { guard: number; zod: number; intern: number }, rounds: number): void {
  const m = (how: 'whole' | 'index', key: keyof Load) => median(loads[how].map((l) => l[key]));
  console.log(`${SESSIONS} sessions, ${SESSIONS * RUNS_PER_SESSION} runs; load in a fresh process (median of ${rounds}; CPU, wall, heap after loading):`);
  for (const how of ['whole', 'index'] as const) {
    const label = how === 'whole' ? 'whole snapshot (every run validated and interned)' : 'through the run index (sessions only)';
    console.log(
      `  ${label.padEnd(52)} CPU ${m(how, 'cpuMs').toFixed(0).padStart(6)} ms   wall ${m(how, 'wallMs').toFixed(0).padStart(6)} ms   heap ${m(how, 'heapMb').toFixed(0).padStart(4)} MB`,
    );
  }
  console.log(`the ${SESSIONS * RUNS_PER_SESSION} run records, parsed (CPU, median of ${rounds}):`);
  console.log(`  checked by the derived guard ${checks.guard.toFixed(0).padStart(6)} ms`);
  console.log(`  checked by zod alone         ${checks.zod.toFixed(0).padStart(6)} ms   (the guard saves ${(checks.zod - checks.guard).toFixed(0)} ms)`);
  console.log(`  copied by the interner       ${checks.intern.toFixed(0).padStart(6)} ms`);
  recordGoal({ name: 'load 100k runs, whole snapshot: CPU (no goal)', measured: `${m('whole', 'cpuMs').toFixed(0)} ms`, goal: '-', met: true });
  recordGoal({
    name: '  of which zod alone would add, beyond the guard (no goal)',
    measured: `${(checks.zod - checks.guard).toFixed(0)} ms`,
    goal: '-',
    met: true,
  });
}

if (process.argv[1] === SELF) {
  if (process.argv[2] === '--child') await child(process.argv[3]!, process.argv[4] as 'whole' | 'index');
  else {
    const { printGoals } = await import('./goals.js');
    await main(Number(process.argv[2] ?? DEFAULT_ROUNDS));
    printGoals();
  }
}
