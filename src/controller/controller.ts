/**
 * The session controller: accepts turns durably, admits them FIFO under
 * capacity and workspace locks, runs each in its own worker, and records
 * how each ended. Effects (store, workers, catalog, clock) are injected.
 *
 * Rules it keeps:
 * - Each admitted turn has one owner (`Turn`, run by `own`), which releases
 *   the claim in `finally`, after the worker's process group is gone.
 * - A transition commits first, then changes memory; a failed commit leaves
 *   memory as it was and the caller gets the error.
 * - Inputs that need I/O (catalog, workspace resolution) are resolved before
 *   the serial chain; the chain only orders state changes.
 * - State it cannot record stops it (`halt`): it never guesses.
 */
import { EventEmitter } from 'node:events';
import { randomUUID } from 'node:crypto';
import type { CatalogModel } from '../droid/client.js';
import { acceptedRun, TERMINAL_STATES, type RunRecord, type RunReply, type RunResultFile, type SessionRecord } from '../shared/records.js';
import { planCrashRecovery } from '../store/recovery.js';
import { emptyFailure, RENAME_SKIPPED, type RenameOutcome, type ReplyCall, type ReplyEvent, type TurnResult, type TurnSpec } from '../worker/shared/protocol.js';
import type { WorkerHandle, WorkerOptions } from '../worker/parent/runner.js';
import { SANDBOX_ACTION, type SandboxSpec } from '../sandbox/sandbox.js';
import { explainQueued, selectRunnable, type Admission, type LockClaim, type QueuedTurn } from './admission.js';
import { Turn } from './turn.js';
import { ControllerError } from '../shared/public-error.js';
import { fingerprint, type Intent } from './fingerprint.js';
import { resolveLaunchSettings, type LaunchDefaults, type Requested } from './launch-settings.js';
import type { SessionView } from './views.js';
import { MAX_EVENTS, resultFile, terminalUpdate } from './run-outcome.js';
import { turnSpecFor } from './turn-spec.js';
import type { FindFilters } from './find.js';
import type { HistoryPage } from './history.js';
import { SessionReader, type ReadableStore } from './session-reader.js';
import { applySessionUpdate, normalizeLabels, type SessionUpdate } from './metadata.js';
import type { UsageScope, UsageSummary } from './usage.js';
import type { Log } from '../util/logger.js';
import { errnoOf } from '../store/errors.js';
import { setTimeout as sleep } from 'node:timers/promises';
import { crashPoint } from '../util/crash-point.js';
import { canonicalJson, checkOutputSchema } from '../evidence/output-schema.js';
import { isConversationId, nextRoute, provenHandles, routeOf, withReply } from './reply-route.js';
import { decideReplyCall } from './reply-gate.js';

export const MAX_QUEUED_TOTAL = 64;
export const MAX_QUEUED_PER_SESSION = 8;
export const MAX_WAIT_SESSIONS = 10;
const TERMINAL_WRITE_ATTEMPTS = 3;
const TERMINAL_WRITE_BACKOFF_MS = 200;
/** Handles kept per run: a turn is told never to resend, so this is only a bound. */
const MAX_REPLY_HANDLES = 50;

/** The part of the durable store the controller needs. */
export interface ControllerStore extends ReadableStore {
  runByRequestKey(key: string): RunRecord | undefined;
  commit(change: { sessions?: SessionRecord[]; runs?: RunRecord[] }): Promise<void>;
  writeResult(result: RunResultFile): Promise<void>;
}

export interface ControllerDeps {
  store: ControllerStore;
  models(): Promise<CatalogModel[]>;
  resolveWorkspace(requested: string): Promise<string>;
  startWorker(spec: TurnSpec, options: WorkerOptions): WorkerHandle;
  policy: LaunchDefaults;
  maxConcurrentRuns: number;
  runTimeoutMs: number;
  cancelGraceMs: number;
  droidPath: string;
  droidEnv: Record<string, string>;
  /** How turns are confined; `sandboxUnavailable` says why the configured sandbox cannot run (every turn then fails). */
  sandbox: SandboxSpec;
  sandboxUnavailable: string | null;
  /** The configured Amp MCP endpoint; null: reply-back is off and routed requests are refused. */
  ampMcpUrl: string | null;
  log: Log;
  now?: () => Date;
}

export interface CreateInput extends Requested {
  requestKey: string;
  workspace: string;
  prompt: string;
  replyTo: string | null;
  title?: string;
  labels?: string[];
  outputSchema?: Record<string, unknown>;
}

export interface SendInput extends Requested {
  requestKey: string;
  session: string;
  prompt: string;
  interrupt?: boolean;
  outputSchema?: Record<string, unknown>;
  /** Omitted: keep the route; a conversation: retarget; null: detach. */
  replyTo?: string | null;
}

export type { Admission } from './admission.js';

export interface Acceptance {
  metadata: { session: string; run: string; requestKey: string; replayed: boolean };
  admission: Admission;
  status: SessionView;
}

