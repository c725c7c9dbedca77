/**
 * Cost of one durable state transition (commit of one changed run) as the
 * history grows from 1k to 100k runs. The store's design promise is that this
 * cost does not depend on history size; the 100k/1k ratio should stay near 1
 * (target: within 2x).
 *
 * Run: npm run build && node dist/bench/state-transition.js
 */
import { mkdir, mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Log } from '../src/util/logger.js';
import type { RunRecord } from '../src/shared/records.js';
import { STATE_FILE } from '../src/store/formats/snapshot.js';
import { StateStore } from '../src/store/store.js';
import { percentile, seedState } from './seed.js';

const SIZES = [1_000, 10_000, 100_000];
const RUNS_PER_SESSION = 10;
const WARMUP = 30;
const COMMITS = 1_200;
const ROUNDS = 12;
const quiet: Log = { info() {}, warn() {}, error() {} };

interface Figures {
  runs: number;
  snapshotMB: number;
  openMs: number;
  p50: number;
  p99: number;
  mean: number;
}

interface Subject {
  runs: number;
  base: string;
  store: StateStore;
  ids: string[];
  snapshotMB: number;
  openMs: number;
  samples: number[];
  commits: number;
}

async function prepare(runCount: number): Promise<Subject> {
  const base = await mkdtemp(join(tmpdir(), 'droid-mcp-bench-'));
  const dir = join(base, 'state');
  await mkdir(dir, { mode: 0o700 });
  await seedState(dir, { sessions: runCount / RUNS_PER_SESSION, runsPerSession: RUNS_PER_SESSION });
  const snapshotMB = (await stat(join(dir, STATE_FILE))).size / 1e6;
  const openStart = performance.now();
  const store = await StateStore.open(dir, { logger: quiet });
  const openMs = performance.now() - openStart;
  return { runs: runCount, base, store, ids: [...store.runs.keys()], snapshotMB, openMs, samples: [], commits: 0 };
}

/** One durable state transition: a run changes, the commit resolves once fsynced. */
async function transition(subject: Subject, record: boolean): Promise<void> {
  const i = subject.commits++;
  // Spread over the history, so no run stays hot in any cache.
  const current = subject.store.runs.get(subject.ids[(i * 7919) % subject.ids.length]!)!;
  const changed: RunRecord = { ...current, preview: `revised ${i}`, needsAttention: i % 2 === 0 };
  const t = performance.now();
  await subject.store.commit({ runs: [changed] });
  if (record) subject.samples.push(performance.now() - t);
}

function figures(subject: Subject): Figures {
  const sorted = [...subject.samples].sort((a, b) => a - b);
  const mean = sorted.reduce((a, b) => a + b, 0) / sorted.length;
  return {
    runs: subject.runs,
    snapshotMB: subject.snapshotMB,
    openMs: subject.openMs,
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
    mean,
  };
}

export async function main(): Promise<Figures[]> {
  console.log(`state transition: one durable commit of one changed RunRecord, ${COMMITS} commits per size after ${WARMUP} warm-up`);
  const subjects: Subject[] = [];
  try {
    for (const size of SIZES) subjects.push(await prepare(size));
    for (const subject of subjects) for (let i = 0; i < WARMUP; i++) await transition(subject, false);
    // Interleaved rounds: every size sees the same disk and GC conditions, so the ratio is fair.
    for (let round = 0; round < ROUNDS; round++) {
      for (const subject of subjects) for (let i = 0; i < COMMITS / ROUNDS; i++) await transition(subject, true);
    }
  } finally {
    for (const subject of subjects) {
      await subject.store.close();
      await rm(subject.base, { recursive: true, force: true });
    }
  }

  const results = subjects.map(figures);
  console.log('runs     snapshot   open(ms)   p50(ms)  p99(ms)  mean(ms)');
  for (const f of results) {
    console.log(
      `${String(f.runs).padEnd(8)} ${f.snapshotMB.toFixed(1).padStart(6)} MB ${f.openMs.toFixed(0).padStart(9)} ` +
        `${f.p50.toFixed(3).padStart(9)} ${f.p99.toFixed(3).padStart(8)} ${f.mean.toFixed(3).padStart(9)}`,
    );
  }
  const small = results[0]!;
  const large = results[results.length - 1]!;
  const ratio = (a: number, b: number): string => (a / b).toFixed(2);
  console.log(
    `ratio ${large.runs / 1000}k/${small.runs / 1000}k: p50 ${ratio(large.p50, small.p50)}x, p99 ${ratio(large.p99, small.p99)}x, ` +
      `mean ${ratio(large.mean, small.mean)}x (target ≤ 2x)`,
  );
  return results;
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  main().catch((err: unknown) => {
    console.error(err);
    process.exitCode = 1;
  });
}
