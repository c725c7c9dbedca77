/**
 * Turn start, side by side in one run (issues 12 and 19), median of RUNS:
 *  - bare cold droid: spawn in the workspace → initialize_session →
 *    add_user_message → the turn's first request at the scripted model (the
 *    floor every variant is compared with);
 *  - the same bare droid inside the project's bwrap line (not judged): the
 *    floor of the default path, bubblewrap's own cost with nothing of ours;
 *  - the same bare droid with a cold Node worker starting beside it (not
 *    judged): what a worker's start costs droid's when they overlap whole
 *    (bare-droid.ts);
 *  - the server, `droid_create_session` called → the turn's first model
 *    request, for each of: warm pool off / on, sandbox off / bwrap. With the
 *    sandbox off the pool holds a pre-spawned droid; under bwrap only the
 *    Node worker is warm (a sandbox's binds are fixed when droid is spawned);
 *  - an idle session's follow-up, `droid_send_message` → its first model
 *    request, pool off / on (sandbox off);
 *  - the previous turn's slot hold: result → worker and group gone, with and
 *    without a follow-up waiting (skip_rename);
 *  - the pool's memory: resident set of one idle warm worker's process group;
 *  - each create's start stage by stage, beside bare droid's (turn-timeline.ts).
 * Variants are interleaved so machine noise hits each alike; ratios matter.
 * Goals (turnStartGoal): the default, bwrap with the pool, ≤ 1.2× bare (issue
 * 38); the others printed, retired; follow-up with the pool ≤ 0.3×.
 *
 * Run: npm run build && node dist/bench/latency.js [runs]
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { recordGoal } from './goals.js';
import { setTimeout as sleep } from 'node:timers/promises';
import { bareDroid, idleDroid, marker, modelRequestWith } from './bare-droid.js';
import { median, spread } from './stats.js';
import { startWorker } from '../src/worker/parent/runner.js';
import { makeDroidBed, type DroidBed } from '../test/support/droid-home.js';
import { script } from '../src/testbed/scripted-model.js';
import { startServer, writeConfig, type RunningServer } from '../test/support/mcp-server.js';
import { WORKER_ENTRY } from '../test/support/paths.js';
import { epochMs } from '../src/util/epoch.js';
import { loggedStart, printTimelines, type StageOffsets } from './turn-timeline.js';

/**
 * Nine, not five: at five samples a run the median of one row moved by up to
 * ±10% between runs on this host (the default path read 0.98×, 1.19×, 0.98×
 * and 1.06× in four runs of one build), more than the ±5% its goal judges.
 */
const DEFAULT_RUNS = 9;
/** Pause between samples: the previous turn's cleanup and the pool's refill must not land on the next sample. */
const SETTLE_MS = 2_500;

interface Variant {
  label: string;
  sandbox: 'off' | 'bwrap';
  pool: boolean;
  server?: RunningServer;
  root?: string;
  create: number[];
  /** Each create's start, stage by stage (the server's log). */
  timelines: StageOffsets[];
  followUp: number[];
}

async function startVariant(bed: DroidBed, base: string, v: Variant, bwrap: string | null): Promise<void> {
  const root = join(base, v.label.replace(/[^a-z0-9]+/gi, '-'));
  // Workspaces under an approved folder beside the state directory (never around it: config/placement.ts).
  const approved = join(root, 'approved');
  mkdirSync(approved, { recursive: true });
  v.root = approved;
  const config = writeConfig(root, {
    approvedDirectories: [approved],
    stateDirectory: join(root, 'state'),
    droidPath: bed.droidPath,
    defaultModel: bed.modelId,
    modelCacheTtlMs: 600_000,
    warmPoolSize: v.pool ? 1 : 0,
    maxConcurrentRuns: 2,
    ...(v.sandbox === 'off' ? { sandbox: 'off' } : { sandbox: 'bwrap', bwrapPath: bwrap }),
  });
  v.server = await startServer(config, bed.home.env);
  await v.server.ok('droid_models'); // the catalog probe is not part of a turn's start-up
}