/** An acceptance made durable in the chain, reported once the chain is left. */
interface Accepted {
  run: RunRecord;
  turn: Turn;
  admission: Admission;
}

export class SessionController {
  /** Every turn accepted and not yet released, in acceptance order (the FIFO queue). */
  private readonly turns = new Map<string, Turn>();
  /** Owners still running (including ones a shutdown waits for). */
  private readonly owners = new Set<Promise<void>>();
  private readonly reader: SessionReader;
  private readonly changes = new EventEmitter();
  private readonly now: () => Date;
  /** Orders state changes (commits and the checks they depend on); never I/O beyond the store. */
  private chain: Promise<unknown> = Promise.resolve();
  private stopped = false;
  /** Set when state could not be recorded: the controller refuses to continue. */
  private halted: { error: ControllerError; shown: Map<string, RunRecord> } | null = null;
  private retryTimer: NodeJS.Timeout | undefined;

  constructor(private readonly deps: ControllerDeps) {
    this.now = deps.now ?? (() => new Date());
    this.changes.setMaxListeners(0);
    this.reader = new SessionReader(
      deps.store,
      {
        live: (runId) => this.turns.get(runId),
        shown: (run) => this.halted?.shown.get(run.id) ?? run,
        override: (runId) => this.halted?.shown.get(runId),
      },
      deps.resolveWorkspace,
      deps.log,
    );
  }

  /** Every durable change goes through here so derived indexes stay current. */
  private async commit(change: { sessions?: SessionRecord[]; runs?: RunRecord[] }): Promise<void> {
    await this.deps.store.commit(change);
    this.reader.noteCommitted(change);
  }

  // ── queries ───────────────────────────────────────────────────────────

  status(sessionId: string): SessionView {
    return this.reader.status(sessionId);
  }

  read(sessionId: string, cursor?: string, limit?: number): Promise<HistoryPage> {
    return this.reader.read(sessionId, cursor, limit);
  }

  find(filters: FindFilters, cursor?: string, limit?: number): Promise<{ sessions: SessionView[]; nextCursor: string | null }> {
    return this.reader.find(filters, cursor, limit);
  }

  usage(scope: UsageScope): UsageSummary {
    return this.reader.usage(scope);
  }

  capacity() {
    let active = 0;
    let queued = 0;
    for (const turn of this.turns.values()) {
      if (turn.holdsClaim()) active++;
      else queued++;
    }
    return {
      maximum: this.deps.maxConcurrentRuns,
      active,
      queued,
      available: Math.max(0, this.deps.maxConcurrentRuns - active),
    };
  }

  async waitForSessions(ids: readonly string[], timeoutSeconds: number, signal?: AbortSignal): Promise<{ sessions: SessionView[]; timedOut: boolean }> {
    const unique = [...new Set(ids)];
    if (unique.length === 0 || unique.length > MAX_WAIT_SESSIONS) {
      throw new ControllerError('invalid_arguments', `wait takes 1 to ${MAX_WAIT_SESSIONS} distinct sessions`, 'Pass between 1 and 10 session handles.');
    }
    for (const id of unique) this.session(id);
    // Runs change state only through commits, so progress events are answered from the cache.
    const settled = () => unique.every((id) => this.reader.agentState(id) !== 'working');
    if (!settled() && timeoutSeconds > 0) {
      const began = Date.now();
      this.deps.log.info({ sessions: unique, timeoutSeconds }, 'waiting for sessions');
      await new Promise<void>((resolve, reject) => {
        const finish = () => {
          clearTimeout(timer);
          this.changes.off('change', check);
          signal?.removeEventListener('abort', abort);
          this.deps.log.info({ sessions: unique, waitedMs: Date.now() - began, settled: settled() }, 'wait ended');
        };
        const check = () => {
          if (!settled()) return;
          finish();
          resolve();
        };
        // A client that cancels its request stops the wait at once.
        const abort = () => {
          finish();
          reject(new ControllerError('request_cancelled', 'the client cancelled this wait', 'Nothing to do; call again to keep waiting.', true));
        };
        const timer = setTimeout(() => {
          finish();
          resolve();
        }, timeoutSeconds * 1000);
        this.changes.on('change', check);
        if (signal?.aborted) abort();
        else signal?.addEventListener('abort', abort, { once: true });
      });
    }
    return { sessions: unique.map((id) => this.status(id)), timedOut: !settled() };
  }

  /** The latest assistant text of a live run (its only output while it streams), if any. */
  liveText(runId: string): string | undefined {
    return this.turns.get(runId)?.partialText || undefined;
  }

  /** Calls `listener` after every change of any session; returns the unsubscribe. */
  onChange(listener: () => void): () => void {
    this.changes.on('change', listener);
    return () => this.changes.off('change', listener);
  }

  // ── commands ──────────────────────────────────────────────────────────

