/**
 * The controller with its effects replaced, for the controller's unit tests:
 * an in-memory store and scripted workers. (The real store, workers and
 * droid are covered by the store, wire and end-to-end tiers.)
 */
import type { CatalogModel } from '../../../src/droid/client.js';
import { SessionController, type ControllerStore } from '../../../src/controller/controller.js';
import { ControllerError } from '../../../src/shared/public-error.js';
import type { RunRecord, RunResultFile, SessionRecord } from '../../../src/shared/records.js';
import { stoppedResult, type TurnEvidence, type TurnResult, type TurnSpec } from '../../../src/worker/contract/protocol.js';
import type { TurnStop } from '../../../src/shared/turn-stop.js';
import type { WorkerHandle, WorkerOptions } from '../../../src/worker/parent/runner.js';
import type { Prestart } from '../../../src/worker/parent/prestart.js';

class MemoryStore implements ControllerStore {
  sessions = new Map<string, SessionRecord>();
  runs = new Map<string, RunRecord>();
  results = new Map<string, RunResultFile>();
  commits = 0;
  /** Commits that will fail, as a failing disk would. */
  failNext = 0;
  /** Fails every commit this matches (a disk that fails some writes). */
  failWhen: ((change: { sessions?: SessionRecord[]; runs?: RunRecord[] }) => boolean) | null = null;
  /** Holds a matching commit until the returned promise settles (a slow disk). */
  holdWhen: ((change: { sessions?: SessionRecord[]; runs?: RunRecord[] }) => Promise<void> | null) | null = null;
  runsBySession(id: string) {
    return [...this.runs.values()].filter((r) => r.sessionId === id).sort((a, b) => a.seq - b.seq);
  }
  runByRequestKey(key: string) {
    return [...this.runs.values()].find((r) => r.requestKey === key);
  }
  async commit(change: { sessions?: SessionRecord[]; runs?: RunRecord[] }) {
    await this.holdWhen?.(change);
    if (this.failNext > 0 || this.failWhen?.(change)) {
      if (this.failNext > 0) this.failNext--;
      throw new Error('EIO: i/o error, write');
    }
    this.commits++;
    for (const s of change.sessions ?? []) this.sessions.set(s.id, structuredClone(s));
    for (const r of change.runs ?? []) this.runs.set(r.id, structuredClone(r));
  }
  /** Holds a matching result file write until the returned promise settles (a slow fsync). */
  holdResult: ((runId: string) => Promise<void> | null) | null = null;
  async writeResult(result: RunResultFile) {
    await this.holdResult?.(result.runId);
    this.results.set(result.runId, result);
  }
  async readResult(runId: string) {
    return this.results.get(runId);
  }
}

/** The model's first streamed words, as the worker reports them. */
export const PARTIAL = { kind: 'assistant_partial', text: 'thinking' } as const;

export interface FakePrestart extends Prestart {
  spec: TurnSpec;
  disposed: number;
}

export interface FakeTurn {
  spec: TurnSpec;
  options: WorkerOptions;
  /** The droid started for it while it waited, if the launch was given one. */
  early: Prestart | undefined;
  cancelled: boolean;
  /** The controller asked the worker to leave the Factory title for a later turn. */
  renameSkipped: boolean;
  /** The run's durable state when the worker was acknowledged (undefined: never). */
  stateAtAck: string | undefined;
  /** The worker's result: droid ended `completed` unless `stop` says otherwise. */
  finish(result: Partial<TurnEvidence> & { stop?: TurnStop }): void;
  /** The worker and its group are gone (automatic on acknowledge unless holdExit). */
  exit(): void;
}

