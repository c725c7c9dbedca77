/**
 * What every part of the controller shares: the injected effects, the map of
 * turns in memory, the serial chain that orders state changes, the one way
 * to commit, and whether the controller is stopping or halted.
 *
 * Rules it keeps:
 * - The chain orders state changes (commits and the checks they depend on);
 *   it never waits for I/O beyond the store.
 * - Every durable change goes through `commit`: the store, then the derived
 *   indexes, then memory, then the waits hear of it. A failed commit leaves
 *   memory as it was and tells nobody.
 * - State it cannot record stops it (`halt`): it never guesses.
 */
import type { CatalogModel } from '../droid/client.js';
import type { SandboxSpec } from '../sandbox/sandbox.js';
import { ControllerError } from '../shared/public-error.js';
import { TERMINAL_STATES, type RunRecord, type RunResultFile, type SessionRecord } from '../shared/records.js';
import { errnoOf } from '../store/errors.js';
import { planCrashRecovery } from '../store/recovery.js';
import type { Log } from '../util/logger.js';
import type { WorkerHandle, WorkerOptions } from '../worker/parent/runner.js';
import type { Prestart } from '../worker/parent/prestart.js';
import type { TurnSpec } from '../worker/contract/protocol.js';
import type { HostCeilings } from '../shared/budget.js';
import { SessionCheckouts, type CheckoutHost } from './checkouts/checkouts.js';
import type { LaunchDefaults } from './acceptance/turn-settings.js';
import { SessionReader, type ReadableStore } from './sessions/session-reader.js';
import { SessionWaits } from './sessions/session-waits.js';
import type { Turn } from './turns/turn.js';

/** The part of the durable store the controller needs. */
export interface ControllerStore extends ReadableStore {
  runByRequestKey(key: string): RunRecord | undefined;
  commit(change: { sessions?: SessionRecord[]; runs?: RunRecord[] }): Promise<void>;
  writeResult(result: RunResultFile): Promise<void>;
}

export interface ControllerDeps {
  store: ControllerStore;
  models(): Promise<CatalogModel[]>;
  /** A turn's own session answer listed these models at `answeredAt` (ms since the epoch): the catalog may use them (model-catalog.ts `offer`). */
  offerModels?(models: CatalogModel[], answeredAt: number): void;
  resolveWorkspace(requested: string): Promise<string>;
  /** `early`: the worker whose droid was booted for this turn ahead of it (prestartWorker). */
  startWorker(spec: TurnSpec, options: WorkerOptions, early?: Prestart): WorkerHandle;
  /** Boots the droid of a session's next turn ahead of it (next-turn-droids.ts, worker/parent/prestart.ts); absent or null: not now. */
  prestartWorker?(spec: TurnSpec): Prestart | null;
  /** How long a droid booted for a session's next turn waits once the session is idle (timeline.ts NEXT_TURN_DROID_IDLE_MS). */
  nextTurnDroidIdleMs?: number;
  policy: LaunchDefaults;
  maxConcurrentRuns: number;
  runTimeoutMs: number;
  cancelGraceMs: number;
  /** The operator's spend ceilings (config); absent: none. */
  ceilings?: HostCeilings;
  /** A live turn's running usage is made durable at most this often (live-usage.ts); absent: its default. */
  liveUsageWriteMs?: number;
  /** Where sessions' folders of droid's file snapshots are kept (turn-spec.ts TurnHost); absent: none kept. */
  snapshotsRoot?: string;
  /** Compact before a turn once the session's last context occupancy reached this fraction (config autoCompactAt); null: off. */
  autoCompactAt?: number | null;
  droidPath: string;
  droidEnv: Record<string, string>;
  /** How turns are confined; `sandboxUnavailable` says why the configured sandbox cannot run (every turn then fails). */
  sandbox: SandboxSpec;
  sandboxUnavailable: string | null;
  /** The configured Amp MCP endpoint; null: reply-back is off and routed requests are refused. */
  ampMcpUrl: string | null;
  /** Per-session checkouts (config `worktrees`); absent or null: isolation is off. */
  worktrees?: CheckoutHost | null;
  log: Log;
  now?: () => Date;
}

export class ControllerState {
  /** Every turn accepted and not yet released, in acceptance order (the FIFO queue). */
  readonly turns = new Map<string, Turn>();
  /** Runs whose records a commit under way holds. A run accepted by it is in no other before it lands, which is what `committing` asks. */
  private readonly inCommit = new Set<string>();
  readonly reader: SessionReader;
  readonly waits: SessionWaits;
  readonly checkouts: SessionCheckouts;
  readonly store: ControllerStore;
  readonly log: Log;
  readonly now: () => Date;
  /** Orders state changes (commits and the checks they depend on); never I/O beyond the store. */
  private chain: Promise<unknown> = Promise.resolve();
  private stopping = false;
  /** Set when state could not be recorded: the controller refuses to continue. */
  private haltedWith: { error: ControllerError; shown: Map<string, RunRecord> } | null = null;