  async create(input: CreateInput): Promise<Acceptance> {
    this.assertRoutable(input.replyTo);
    const schema = validOutputSchema(input.outputSchema);
    // I/O first, outside the chain: a slow catalog must not hold up anyone's cancel.
    const workspace = await this.deps.resolveWorkspace(input.workspace);
    const title = input.title ?? null;
    const labels = normalizeLabels(input.labels ?? []);
    const intent: Intent = { kind: 'create', target: workspace, prompt: input.prompt, interrupt: false, replyTo: input.replyTo, title, labels, ...schemaIntent(schema) };
    // A replay never consults the catalog.
    const early = this.replay(input.requestKey, intent, input);
    if (early) return early;
    this.assertRunning();
    const catalog = await this.deps.models();

    const accepted = await this.serialized(async (): Promise<Acceptance | Accepted> => {
      const replay = this.replay(input.requestKey, intent, input);
      if (replay) return replay;
      this.assertRunning();
      this.assertQueueRoom(null);
      const settings = resolveLaunchSettings(input, null, this.deps.policy, catalog);
      const at = this.now().toISOString();
      const sessionId = randomUUID();
      const route = nextRoute({ replyTo: null, routeId: null }, input.replyTo, randomUUID).route;
      const run = withReply(
        acceptedRun({
          id: randomUUID(),
          sessionId,
          seq: 1,
          kind: 'create',
          requestKey: input.requestKey,
          fingerprint: fingerprint(intent),
          interrupt: false,
          settings,
          acceptedAt: at,
        }),
        route,
      );
      const session: SessionRecord = {
        id: sessionId,
        createdAt: at,
        updatedAt: at,
        workspace,
        title,
        labels,
        archived: false,
        replyTo: route.replyTo,
        replyRouteId: route.routeId ?? undefined,
        droidSessionId: null,
        headRunId: run.id,
        factoryTitle: null,
      };
      await this.commit({ sessions: [session], runs: [run] });
      crashPoint('accepted');
      return this.enqueue(run, workspace, input.prompt, [], schema);
    });
    return this.report(accepted);
  }

  async send(input: SendInput): Promise<Acceptance> {
    const schema = validOutputSchema(input.outputSchema);
    const session = this.session(input.session);
    const interrupt = input.interrupt ?? false;
    const intent: Intent = { kind: 'send', target: session.id, prompt: input.prompt, interrupt, replyTo: input.replyTo, title: null, labels: [], ...schemaIntent(schema) };
    const early = this.replay(input.requestKey, intent, input);
    if (early) return early;
    this.assertRunning();
    this.assertRoutable(input.replyTo === undefined ? session.replyTo : input.replyTo);
    // The workspace is fixed for the session: it must still be approved and
    // still resolve to the same directory (no symlink swapped in since).
    if ((await this.deps.resolveWorkspace(session.workspace)) !== session.workspace) throw workspaceChanged();
    const catalog = await this.deps.models();

    const accepted = await this.serialized(async (): Promise<Acceptance | Accepted> => {
      const replay = this.replay(input.requestKey, intent, input);
      if (replay) return replay;
      this.assertRunning();
      const runs = this.deps.store.runsBySession(session.id);
      if (runs.some((r) => r.state === 'unknown')) {
        throw new ControllerError(
          'session_unknown_outcome',
          'this session has a turn whose outcome is unknown (the controller stopped mid-turn), so it cannot continue',
          'Inspect the workspace and droid history locally, then start a new session with a new requestKey.',
        );
      }
      this.assertQueueRoom(interrupt ? null : session.id);
      const settings = resolveLaunchSettings(input, runs[runs.length - 1]!.settings, this.deps.policy, catalog);
      const at = this.now().toISOString();
      const current = this.session(session.id);
      // A retarget or detach starts a new route from this commit on, whatever becomes of this turn.
      const route = nextRoute(routeOf(current), input.replyTo, randomUUID).route;
      const run = withReply(
        acceptedRun({
          id: randomUUID(),
          sessionId: session.id,
          seq: runs.length + 1,
          kind: 'send',
          requestKey: input.requestKey,
          fingerprint: fingerprint(intent),
          interrupt,
          settings,
          acceptedAt: at,
        }),
        route,
      );
      const superseded = interrupt ? this.dropQueued(runs, 'superseded', at) : [];
      const stopping = interrupt ? this.markCancelling(runs) : [];
      const updated: SessionRecord = { ...current, headRunId: run.id, updatedAt: at, archived: false, replyTo: route.replyTo, replyRouteId: route.routeId ?? undefined };
      await this.commit({ sessions: [updated], runs: [run, ...superseded, ...stopping] });
      crashPoint('accepted');
      // Committed: now memory follows.
      this.forgetQueued(superseded);
      for (const r of stopping) this.turns.get(r.id)?.requestStop();
      return this.enqueue(run, current.workspace, input.prompt, stopping, schema);
    });
    return this.report(accepted);
  }