async function createTurn(bed: DroidBed, v: Variant, i: number): Promise<{ ms: number; session: string; stages: StageOffsets | null }> {
  const ws = join(v.root!, `ws-${i}`);
  mkdirSync(ws);
  const m = marker('create');
  const t0 = epochMs();
  const accepted = await v.server!.ok<{ metadata: { session: string } }>('droid_create_session', {
    requestKey: `bench-${i}`,
    workspace: ws,
    prompt: `${m} ${script({ text: 'ok' })}`,
    autonomy: 'off',
    replyTo: null,
  });
  const at = await modelRequestWith(bed, m);
  await v.server!.ok('droid_wait_for_sessions', { sessions: [accepted.metadata.session], timeoutSeconds: 60 });
  const stages = loggedStart(v.server!.stderr(), accepted.metadata.session, t0);
  if (stages) stages.model_request = at - t0;
  return { ms: at - t0, session: accepted.metadata.session, stages };
}

async function followUpTurn(bed: DroidBed, v: Variant, session: string, i: number): Promise<number> {
  const m = marker('follow');
  const t0 = Date.now();
  await v.server!.ok('droid_send_message', { requestKey: `bench-f-${i}`, session, prompt: `${m} ${script({ text: 'ok' })}` });
  const at = await modelRequestWith(bed, m);
  await v.server!.ok('droid_wait_for_sessions', { sessions: [session], timeoutSeconds: 60 });
  return at - t0;
}