  /** Each part of the controller is given the effects it uses (controller.ts); all share the store, the log and the clock. */
  constructor(deps: ControllerDeps) {
    this.store = deps.store;
    this.log = deps.log;
    this.now = deps.now ?? (() => new Date());
    this.checkouts = new SessionCheckouts(this, deps);
    this.reader = new SessionReader(
      deps.store,
      {
        live: (runId) => this.turns.get(runId),
        shown: (run) => this.haltedWith?.shown.get(run.id) ?? run,
        override: (runId) => this.haltedWith?.shown.get(runId),
      },
      deps.resolveWorkspace,
      deps.log,
    );
    this.waits = new SessionWaits(this.reader, deps.log);
  }

  /** A graceful stop began: nothing new is accepted, admitted or started. */
  get stopped(): boolean {
    return this.stopping;
  }

  /** State could not be recorded: nothing new is accepted, admitted, started or approved. */
  get halted(): boolean {
    return this.haltedWith !== null;
  }

  stop(): void {
    this.stopping = true;
  }

  serialized<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.chain.then(fn, fn);
    this.chain = next.catch(() => undefined);
    return next;
  }

  /** Settles once every state change queued so far is done. */
  drained(): Promise<unknown> {
    return this.chain;
  }

  /**
   * Every durable change goes through here. Once the store has it: the
   * derived indexes; a turn whose run ended while it waited in line leaves
   * the line (one already admitted belongs to its owner, which sees the run
   * ended); then `apply`, the caller's own change of memory; and only then
   * are waits and listeners told, so none sees the record before memory.
   */
  async commit(change: { sessions?: SessionRecord[]; runs?: RunRecord[] }, apply?: () => void): Promise<void> {
    const ids = (change.runs ?? []).map((run) => run.id);
    for (const id of ids) this.inCommit.add(id);
    try {
      await this.store.commit(change);
      this.reader.noteCommitted(change);
      for (const run of change.runs ?? []) {
        const turn = this.turns.get(run.id);
        if (turn?.inLine() && TERMINAL_STATES.includes(run.state)) {
          this.turns.delete(run.id);
          turn.drop();
        }
      }
      apply?.();
    } finally {
      for (const id of ids) this.inCommit.delete(id);
    }
    this.changed();
  }

  /** Whether a commit holding this run's record is under way: an accepted run is not in `turns` until it lands. */
  committing(runId: string): boolean {
    return this.inCommit.has(runId);
  }

  session(id: string): SessionRecord {
    return this.reader.session(id);
  }

  run(id: string): RunRecord {
    const run = this.store.runs.get(id);
    if (!run) throw new Error(`internal: run ${id} missing`);
    return run;
  }

  /** A change of memory only (a live turn's progress or usage): waits and listeners look again. Commits tell them themselves. */
  changed(): void {
    this.waits.changed();
  }

  assertRunning(): void {
    if (this.haltedWith) throw this.haltedWith.error;
    if (this.stopping) {
      throw new ControllerError('controller_stopping', 'the controller is shutting down', 'Retry with the same requestKey once it has restarted.', true);
    }
  }

  /**
   * The state directory cannot be written: refuse to continue rather than
   * guess. Nothing new is accepted or started, live turns are stopped (their
   * results could not be recorded either), and every turn in flight reads as
   * a restart will record it: live → unknown, queued → queue_lost.
   */
  halt(cause: unknown): void {
    if (this.haltedWith) return;
    // The errno only: the store's message names the state directory, which callers never see.
    const errno = errnoOf(cause) ?? errnoOf((cause as { cause?: unknown } | null)?.cause);
    const error = new ControllerError(
      'state_unwritable',
      `the controller could not record state and stopped accepting work${errno ? ` (${errno})` : ''}`,
      'Fix the state directory (disk space, permissions), then restart the controller; turns that were in flight will read as unknown or queue_lost.',
    );
    const inFlight = [...this.turns.keys()].map((id) => this.run(id)).filter((r) => !TERMINAL_STATES.includes(r.state));
    const unrecorded = { code: 'result_unrecorded', message: "the controller could not record this turn's result; its outcome is unknown", retryable: false };
    const shown = new Map(planCrashRecovery(inFlight, this.now()).runs.map((r) => [r.id, r.state === 'unknown' ? { ...r, error: unrecorded } : r]));
    this.haltedWith = { error, shown };
    this.log.error({ err: cause }, 'state could not be recorded; the controller refuses further work until restarted');
    for (const turn of this.turns.values()) {
      turn.stopUnrequested();
      this.reader.invalidate(turn.sessionId);
    }
    this.changed();
  }
}

export function workspaceChanged(): ControllerError {
  return new ControllerError(
    'workspace_changed',
    "the session's workspace no longer resolves to the directory it was created in",
    'Start a new session in the intended directory; a session never moves between directories.',
  );
}