export function setup(
  over: {
    maxConcurrentRuns?: number;
    holdExit?: boolean;
    models?: () => Promise<CatalogModel[]>;
    offerModels?: (models: CatalogModel[], answeredAt: number) => void;
    sandboxUnavailable?: string;
    ampMcpUrl?: string;
    store?: MemoryStore;
    /** Boot droids for sessions' next turns (prestartWorker). */
    prestart?: boolean;
    /** How long such a droid waits once its session is idle. */
    nextTurnDroidIdleMs?: number;
    /** Called as each worker is started, before it exists. */
    onStartWorker?: (spec: TurnSpec) => void;
  } = {},
) {
  const store = over.store ?? new MemoryStore();
  /** Workspaces whose real path changed since (a symlink swapped in). */
  const moved = new Map<string, string>();
  const turns: FakeTurn[] = [];
  const catalog: CatalogModel[] = [{ id: 'm1', supportedReasoningEfforts: ['low', 'high'], defaultReasoningEffort: 'low' }];
  const spawn = { fail: false };
  /** Droids booted for sessions' next turns (next-turn-droids.ts), as the controller asked for them. */
  const prestarts: FakePrestart[] = [];
  const prestartWorker = (spec: TurnSpec): Prestart => {
    const early: FakePrestart = {
      spec,
      disposed: 0,
      worker: {} as Prestart['worker'],
      confined: {} as Prestart['confined'],
      dispose: async () => void early.disposed++,
    };
    prestarts.push(early);
    return early;
  };
  const startWorker = (spec: TurnSpec, options: WorkerOptions, early?: Prestart): WorkerHandle => {
    over.onStartWorker?.(spec);
    if (spawn.fail) throw new Error('spawn EAGAIN');
    let settle!: (r: TurnResult) => void;
    const result = new Promise<TurnResult>((r) => (settle = r));
    let exited!: () => void;
    const cleanedUp = new Promise<void>((r) => (exited = r));
    const turn: FakeTurn = {
      spec,
      options,
      early,
      cancelled: false,
      renameSkipped: false,
      stateAtAck: undefined,
      finish: ({ stop = { kind: 'ended', end: 'completed' }, ...evidence }) =>
        settle(stoppedResult(stop, { submitted: true, droidSessionId: 'droid-1', ...evidence })),
      exit: () => exited(),
    };
    turns.push(turn);
    return {
      pid: 0,
      result,
      cleanedUp,
      cancel: () => {
        turn.cancelled = true;
      },
      acknowledge: () => {
        turn.stateAtAck = store.runs.get(spec.runId)?.state;
        if (!over.holdExit) exited();
      },
      skipRename: () => {
        turn.renameSkipped = true;
      },
    };
  };
  const quiet = { info() {}, warn() {}, error() {} };
  const controller = new SessionController({
    store,
    models: over.models ?? (async () => catalog),
    ...(over.offerModels && { offerModels: over.offerModels }),
    resolveWorkspace: async (p) => {
      if (!p.startsWith('/ok')) throw new ControllerError('workspace_not_approved', 'no', 'add it');
      return moved.get(p) ?? p;
    },
    startWorker,
    ...(over.prestart && { prestartWorker }),
    ...(over.nextTurnDroidIdleMs !== undefined && { nextTurnDroidIdleMs: over.nextTurnDroidIdleMs }),
    policy: { defaultModel: 'm1', defaultAutonomy: 'medium', maxAutonomy: 'high', reasoningEffort: 'high' },
    maxConcurrentRuns: over.maxConcurrentRuns ?? 4,
    runTimeoutMs: 60_000,
    cancelGraceMs: 1_000,
    sandbox: { mode: 'off' },
    sandboxUnavailable: over.sandboxUnavailable ?? null,
    droidPath: '/bin/droid',
    droidEnv: {},
    ampMcpUrl: over.ampMcpUrl ?? null,
    log: quiet,
  });
  return { store, turns, controller, moved, spawn, prestarts };
}

export const tick = async (n = 5) => {
  for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
};
export const create = (c: SessionController, key: string, workspace = '/ok/a', extra: object = {}) =>
  c.create({ requestKey: key, workspace, prompt: `prompt ${key}`, replyTo: null, ...extra });