/** Resident set (MiB) of the idle warm workers' process groups under a server (its direct children). */
function poolRssMiB(serverPid: number): { workers: number; mib: number } {
  const stats = new Map<number, { ppid: number; pgid: number; rssKb: number }>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'latin1');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const rss = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${name}/status`, 'latin1'));
      stats.set(Number(name), { ppid: Number(fields[1]), pgid: Number(fields[2]), rssKb: rss ? Number(rss[1]) : 0 });
    } catch {
      // gone
    }
  }
  const workers = [...stats].filter(([, s]) => s.ppid === serverPid).map(([pid]) => pid);
  let kb = 0;
  for (const [, s] of stats) if (workers.includes(s.pgid)) kb += s.rssKb;
  return { workers: workers.length, mib: kb / 1024 };
}

/** The previous turn's hold on its slot: result → worker exited and its group gone (cold worker, sandbox off). */
async function slotHold(bed: DroidBed, ws: string, followUpWaiting: boolean): Promise<number> {
  const handle = startWorker(
    {
      runId: `hold-${Math.random()}`,
      workspace: ws,
      droidPath: bed.droidPath,
      droidEnv: bed.home.env,
      session: { mode: 'create', title: 'Bench hold' },
      model: bed.modelId,
      autonomy: 'off',
      prompt: `hold ${script({ text: 'ok' })}`,
      timeoutMs: 60_000,
      graceMs: 2_000,
      sandbox: { mode: 'off' },
      renameTo: 'Bench hold',
    },
    { workerEntry: WORKER_ENTRY },
  );
  if (followUpWaiting) handle.skipRename();
  await handle.result;
  const t0 = Date.now();
  handle.acknowledge();
  await handle.cleanedUp;
  return Date.now() - t0;
}

/**
 * Turn start ÷ bare cold droid. Issue 38 holds the default (bwrap, pool on)
 * at 1.2×, and retired issue 19's 1.05× (default) and 1.10× (cold) goals:
 * they sat below what this process model reaches on this host. Issue 12's
 * warm droid (sandbox off, pool on) 0.25× was retired by issue 19.
 */
function turnStartGoal(v: Variant): number {
  if (!v.pool) return 1.1;
  return v.sandbox === 'off' ? 0.25 : 1.2;
}

function turnStartRetired(v: Variant): string | undefined {
  if (v.pool && v.sandbox === 'off') return 'by issue 19 (below a floor issue 12 measured)';
  return v.pool ? undefined : 'by issue 38 (below what the process model reaches here)';
}

const shortLabel = (v: Variant) => `${v.sandbox === 'off' ? 'unconf.' : 'bwrap'} pool ${v.pool ? 'on' : 'off'}`;

export function findBwrap(): string | null {
  try {
    return execFileSync('sh', ['-c', 'command -v bwrap'], { encoding: 'utf8' }).trim() || null;
  } catch {
    return null;
  }
}

/** The samples driven directly (bare-droid.ts), without a server. */
interface Floors {
  bare: number[];
  bareStages: StageOffsets[];
  /** The same bare droid in the project's bwrap line; empty without bwrap. */
  bwrap: number[];
  bwrapStages: StageOffsets[];
  besideNode: number[];
  idle: number[];
}

/** One round of the direct samples, each followed by the settle; returns the bare droid's workspace. */
async function floorRound(bed: DroidBed, base: string, i: number, bwrapPath: string | null, floors: Floors): Promise<string> {
  const fresh = (name: string) => {
    const dir = join(base, `${name}-${i}`);
    mkdirSync(dir);
    return dir;
  };
  const ws = fresh('bare');
  const b = await bareDroid(bed, ws);
  floors.bare.push(b.ms);
  floors.bareStages.push(b.stages);
  await sleep(SETTLE_MS);
  if (bwrapPath) {
    const confined = await bareDroid(bed, fresh('bare-bwrap'), { bwrapPath });
    floors.bwrap.push(confined.ms);
    floors.bwrapStages.push(confined.stages);
    await sleep(SETTLE_MS);
  }
  floors.besideNode.push((await bareDroid(bed, fresh('beside'), { besideNode: true })).ms);
  await sleep(SETTLE_MS);
  floors.idle.push(await idleDroid(bed, fresh('idle-ws'), fresh('idle'), SETTLE_MS));
  await sleep(SETTLE_MS);
  return ws;
}

export async function main(runs = DEFAULT_RUNS): Promise<void> {
  const bed = await makeDroidBed();
  const base = realpathSync(mkdtempSync(join(tmpdir(), 'droid-mcp-bench-')));
  const bwrap = findBwrap();
  const variants: Variant[] = [
    { label: 'cold (pool off), sandbox off', sandbox: 'off', pool: false, create: [], timelines: [], followUp: [] },
    { label: 'warm (pool on), sandbox off', sandbox: 'off', pool: true, create: [], timelines: [], followUp: [] },
    ...(bwrap
      ? ([
          { label: 'cold (pool off), sandbox bwrap', sandbox: 'bwrap', pool: false, create: [], timelines: [], followUp: [] },
          { label: 'warm Node only (pool on), sandbox bwrap', sandbox: 'bwrap', pool: true, create: [], timelines: [], followUp: [] },
        ] as Variant[])
      : []),
  ];
  const floors: Floors = { bare: [], bareStages: [], bwrap: [], bwrapStages: [], besideNode: [], idle: [] };
  const { bare, bareStages } = floors;
  const holds = { waiting: [] as number[], idle: [] as number[] };
  const memory: Array<{ label: string; workers: number; mib: number }> = [];
  try {
    for (const v of variants) await startVariant(bed, base, v, bwrap);
    await sleep(SETTLE_MS);
    for (const v of variants.filter((x) => x.pool)) memory.push({ label: v.label, ...poolRssMiB(v.server!.pid) });
    for (let i = 0; i < runs; i++) {
      const ws = await floorRound(bed, base, i, bwrap, floors);
      for (const v of variants) {
        const { ms, session, stages } = await createTurn(bed, v, i);
        v.create.push(ms);
        if (stages) v.timelines.push(stages);
        await sleep(SETTLE_MS);
        if (v.sandbox === 'off') {
          v.followUp.push(await followUpTurn(bed, v, session, i));
          await sleep(SETTLE_MS);
        }
      }
      holds.waiting.push(await slotHold(bed, ws, true));
      holds.idle.push(await slotHold(bed, ws, false));
    }
    const b = median(bare);
    // Each row's fastest and slowest sample beside its median: how far one run's verdict can be trusted.
    const row = (label: string, samples: number[], goal = '') =>
      console.log(
        `  ${label.padEnd(58)} ${median(samples).toFixed(0).padStart(6)} ms   ratio ${(median(samples) / b).toFixed(2)}   (${spread(samples)})${goal ? `   (goal ${goal})` : ''}`,
      );
    console.log(`turn start: call → the turn's first model request, median of ${runs}, in one run`);
    row('bare cold droid: spawn → initialize → first model request', bare);
    // Floors printed beside the goals and in their table, never judged.
    const unjudged = (label: string, samples: number[], goalName: string, why: string) => {
      row(label, samples, `none: ${why}`);
      const ms = median(samples);
      recordGoal({ name: `${goalName} (no goal)`, measured: `${ms.toFixed(0)} ms = ${(ms / b).toFixed(2)}x`, goal: '-', met: true });
    };
    unjudged(
      'idle droid, driven directly: initialize → first model request',
      floors.idle,
      'the floor: an idle droid driven directly',
      'the floor of a warm path',
    );
    unjudged(
      'bare cold droid, a cold Node worker starting beside it',
      floors.besideNode,
      'bare droid with a cold Node worker beside it',
      'a worker start overlapping droid',
    );
    if (floors.bwrap.length > 0)
      unjudged("bare cold droid in the project's bwrap line", floors.bwrap, "bare droid in the project's bwrap line", "the default path's floor");
    const judged = (name: string, ms: number, limit: number, retired?: string) =>
      recordGoal({
        name,
        measured: `${ms.toFixed(0)} ms = ${(ms / b).toFixed(2)}x`,
        goal: `<= ${limit.toFixed(2)}x bare ${b.toFixed(0)} ms`,
        met: ms / b <= limit,
        ...(retired && { retired }),
      });
    for (const v of variants) {
      const limit = turnStartGoal(v);
      row(`server create, ${v.label}`, v.create, `≤ ${limit.toFixed(2)}${turnStartRetired(v) ? ', retired' : ''}`);
      judged(`turn start, ${v.label}`, median(v.create), limit, turnStartRetired(v));
    }
    console.log("turn start, stage by stage (the server's stages from its log; bare droid's taken by the bench):");
    const bareRows = [{ label: 'bare droid', runs: bareStages }, ...(floors.bwrap.length > 0 ? [{ label: 'bare in bwrap', runs: floors.bwrapStages }] : [])];
    printTimelines([...bareRows, ...variants.map((v) => ({ label: shortLabel(v), runs: v.timelines }))]);
    // What the sandbox costs a turn start: the same server path with and without bubblewrap (issue 17).
    for (const pool of [false, true]) {
      const off = variants.find((v) => v.sandbox === 'off' && v.pool === pool);
      const on = variants.find((v) => v.sandbox === 'bwrap' && v.pool === pool);
      if (!off || !on) continue;
      const [a, c] = [median(off.create), median(on.create)];
      console.log(
        `  sandbox cost per turn start, pool ${pool ? 'on' : 'off'}: bwrap ${c.toFixed(0)} ms vs off ${a.toFixed(0)} ms = ${(c / a).toFixed(2)}x (+${(c - a).toFixed(0)} ms)`,
      );
    }
    console.log(`follow-up: droid_send_message on an idle session → its first model request, median of ${runs}`);
    for (const v of variants.filter((x) => x.sandbox === 'off')) {
      row(`server send, ${v.label}`, v.followUp, v.pool ? '≤ 0.30' : '');
      if (v.pool) judged(`idle follow-up, ${v.label}`, median(v.followUp), 0.3);
    }
    console.log(`slot hold of the previous turn: its result → worker and group gone, median of ${runs}`);
    console.log(`  a follow-up waiting (rename skipped, droid killed once close_session is answered) ${median(holds.waiting).toFixed(0).padStart(6)} ms`);
    console.log(`  nobody waiting (rename applied, droid exits by itself)                         ${median(holds.idle).toFixed(0).padStart(6)} ms`);
    console.log('memory of the idle pool (resident set of each warm worker group: Node worker + droid, if any)');
    for (const m of memory) console.log(`  ${m.label.padEnd(44)} ${m.workers} worker(s), ${(m.mib / Math.max(1, m.workers)).toFixed(0)} MiB per warm worker`);
  } finally {
    for (const v of variants) await v.server?.close().catch(() => undefined);
    await bed.cleanup();
    rmSync(base, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  main(Number(process.argv[2]) || DEFAULT_RUNS).catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