  cancel(sessionId: string): Promise<SessionView> {
    return this.serialized(async () => {
      const session = this.session(sessionId);
      this.assertRunning();
      const runs = this.deps.store.runsBySession(session.id);
      const at = this.now().toISOString();
      const dropped = this.dropQueued(runs, 'cancelled', at);
      const stopping = this.markCancelling(runs);
      if (dropped.length || stopping.length) await this.commit({ runs: [...dropped, ...stopping] });
      // Committed: now memory follows.
      this.forgetQueued(dropped);
      for (const run of stopping) this.turns.get(run.id)?.requestStop();
      this.changed();
      return this.status(session.id);
    });
  }

  /** Title, labels, archive flag: controller metadata only, never work or routing. */
  update(sessionId: string, update: SessionUpdate): Promise<SessionView> {
    return this.serialized(async () => {
      const session = this.session(sessionId);
      this.assertRunning();
      const next = applySessionUpdate(session, this.deps.store.runsBySession(session.id), update, this.now().toISOString());
      await this.commit({ sessions: [next] });
      return this.status(session.id);
    });
  }

  // ── acceptance helpers ────────────────────────────────────────────────

  private serialized<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.chain.then(fn, fn);
    this.chain = next.catch(() => undefined);
    return next;
  }

  private assertRunning(): void {
    if (this.halted) throw this.halted.error;
    if (this.stopped) {
      throw new ControllerError('controller_stopping', 'the controller is shutting down', 'Retry with the same requestKey once it has restarted.', true);
    }
  }

  /** A route needs reply-back configured, and a conversation id. Checked before anything is recorded. */
  private assertRoutable(replyTo: string | null | undefined): void {
    if (replyTo === null || replyTo === undefined) return;
    if (this.deps.ampMcpUrl === null) {
      throw new ControllerError(
        'reply_back_unavailable',
        'reply-back is not configured on this host',
        'Pass replyTo: null for detached work and collect results with droid_wait_for_sessions (the operator enables reply-back with "ampMcp" in the config).',
      );
    }
    if (!isConversationId(replyTo)) {
      throw new ControllerError('invalid_arguments', 'replyTo must be an Amp conversation id: T- followed by a lowercase UUID', 'Pass the conversation id, or null for detached work.');
    }
  }

  /** Same key and same intent: the original acceptance. Different: conflict. */
  private replay(requestKey: string, intent: Intent, requested: Requested): Acceptance | undefined {
    const original = this.deps.store.runByRequestKey(requestKey);
    if (!original) return undefined;
    const s = original.settings;
    const sameSettings =
      (requested.model === undefined || requested.model === s.model) &&
      (requested.autonomy === undefined || requested.autonomy === s.autonomy) &&
      (requested.reasoningEffort === undefined || requested.reasoningEffort === s.reasoningEffort);
    if (original.fingerprint !== fingerprint(intent) || !sameSettings) {
      throw new ControllerError(
        'request_key_conflict',
        'this requestKey was already used for a different request',
        'Reuse a requestKey only to retry the identical request; use a new key for new work.',
      );
    }
    return {
      metadata: { session: original.sessionId, run: original.id, requestKey, replayed: true },
      admission: { action: 'replayed', waitingFor: [], capacityFull: false, detail: `this requestKey was accepted before; nothing new was queued (the run is ${original.state})` },
      status: this.status(original.sessionId),
    };
  }

  private assertQueueRoom(sessionId: string | null): void {
    let total = 0;
    let perSession = 0;
    for (const turn of this.turns.values()) {
      if (turn.holdsClaim()) continue;
      total++;
      if (turn.sessionId === sessionId) perSession++;
    }
    if (total >= MAX_QUEUED_TOTAL || perSession >= MAX_QUEUED_PER_SESSION) {
      throw new ControllerError(
        'queue_full',
        `too many queued turns (at most ${MAX_QUEUED_TOTAL} in all and ${MAX_QUEUED_PER_SESSION} per session)`,
        'Wait for queued turns to finish (droid_wait_for_sessions), then retry with the same requestKey.',
        true,
      );
    }
  }

  /** Called after the acceptance commit: the turn joins the queue. `interrupting`: live turns steering stops. */
  private enqueue(run: RunRecord, workspace: string, prompt: string, interrupting: readonly RunRecord[], outputSchema: Record<string, unknown> | null): Accepted {
    const claim: LockClaim = { sessionId: run.sessionId, workspace, writer: run.settings.autonomy !== 'off' };
    const turn = new Turn(run.id, claim, prompt, outputSchema);
    this.turns.set(run.id, turn);
    // The session's previous turn leaves its Factory title for later rather than hold this one up.
    for (const other of this.turns.values()) if (other !== turn && other.sessionId === run.sessionId && other.holdsClaim()) other.skipRename();
    this.changed();
    this.pump();
    const admission = this.admissionOf(turn, interrupting);
    this.deps.log.info({ session: run.sessionId, run: run.id, action: admission.action, waitingFor: admission.waitingFor.length }, 'turn accepted');
    return { run, turn, admission };
  }

  /** Outside the chain: a turn admitted at once is reported once its start is recorded, so its status says so. */
  private async report(accepted: Acceptance | Accepted): Promise<Acceptance> {
    if (!('turn' in accepted)) return accepted;
    const { run, turn } = accepted;
    let admission = accepted.admission;
    if (admission.action === 'started') {
      await turn.launched;
      if (turn.inLine()) admission = { ...admission, action: 'queued', detail: 'admitted, but its start could not be recorded; it keeps its place and is retried shortly' };
    }
    return {
      metadata: { session: run.sessionId, run: run.id, requestKey: run.requestKey!, replayed: false },
      admission,
      status: this.status(run.sessionId),
    };
  }

  private admissionOf(turn: Turn, interrupting: readonly RunRecord[]): Admission {
    if (turn.holdsClaim()) return { action: 'started', waitingFor: [], capacityFull: false, detail: 'admitted at once; droid is starting' };
    const held = [...this.turns.values()].filter((t) => t.holdsClaim()).map((t) => ({ runId: t.runId, ...t.claim }));
    const ahead: QueuedTurn[] = [];
    for (const t of this.turns.values()) {
      if (t === turn) break;
      if (!t.holdsClaim()) ahead.push({ runId: t.runId, ...t.claim });
    }
    const stopping = new Set(interrupting.map((r) => r.id));
    return explainQueued({ runId: turn.runId, ...turn.claim }, held, ahead, this.deps.maxConcurrentRuns, stopping, (id) => this.run(id).state);
  }

  /** Records for the session's queued runs, ended unsubmitted; memory is untouched until they are committed. */
  private dropQueued(runs: readonly RunRecord[], reason: 'cancelled' | 'superseded', at: string): RunRecord[] {
    const message = reason === 'superseded' ? 'superseded by a steering message; nothing was submitted' : 'cancelled before it started; nothing was submitted';
    return runs
      .filter((r) => r.state === 'queued')
      .map((r) => ({ ...r, state: 'cancelled' as const, cancelReason: reason, endedAt: at, error: { code: reason, message, retryable: false }, needsAttention: false }));
  }

  /**
   * After the drop is durable. A turn still waiting in line leaves it; one
   * already admitted belongs to its owner, which sees the run ended and
   * releases its claim itself.
   */
  private forgetQueued(dropped: readonly RunRecord[]): void {
    for (const run of dropped) {
      const turn = this.turns.get(run.id);
      if (turn?.inLine()) {
        this.turns.delete(run.id);
        turn.drop();
      }
    }
  }

  private markCancelling(runs: readonly RunRecord[]): RunRecord[] {
    return runs
      .filter((r) => (r.state === 'starting' || r.state === 'running') && this.turns.get(r.id)?.holdsClaim())
      .map((r) => ({ ...r, state: 'cancelling' as const }));
  }

  // ── admission ─────────────────────────────────────────────────────────

  private pump(): void {
    if (this.stopped || this.halted) return;
    const now = Date.now();
    const held: LockClaim[] = [];
    const queued = [];
    let nextRetry = Infinity;
    for (const turn of this.turns.values()) {
      if (turn.holdsClaim()) held.push(turn.claim);
      else {
        const ready = turn.retryAt <= now;
        if (!ready) nextRetry = Math.min(nextRetry, turn.retryAt);
        queued.push({ runId: turn.runId, ...turn.claim, ready });
      }
    }
    for (const runId of selectRunnable(queued, held, this.deps.maxConcurrentRuns)) {
      const turn = this.turns.get(runId)!;
      // The claim is held from here; only the owner gives it back.
      turn.admit();
      const owner = this.own(turn);
      this.owners.add(owner);
      void owner.finally(() => this.owners.delete(owner));
    }
    clearTimeout(this.retryTimer);
    if (nextRetry !== Infinity) this.retryTimer = setTimeout(() => this.pump(), Math.max(0, nextRetry - now)).unref();
  }

  // ── one turn's life ───────────────────────────────────────────────────

  /**
   * The owner of an admitted turn: launches it, runs it, records how it ended,
   * and releases its claim in `finally`, after the worker and its process
   * group are gone, whatever happened before.
   */
  private async own(turn: Turn): Promise<void> {
    try {
      await this.launch(turn);
    } catch (err) {
      this.deps.log.error({ err, run: turn.runId }, 'turn owner failed');
    } finally {
      // Back in line (its `starting` commit failed): it keeps its place.
      if (!turn.inLine()) {
        this.turns.delete(turn.runId);
        turn.release();
      }
      this.changed();
      this.pump();
    }
  }

  private async launch(turn: Turn): Promise<void> {
    const session = this.session(turn.sessionId);
    // The workspace may have changed since acceptance (a symlink swapped in).
    const moved = await this.deps.resolveWorkspace(session.workspace).then(
      (resolved) => (resolved === session.workspace ? null : workspaceChanged().toPublic()),
      (err: unknown) => (err instanceof ControllerError ? err.toPublic() : workspaceChanged().toPublic()),
    );
    if (moved) {
      await this.settle(turn, emptyFailure({ code: moved.code, message: `${moved.message} Nothing was submitted.`, retryable: false }));
      return;
    }
    // A routed session never runs unrouted because the host stopped offering reply-back.
    if (session.replyTo !== null && this.deps.ampMcpUrl === null) {
      const message = 'this session reports back to a conversation but reply-back is no longer configured on this host; nothing was submitted. Send with replyTo: null to detach it, or have the operator set "ampMcp" again';
      await this.settle(turn, emptyFailure({ code: 'reply_back_unavailable', message, retryable: false }));
      return;
    }
    // Never a silent fallback to an unconfined droid.
    if (this.deps.sandboxUnavailable !== null) {
      const message = `the configured sandbox cannot run (${this.deps.sandboxUnavailable}); nothing was submitted. ${SANDBOX_ACTION}`;
      await this.settle(turn, emptyFailure({ code: 'sandbox_unavailable', message, retryable: false }));
      return;
    }

    let run: RunRecord | null;
    try {
      run = await this.serialized(() => this.markStarting(turn));
    } catch (err) {
      // Not durable, so not started: back in line with memory as it was.
      turn.requeue(Date.now());
      this.deps.log.error({ err, run: turn.runId, retryInMs: turn.retryAt - Date.now() }, 'could not record the turn as starting; it stays queued and is retried');
      return;
    }
    if (!run) return;

    // Nothing may start once a stop was asked for; nothing was submitted.
    if (this.stopped || this.halted || turn.cancelRequested) {
      const stopping = turn.cancelRequested
        ? { code: 'cancelled', message: 'cancelled before droid started; nothing was submitted', retryable: false }
        : { code: 'controller_stopping', message: 'the controller stopped before droid started; nothing was submitted', retryable: true };
      await this.settle(turn, { ...emptyFailure(stopping), outcome: 'cancelled' });
      return;
    }

    const spec = turnSpecFor(run, this.session(run.sessionId), turn.takePrompt(), this.deps);
    if (turn.outputSchema) spec.outputSchema = turn.outputSchema;
    let started: Promise<void> = Promise.resolve();
    let handle: WorkerHandle;
    try {
      handle = this.deps.startWorker(spec, {
        onStarted: (droidSessionId) => {
          started = this.serialized(() => this.onStarted(turn.runId, droidSessionId)).catch((err) =>
            this.deps.log.error({ err, run: turn.runId }, 'could not record that the turn started; its result will record it'),
          );
        },
        onProgress: (event) => {
          if (turn.record(event, this.now().toISOString())) this.changed();
        },
        onRename: (outcome) => void this.serialized(() => this.onRename(turn.runId, outcome)).catch((err) => this.deps.log.error({ err }, 'rename record failed')),
        onInvalidMessage: (problem) => this.deps.log.warn({ run: turn.runId, problem }, 'the worker sent an invalid message; ignored'),
        onSessionCopy: (copy) => this.deps.log.warn({ run: turn.runId, ...copy }, "some of droid's session files were not copied back from the turn's private sessions folder"),
        onStuck: (members, waitedMs) =>
          this.deps.log.warn({ run: turn.runId, members, waitedMs }, "the turn's processes survive SIGKILL; its workspace lock stays held"),
        onReplyCall: (call) => this.serialized(() => this.onReplyCall(turn, call)),
        onReplyEvent: (event) =>
          void this.serialized(() => this.onReplyEvent(turn, event)).catch((err) => this.deps.log.error({ err, run: turn.runId }, 'could not record a reply-back result')),
      });
    } catch (err) {
      const error = { code: 'worker_spawn_failed', message: `could not start the turn's worker: ${(err as Error).message}`, retryable: true };
      await this.settle(turn, emptyFailure(error));
      return;
    }
    turn.attach(handle);
    crashPoint('spawned');
    if (this.stopped || this.halted) turn.stopUnrequested();

    const result = await handle.result;
    crashPoint('terminal-received');
    await started;
    // Durable before the worker hears it was: then it may exit.
    const recorded = await this.recordTerminal(turn, result);
    crashPoint('terminal-persisted');
    if (recorded) turn.end();
    await handle.cleanedUp;
  }

  /** Null when the run may not start (ended meanwhile, or the controller is stopping). */
  private async markStarting(turn: Turn): Promise<RunRecord | null> {
    const current = this.run(turn.runId);
    if (current.state !== 'queued' || this.halted) return null;
    // Stopping: a turn not yet started stays queued (queue_lost at the next start).
    if (this.stopped) {
      turn.requeue();
      return null;
    }
    // The turn reports on the session's route as it is now (a retarget may have come since acceptance).
    const run: RunRecord = withReply({ ...current, state: 'starting', startedAt: this.now().toISOString() }, routeOf(this.session(current.sessionId)));
    await this.commit({ runs: [run] });
    turn.start();
    this.changed();
    return run;
  }

  private async onStarted(runId: string, droidSessionId: string): Promise<void> {
    const run = this.run(runId);
    const session = this.session(run.sessionId);
    const next: RunRecord = run.state === 'starting' ? { ...run, state: 'running' } : run;
    const sessions = session.droidSessionId === droidSessionId ? [] : [{ ...session, droidSessionId }];
    await this.commit({ runs: [next], sessions });
    this.deps.log.info({ session: run.sessionId, run: runId }, 'turn running: prompt submitted to droid');
    crashPoint('started');
    this.changed();
  }

  /** A turn that ends with no worker to tell: recorded, then ended. */
  private async settle(turn: Turn, result: TurnResult): Promise<void> {
    if (await this.recordTerminal(turn, result)) turn.end();
  }

  /**
   * Makes the result durable. A failing disk gets a few tries; if it still
   * fails, the controller halts (see `halt`) rather than release the session
   * across a turn it could not record. True when recorded.
   */
  private async recordTerminal(turn: Turn, result: TurnResult): Promise<boolean> {
    for (let attempt = 1; !this.halted; attempt++) {
      try {
        await this.serialized(() => this.onTerminal(turn, result));
        return true;
      } catch (err) {
        if (attempt >= TERMINAL_WRITE_ATTEMPTS) {
          this.deps.log.error({ err, run: turn.runId, outcome: result.outcome }, 'could not record the turn result');
          this.halt(err);
          return false;
        }
        this.deps.log.warn({ err, run: turn.runId, attempt }, 'recording the turn result failed; retrying');
        await sleep(TERMINAL_WRITE_BACKOFF_MS * attempt);
      }
    }
    return false;
  }

  private async onTerminal(turn: Turn, result: TurnResult): Promise<void> {
    const run = this.run(turn.runId);
    // Already ended (cancelled while it waited): that record stands.
    if (TERMINAL_STATES.includes(run.state)) return;
    const session = this.session(run.sessionId);
    const at = this.now().toISOString();
    await this.deps.store.writeResult(resultFile(run.id, result));
    const finished = terminalUpdate(run, result, { cancelRequested: turn.cancelRequested, events: turn.events, at });
    const changedRuns: RunRecord[] = [finished];
    // The queue never resumes work across a failure: later turns are dropped.
    if (finished.state === 'failed' || finished.state === 'timed_out') {
      const predecessorFailure = { runId: run.id, state: finished.state, error: finished.error };
      const error = { code: 'predecessor_failed', message: 'an earlier turn of this session failed, so this one was not submitted', retryable: false };
      for (const next of this.deps.store.runsBySession(run.sessionId).filter((r) => r.state === 'queued' && r.id !== run.id)) {
        changedRuns.push({ ...next, state: 'cancelled', cancelReason: 'predecessor_failed', endedAt: at, error, needsAttention: true, predecessorFailure });
      }
    }
    const sessions =
      result.droidSessionId && session.droidSessionId !== result.droidSessionId
        ? [{ ...session, droidSessionId: result.droidSessionId, updatedAt: at }]
        : [{ ...session, updatedAt: at }];
    await this.commit({ runs: changedRuns, sessions });
    this.forgetQueued(changedRuns.slice(1));
    this.deps.log.info({ session: run.sessionId, run: run.id, state: finished.state, code: finished.error?.code }, 'turn ended');
    this.changed();
  }

  /**
   * The reply gate (reply-gate.ts) for one puck call of a live routed turn,
   * against the session's route as it is now, ordered with route changes by
   * the chain. An approved send is remembered so that only its own result
   * can prove a handle; a misroute is recorded before droid hears no.
   */
  private async onReplyCall(turn: Turn, call: ReplyCall): Promise<boolean> {
    // A controller that stops or cannot record state approves nothing.
    if (this.halted || this.stopped) return false;
    const run = this.run(turn.runId);
    if (!run.reply || TERMINAL_STATES.includes(run.state)) return false;
    const session = this.session(run.sessionId);
    const routeId = session.replyRouteId ?? null;
    const verdict = decideReplyCall({ replyTo: session.replyTo, proven: provenHandles(this.deps.store.runsBySession(session.id), routeId) }, call.input);
    this.deps.log.info({ run: run.id, approve: verdict.approve, ...(verdict.approve ? { action: verdict.action } : { code: verdict.code }) }, 'reply gate');
    if (verdict.approve) {
      if (verdict.action === 'send') turn.approveSend(call.toolUseId, routeId!);
      return true;
    }
    if (verdict.code === 'reply_misrouted') {
      await this.recordReplyFailure(run, { code: 'reply_misrouted', message: verdict.reason, retryable: false }).catch((err) =>
        this.deps.log.error({ err, run: run.id }, 'could not record a misrouted report; it was denied'),
      );
    }
    return false;
  }

  /** What an approved send returned, or an Amp tool droid ran unasked: durable at once. */
  private async onReplyEvent(turn: Turn, event: ReplyEvent): Promise<void> {
    const run = this.run(turn.runId);
    if (!run.reply || TERMINAL_STATES.includes(run.state)) return;
    if (event.kind === 'bypass') {
      const message = `droid ran ${event.tool} without asking, so the reply gate could not judge it; the turn was interrupted`;
      await this.recordReplyFailure(run, { code: 'reply_gate_bypassed', message, retryable: false });
      return;
    }
    // Only the result of a send this gate approved in this turn proves anything.
    const routeId = turn.takeApprovedSend(event.toolUseId);
    if (routeId === undefined) {
      this.deps.log.warn({ run: run.id }, 'reply result for a send the gate did not approve in this turn; ignored');
      return;
    }
    if (!event.ok) {
      await this.recordReplyFailure(run, { code: 'reply_send_failed', message: 'a report was sent but droid or Amp returned an error for it', retryable: false });
      return;
    }
    const reply = run.reply;
    const handles = event.handle !== null && reply.handles.length < MAX_REPLY_HANDLES ? [...reply.handles, { handle: event.handle, routeId }] : reply.handles;
    await this.commit({ runs: [{ ...run, reply: { ...reply, accepted: reply.accepted + 1, handles } }] });
    this.changed();
  }

  /** Keeps the first failure: the one that explains the rest. */
  private async recordReplyFailure(run: RunRecord, failure: NonNullable<RunReply['failure']>): Promise<void> {
    if (!run.reply || run.reply.failure) return;
    await this.commit({ runs: [{ ...run, reply: { ...run.reply, failure } }] });
    this.changed();
  }

  /** Best effort: a failed rename is logged and noted on the run, and retried next turn. */
  private async onRename(runId: string, outcome: RenameOutcome): Promise<void> {
    const run = this.run(runId);
    const session = this.session(run.sessionId);
    if (outcome.ok) {
      await this.commit({ sessions: [{ ...session, factoryTitle: outcome.title }] });
      return;
    }
    if (outcome.error === RENAME_SKIPPED) this.deps.log.info({ session: run.sessionId, run: runId }, 'Factory title left for a later turn: a follow-up was waiting');
    else this.deps.log.warn({ session: run.sessionId, run: runId, error: outcome.error }, 'Factory title not applied; will retry on the next turn');
    const note = { at: this.now().toISOString(), kind: 'title_sync_failed', detail: `title not applied in Factory (retried next turn): ${outcome.error ?? 'unknown'}` };
    await this.commit({ runs: [{ ...run, events: [...run.events, note].slice(-MAX_EVENTS) }] });
  }

  /**
   * The state directory cannot be written: refuse to continue rather than
   * guess. Nothing new is accepted or started, live turns are stopped (their
   * results could not be recorded either), and every turn in flight reads as
   * a restart will record it: live → unknown, queued → queue_lost.
   */
  private halt(cause: unknown): void {
    if (this.halted) return;
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
    this.halted = { error, shown };
    this.deps.log.error({ err: cause }, 'state could not be recorded; the controller refuses further work until restarted');
    for (const turn of this.turns.values()) {
      turn.stopUnrequested();
      this.reader.invalidate(turn.sessionId);
    }
    this.changed();
  }

  // ── helpers ───────────────────────────────────────────────────────────

  private session(id: string): SessionRecord {
    return this.reader.session(id);
  }

  private run(id: string): RunRecord {
    const run = this.deps.store.runs.get(id);
    if (!run) throw new Error(`internal: run ${id} missing`);
    return run;
  }

  private changed(): void {
    this.changes.emit('change');
  }

  /**
   * Graceful stop: interrupt live turns so their outcomes are known, and wait
   * (bounded) for their owners to finish. Queued turns stay queued on disk and
   * become queue_lost at the next start: they were never submitted.
   */
  async shutdown(timeoutMs: number): Promise<void> {
    this.stopped = true;
    clearTimeout(this.retryTimer);
    // Not marked as requested: nobody asked for these turns to stop, so an
    // interrupted outcome needs the caller's attention.
    for (const turn of this.turns.values()) turn.stopUnrequested();
    await Promise.race([Promise.all([...this.owners]), sleep(timeoutMs)]);
    await this.chain;
  }
}

/**
 * The caller's outputSchema, checked before anything else (size, depth, keys,
 * object root, compiles in ajv): a bad one is `invalid_arguments` with the
 * reason, and nothing is accepted or changed.
 */
function validOutputSchema(schema: unknown): Record<string, unknown> | null {
  if (schema === undefined) return null;
  const check = checkOutputSchema(schema);
  if (!check.ok) {
    throw new ControllerError('invalid_arguments', check.reason, 'Pass outputSchema as a JSON Schema object with "type": "object" at its root, at most 32 KiB serialized, or omit it.');
  }
  return check.schema;
}

function schemaIntent(schema: Record<string, unknown> | null): Pick<Intent, 'outputSchema'> {
  return schema ? { outputSchema: canonicalJson(schema) } : {};
}

function workspaceChanged(): ControllerError {
  return new ControllerError(
    'workspace_changed',
    "the session's workspace no longer resolves to the directory it was created in",
    'Start a new session in the intended directory; a session never moves between directories.',
  );
}
