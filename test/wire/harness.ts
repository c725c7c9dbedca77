/**
 * Runs one turn through the real per-turn worker process (built to dist/)
 * and collects everything it reported. Every process it starts carries a
 * unique tag so the test can prove none is left behind.
 */
import { randomUUID } from 'node:crypto';
import type { ProgressEvent } from '../../src/droid/turn-collector.js';
import type { RenameOutcome, TurnResult, TurnSpec } from '../../src/worker/protocol.js';
import { startWorker, type WorkerHandle } from '../../src/worker/runner.js';
import { afterAll, beforeAll } from 'vitest';
import { makeDroidBed, type DroidBed } from '../support/droid-home.js';
import { MOCK_DROID, WORKER_ENTRY } from '../support/paths.js';


export interface TurnRun {
  handle: WorkerHandle;
  started: Promise<string>;
  events: ProgressEvent[];
  renames: RenameOutcome[];
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

export function runWorkerTurn(spec: TurnSpec, tag: string): TurnRun {
  const events: ProgressEvent[] = [];
  const renames: RenameOutcome[] = [];
  let resolveStarted!: (id: string) => void;
  const started = new Promise<string>((resolve) => (resolveStarted = resolve));
  const handle = startWorker(spec, {
    workerEntry: WORKER_ENTRY,
    env: { ...process.env, DROID_MCP_TEST_TAG: tag },
    onStarted: resolveStarted,
    onProgress: (e) => events.push(e),
    onRename: (r) => renames.push(r),
  });
  const done = handle.result.then(async (result) => {
    handle.acknowledge();
    await handle.cleanedUp;
    return result;
  });
  return { handle, started, events, renames, done };
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
