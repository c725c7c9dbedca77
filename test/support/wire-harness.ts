/**
 * Runs one turn through the real per-turn worker process (built to dist/)
 * and collects everything it reported. Every process it starts carries a
 * unique tag so the test can prove none is left behind.
 */
import { randomUUID } from 'node:crypto';
import type { CatalogModel } from '../../src/droid/client.js';
import type { ProgressEvent } from '../../src/droid/turn-collector.js';
import type { TokenUsage } from '../../src/droid/notifications.js';
import type { RenameOutcome, TurnResult, TurnSpec } from '../../src/worker/contract/protocol.js';
import { forkWorker, startWorker, type WorkerHandle } from '../../src/worker/parent/runner.js';
import { afterAll, beforeAll } from 'vitest';
import { makeDroidBed, type DroidBed } from './droid-home.js';
import { MOCK_DROID, WORKER_ENTRY } from './paths.js';
import { warmPoolOn } from './warm-pool.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ChildProcess } from 'node:child_process';

export interface TurnRun {
  handle: WorkerHandle;
  started: Promise<string>;
  /** The start's stages (epoch ms), once started: runner.ts StartTimeline. */
  stages: Record<string, number>;
  events: ProgressEvent[];
  /** Every running usage figure the worker reported, in order. */
  usages: TokenUsage[];
  renames: RenameOutcome[];
  /** The catalogs the worker reported from droid's session answers; `afterStart`: reported after the start was. */
  catalogs: Array<{ models: CatalogModel[]; answeredAt: number; afterStart: boolean }>;
  /** Resolves after the result is acknowledged and the process group is gone. */
  done: Promise<TurnResult>;
}

export function newTag(): string {
  return `t-${randomUUID()}`;
}

export function baseSpec(tag: string, env: Record<string, string>, over: Partial<TurnSpec>): TurnSpec {
  return {
    runId: randomUUID(),
    workspace: '/tmp',
    droidPath: MOCK_DROID,
    droidEnv: { ...env, DROID_MCP_TEST_TAG: tag },
    session: { mode: 'create' },
    model: 'mock-model',
    autonomy: 'low',
    prompt: 'hello',
    timeoutMs: 60_000,
    graceMs: 2_000,
    sandbox: { mode: 'off' },
    ...over,
  };
}

/**
 * A worker prepared the way the warm pool prepares one (src/worker/parent/warm-pool.ts):
 * forked before its turn and told to warm up, with a pre-spawned droid in a
 * private neutral folder when the turn is unconfined. The turn follows at
 * once, so every worker test runs the warm code path with the pool on.
 */
function warmWorker(spec: TurnSpec, env: NodeJS.ProcessEnv): { child: ChildProcess; dir: string | null } {
  const child = forkWorker({ workerEntry: WORKER_ENTRY, env });
  const dir = spec.sandbox.mode === 'off' ? mkdtempSync(join(tmpdir(), 'droid-mcp-warm-')) : null;
  child.send({ type: 'warm', droid: dir ? { droidPath: spec.droidPath, droidEnv: spec.droidEnv, dir } : null }, () => undefined);
  return { child, dir };
}

/** `warm`: undefined follows DROID_MCP_TEST_WARM_POOL (on unless 0). */
export function runWorkerTurn(spec: TurnSpec, tag: string, warm: boolean = warmPoolOn()): TurnRun {
  const events: ProgressEvent[] = [];
  const usages: TokenUsage[] = [];
  const renames: RenameOutcome[] = [];
  const catalogs: TurnRun['catalogs'] = [];
  let resolveStarted!: (id: string) => void;
  const started = new Promise<string>((resolve) => (resolveStarted = resolve));
  const stages: Record<string, number> = {};
  let startReported = false;
  const env = { ...process.env, DROID_MCP_TEST_TAG: tag };
  const prepared = warm ? warmWorker(spec, env) : null;
  const handle = startWorker(spec, {
    ...(prepared && { worker: prepared.child }),
    workerEntry: WORKER_ENTRY,
    env,
    onStarted: (id, at) => {
      Object.assign(stages, at);
      startReported = true;
      resolveStarted(id);
    },
    onProgress: (e) => events.push(e),
    onUsage: (u) => usages.push(u),
    onRename: (r) => renames.push(r),
    onCatalog: (models, answeredAt) => catalogs.push({ models, answeredAt, afterStart: startReported }),
  });
  const done = handle.result.then(async (result) => {
    handle.acknowledge();
    await handle.cleanedUp;
    if (prepared?.dir) rmSync(prepared.dir, { recursive: true, force: true });
    return result;
  });
  return { handle, started, stages, events, usages, renames, catalogs, done };
}

/**
 * The real droid CLI with its scripted model, shared by a whole test file:
 * made before its first test, torn down after its last. Read `.bed` inside
 * tests and hooks only.
 */
export function useRealDroid(): { readonly bed: DroidBed } {
  let bed: DroidBed | undefined;
  beforeAll(async () => {
    bed = await makeDroidBed();
  });
  afterAll(async () => {
    await bed?.cleanup();
  });
  return {
    get bed(): DroidBed {
      if (!bed) throw new Error('the real droid bed is only ready inside tests and hooks');
      return bed;
    },
  };
}

/** A turn for the real droid of `bed`. */
export function realDroidSpec(bed: DroidBed, tag: string, over: Partial<TurnSpec>): TurnSpec {
  return baseSpec(tag, bed.home.env, { droidPath: bed.droidPath, model: bed.modelId, ...over });
}
