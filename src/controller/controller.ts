/**
 * The session controller: accepts turns durably, admits them FIFO under
 * capacity and workspace locks, runs each in its own worker, and records
 * how each ended. Effects (store, workers, catalog, clock) are injected.
 */
import { EventEmitter } from 'node:events';
import { randomUUID } from 'node:crypto';
import type { CatalogModel } from '../droid/client.js';
import type { ProgressEvent } from '../droid/turn-collector.js';
import { acceptedRun, type RunRecord, type RunResultFile, type SessionRecord } from '../store/records.js';
import type { RenameOutcome, TurnResult, TurnSpec } from '../worker/protocol.js';
import type { WorkerHandle, WorkerOptions } from '../worker/runner.js';
import { selectRunnable, type LockClaim } from './admission.js';
import { ControllerError } from './errors.js';
import { fingerprint, type Intent } from './fingerprint.js';
import { resolveLaunchSettings, type HostPolicy, type Requested } from './launch-settings.js';
import type { SessionView } from './views.js';
import { appendEvent, MAX_EVENTS, resultFile, terminalUpdate } from './run-outcome.js';
import { turnSpecFor } from './turn-spec.js';
import type { FindFilters } from './find.js';
import type { HistoryPage } from './history.js';
import { SessionReader, type ReadableStore } from './session-reader.js';
import { applySessionUpdate, normalizeLabels, type SessionUpdate } from './metadata.js';
import type { UsageScope, UsageSummary } from './usage.js';
import type { Log } from '../util/logger.js';
import { setTimeout as sleep } from 'node:timers/promises';
import { crashPoint } from '../util/crash-point.js';

export const MAX_QUEUED_TOTAL = 64;
export const MAX_QUEUED_PER_SESSION = 8;
export const MAX_WAIT_SESSIONS = 10;
const TERMINAL_WRITE_ATTEMPTS = 3;
const TERMINAL_WRITE_BACKOFF_MS = 200;

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
  policy: HostPolicy;
  maxConcurrentRuns: number;
  runTimeoutMs: number;
  cancelGraceMs: number;
  droidPath: string;
  droidEnv: Record<string, string>;
  replyBackConfigured: boolean;
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
}

export interface SendInput extends Requested {
  requestKey: string;
  session: string;
  prompt: string;
  interrupt?: boolean;
}

export interface Acceptance {
  metadata: { session: string; run: string; requestKey: string; replayed: boolean };
  status: SessionView;
}

interface LiveTurn {
  handle: WorkerHandle;
  claim: LockClaim;
  cancelRequested: boolean;
}

export class SessionController {
  private readonly prompts = new Map<string, string>();
  private readonly queue: string[] = [];
  private readonly live = new Map<string, LiveTurn>();
  /** Runs between admission and worker start: they hold their claim. */
  private readonly launching = new Map<string, LockClaim>();
  /** Progress of a live run lives in memory; it is persisted with the result. */
  private readonly liveEvents = new Map<string, RunRecord['events']>();
  /** Latest assistant text of each live run (a running turn's only history). */
  private readonly livePartial = new Map<string, string>();
  private readonly reader: SessionReader;
  private readonly changes = new EventEmitter();
  private readonly now: () => Date;
  /** Serializes acceptance so request keys and queue bounds are checked atomically. */
  private acceptChain: Promise<unknown> = Promise.resolve();
  private stopped = false;

  constructor(private readonly deps: ControllerDeps) {
    this.now = deps.now ?? (() => new Date());
    this.changes.setMaxListeners(0);
    this.reader = new SessionReader(deps.store, { events: this.liveEvents, partialText: this.livePartial }, deps.resolveWorkspace, deps.log);
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
    const active = this.live.size + this.launching.size;
    return {
      maximum: this.deps.maxConcurrentRuns,
      active,
      queued: this.queue.length,
      available: Math.max(0, this.deps.maxConcurrentRuns - active),
    };
  }

  async waitForSessions(ids: readonly string[], timeoutSeconds: number): Promise<{ sessions: SessionView[]; timedOut: boolean }> {
    const unique = [...new Set(ids)];
    if (unique.length === 0 || unique.length > MAX_WAIT_SESSIONS) {
      throw new ControllerError('invalid_arguments', `wait takes 1 to ${MAX_WAIT_SESSIONS} distinct sessions`, 'Pass between 1 and 10 session handles.');
    }
    for (const id of unique) this.session(id);
    // Runs change state only through commits, so progress events are answered from the cache.
    const settled = () => unique.every((id) => this.reader.agentState(id) !== 'working');
    if (!settled() && timeoutSeconds > 0) {
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          this.changes.off('change', check);
          resolve();
        };
        const check = () => settled() && done();
        const timer = setTimeout(done, timeoutSeconds * 1000);
        this.changes.on('change', check);
      });
    }
    return { sessions: unique.map((id) => this.status(id)), timedOut: !settled() };
  }

  // ── commands ──────────────────────────────────────────────────────────

  create(input: CreateInput): Promise<Acceptance> {
    return this.serialized(() => this.acceptCreate(input));
  }

  send(input: SendInput): Promise<Acceptance> {
    return this.serialized(() => this.acceptSend(input));
  }

  cancel(sessionId: string): Promise<SessionView> {
    return this.serialized(async () => {
      const session = this.session(sessionId);
      const runs = this.deps.store.runsBySession(session.id);
      const at = this.now().toISOString();
      const dropped = runs
        .filter((r) => r.state === 'queued')
        .map((r) => this.dropQueued(r, 'cancelled', at, { code: 'cancelled', message: 'cancelled before it started; nothing was submitted', retryable: false }));
      const interrupted = this.markCancelling(runs);
      if (dropped.length || interrupted.length) await this.commit({ runs: [...dropped, ...interrupted] });
      for (const run of interrupted) this.requestStop(run.id);
      this.changed();
      return this.status(session.id);
    });
  }

  /** Title, labels, archive flag: controller metadata only, never work or routing. */
  update(sessionId: string, update: SessionUpdate): Promise<SessionView> {
    return this.serialized(async () => {
      const session = this.session(sessionId);
      const next = applySessionUpdate(session, this.deps.store.runsBySession(session.id), update, this.now().toISOString());
      await this.commit({ sessions: [next] });
      return this.status(session.id);
    });
  }

  // ── acceptance ────────────────────────────────────────────────────────

  private serialized<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.acceptChain.then(fn, fn);
    this.acceptChain = next.catch(() => undefined);
    return next;
  }

  private async acceptCreate(input: CreateInput): Promise<Acceptance> {
    if (input.replyTo !== null) {
      throw new ControllerError(
        'reply_back_unavailable',
        this.deps.replyBackConfigured
          ? 'reply-back to a conversation is not supported by this controller build'
          : 'reply-back is not configured on this host',
        'Pass replyTo: null for detached work and collect results with droid_wait_for_sessions.',
      );
    }
    const workspace = await this.deps.resolveWorkspace(input.workspace);
    const title = input.title ?? null;
    const labels = normalizeLabels(input.labels ?? []);
    const intent: Intent = { kind: 'create', target: workspace, prompt: input.prompt, interrupt: false, replyTo: null, title, labels };
    const replay = this.replay(input.requestKey, intent, input);
    if (replay) return replay;
    this.assertQueueRoom(null);

    const settings = resolveLaunchSettings(input, null, this.deps.policy, await this.deps.models());
    const at = this.now().toISOString();
    const sessionId = randomUUID();
    const run = acceptedRun({
      id: randomUUID(),
      sessionId,
      seq: 1,
      kind: 'create',
      requestKey: input.requestKey,
      fingerprint: fingerprint(intent),
      interrupt: false,
      settings,
      acceptedAt: at,
    });
    const session: SessionRecord = {
      id: sessionId,
      createdAt: at,
      updatedAt: at,
      workspace,
      title,
      labels,
      archived: false,
      replyTo: null,
      droidSessionId: null,
      headRunId: run.id,
      factoryTitle: null,
    };
    await this.commit({ sessions: [session], runs: [run] });
    crashPoint('accepted');
    return this.enqueue(run, input.prompt);
  }

  private async acceptSend(input: SendInput): Promise<Acceptance> {
    const session = this.session(input.session);
    const interrupt = input.interrupt ?? false;
    const intent: Intent = {
      kind: 'send',
      target: session.id,
      prompt: input.prompt,
      interrupt,
      replyTo: session.replyTo,
      title: null,
      labels: [],
    };
    const replay = this.replay(input.requestKey, intent, input);
    if (replay) return replay;

    const runs = this.deps.store.runsBySession(session.id);
    if (runs.some((r) => r.state === 'unknown')) {
      throw new ControllerError(
        'session_unknown_outcome',
        'this session has a turn whose outcome is unknown (the controller stopped mid-turn), so it cannot continue',
        'Inspect the workspace and droid history locally, then start a new session with a new requestKey.',
      );
    }
    if (!interrupt) this.assertQueueRoom(session.id);
    else this.assertQueueRoom(null);
    // The workspace is fixed for the session: it must still be approved and
    // still resolve to the same directory (no symlink swapped in since).
    if ((await this.deps.resolveWorkspace(session.workspace)) !== session.workspace) {
      throw new ControllerError(
        'workspace_changed',
        "the session's workspace no longer resolves to the directory it was created in",
        'Start a new session in the intended directory; a session never moves between directories.',
      );
    }

    const previous = runs[runs.length - 1]!.settings;
    const settings = resolveLaunchSettings(input, previous, this.deps.policy, await this.deps.models());
    const at = this.now().toISOString();
    const run = acceptedRun({
      id: randomUUID(),
      sessionId: session.id,
      seq: runs.length + 1,
      kind: 'send',
      requestKey: input.requestKey,
      fingerprint: fingerprint(intent),
      interrupt,
      settings,
      acceptedAt: at,
    });
    const changedRuns: RunRecord[] = [run];
    let stopping: RunRecord[] = [];
    if (interrupt) {
      for (const old of runs.filter((r) => r.state === 'queued')) {
        changedRuns.push(
          this.dropQueued(old, 'superseded', at, { code: 'superseded', message: 'superseded by a steering message; nothing was submitted', retryable: false }),
        );
      }
      stopping = this.markCancelling(runs);
      changedRuns.push(...stopping);
    }
    const updated: SessionRecord = { ...session, headRunId: run.id, updatedAt: at, archived: false };
    await this.commit({ sessions: [updated], runs: changedRuns });
    crashPoint('accepted');
    for (const r of stopping) this.requestStop(r.id);
    return this.enqueue(run, input.prompt);
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
      status: this.status(original.sessionId),
    };
  }

  private assertQueueRoom(sessionId: string | null): void {
    const perSession = sessionId ? this.queue.filter((id) => this.run(id).sessionId === sessionId).length : 0;
    if (this.queue.length >= MAX_QUEUED_TOTAL || perSession >= MAX_QUEUED_PER_SESSION) {
      throw new ControllerError(
        'queue_full',
        `too many queued turns (at most ${MAX_QUEUED_TOTAL} in all and ${MAX_QUEUED_PER_SESSION} per session)`,
        'Wait for queued turns to finish (droid_wait_for_sessions), then retry with the same requestKey.',
        true,
      );
    }
  }

  private enqueue(run: RunRecord, prompt: string): Acceptance {
    this.prompts.set(run.id, prompt);
    this.queue.push(run.id);
    this.changed();
    this.pump();
    return {
      metadata: { session: run.sessionId, run: run.id, requestKey: run.requestKey!, replayed: false },
      status: this.status(run.sessionId),
    };
  }

  private dropQueued(run: RunRecord, reason: 'cancelled' | 'superseded' | 'predecessor_failed', at: string, error: RunRecord['error']): RunRecord {
    const index = this.queue.indexOf(run.id);
    if (index >= 0) this.queue.splice(index, 1);
    this.prompts.delete(run.id);
    return { ...run, state: 'cancelled', cancelReason: reason, endedAt: at, error, needsAttention: reason === 'predecessor_failed' };
  }

  private markCancelling(runs: readonly RunRecord[]): RunRecord[] {
    return runs
      .filter((r) => (r.state === 'starting' || r.state === 'running') && (this.live.has(r.id) || this.launching.has(r.id)))
      .map((r) => ({ ...r, state: 'cancelling' as const }));
  }

  private requestStop(runId: string): void {
    const turn = this.live.get(runId);
    if (!turn || turn.cancelRequested) return;
    turn.cancelRequested = true;
    turn.handle.cancel();
  }

  // ── admission and execution ───────────────────────────────────────────

  private claimOf(run: RunRecord): LockClaim {
    return { sessionId: run.sessionId, workspace: this.session(run.sessionId).workspace, writer: run.settings.autonomy !== 'off' };
  }

  private pump(): void {
    if (this.stopped) return;
    const held = [...[...this.live.values()].map((l) => l.claim), ...this.launching.values()];
    const queued = this.queue.map((id) => ({ runId: id, ...this.claimOf(this.run(id)) }));
    for (const runId of selectRunnable(queued, held, this.deps.maxConcurrentRuns)) {
      this.queue.splice(this.queue.indexOf(runId), 1);
      this.launching.set(runId, this.claimOf(this.run(runId)));
      void this.serialized(() => this.markStarting(runId))
        .then((run) => run && this.execute(run))
        .catch((err) => this.deps.log.error({ err, run: runId }, 'launch failed'));
    }
  }

  /** Null when the run was cancelled between admission and now. */
  private async markStarting(runId: string): Promise<RunRecord | null> {
    const current = this.run(runId);
    // Stopping: a turn not yet started stays queued (queue_lost at the next start).
    if (current.state !== 'queued' || this.stopped) {
      this.launching.delete(runId);
      this.pump();
      return null;
    }
    const run: RunRecord = { ...current, state: 'starting', startedAt: this.now().toISOString() };
    await this.commit({ runs: [run] });
    this.changed();
    return run;
  }

  /** Runs one admitted turn in its worker, from spawn to cleanup. */
  private async execute(run: RunRecord): Promise<void> {
    const prompt = this.prompts.get(run.id) ?? '';
    this.prompts.delete(run.id);
    const session = this.session(run.sessionId);
    const spec = turnSpecFor(run, session, prompt, this.deps);
    const events: RunRecord['events'] = [];
    this.liveEvents.set(run.id, events);
    let started: Promise<void> = Promise.resolve();
    const handle = this.deps.startWorker(spec, {
      // State changes go through the same serial chain as acceptance and cancel.
      onStarted: (droidSessionId) => (started = this.serialized(() => this.onStarted(run.id, droidSessionId))),
      onProgress: (event: ProgressEvent) => {
        if (event.kind === 'assistant_text' || event.kind === 'assistant_partial') this.livePartial.set(run.id, event.text);
        // Streaming snapshots are frequent: they update the partial text, not the event log.
        if (event.kind === 'assistant_partial') return;
        appendEvent(events, event, this.now().toISOString());
        this.changed();
      },
      onRename: (outcome) => void this.serialized(() => this.onRename(run.id, outcome)).catch((err) => this.deps.log.error({ err }, 'rename record failed')),
    });
    crashPoint('spawned');
    const claim = this.launching.get(run.id)!;
    this.launching.delete(run.id);
    const turn: LiveTurn = { handle, claim, cancelRequested: false };
    this.live.set(run.id, turn);
    // A cancel that arrived while the run was launching is honoured now.
    if (this.run(run.id).state === 'cancelling') this.requestStop(run.id);

    const result = await handle.result;
    crashPoint('terminal-received');
    await started.catch(() => undefined);
    await this.recordTerminal(run.id, result, events, turn.cancelRequested);
    crashPoint('terminal-persisted');
    handle.acknowledge();
    await handle.cleanedUp;
    this.live.delete(run.id);
    this.liveEvents.delete(run.id);
    this.livePartial.delete(run.id);
    this.changed();
    this.pump();
  }

  /**
   * The result must be durable before the worker is acknowledged. A failing
   * disk gets a few tries; if it still fails, the run stays recorded as
   * running (unknown after a restart: the honest answer) and the slot is
   * released anyway, so one bad write cannot stall every later turn.
   */
  private async recordTerminal(runId: string, result: TurnResult, events: RunRecord['events'], cancelRequested: boolean): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        await this.serialized(() => this.onTerminal(runId, result, events, cancelRequested));
        return;
      } catch (err) {
        if (attempt >= TERMINAL_WRITE_ATTEMPTS) {
          this.deps.log.error({ err, run: runId, outcome: result.outcome }, 'could not record the turn result; it will read as unknown after a restart');
          return;
        }
        this.deps.log.warn({ err, run: runId, attempt }, 'recording the turn result failed; retrying');
        await sleep(TERMINAL_WRITE_BACKOFF_MS * attempt);
      }
    }
  }

  private async onStarted(runId: string, droidSessionId: string): Promise<void> {
    const run = this.run(runId);
    const session = this.session(run.sessionId);
    const next: RunRecord = run.state === 'starting' ? { ...run, state: 'running' } : run;
    const sessions = session.droidSessionId === droidSessionId ? [] : [{ ...session, droidSessionId }];
    await this.commit({ runs: [next], sessions });
    crashPoint('started');
    this.changed();
  }

  private async onTerminal(runId: string, result: TurnResult, events: RunRecord['events'], cancelRequested: boolean): Promise<void> {
    const run = this.run(runId);
    const session = this.session(run.sessionId);
    const at = this.now().toISOString();
    await this.deps.store.writeResult(resultFile(runId, result));
    const finished = terminalUpdate(run, result, { cancelRequested, events, at });
    const changedRuns: RunRecord[] = [finished];
    // The queue never resumes work across a failure: later turns are dropped.
    if (finished.state === 'failed' || finished.state === 'timed_out') {
      for (const next of this.deps.store.runsBySession(run.sessionId).filter((r) => r.state === 'queued')) {
        changedRuns.push({
          ...this.dropQueued(next, 'predecessor_failed', at, {
            code: 'predecessor_failed',
            message: 'an earlier turn of this session failed, so this one was not submitted',
            retryable: false,
          }),
          predecessorFailure: { runId, state: finished.state, error: finished.error },
        });
      }
    }
    const sessions =
      result.droidSessionId && session.droidSessionId !== result.droidSessionId
        ? [{ ...session, droidSessionId: result.droidSessionId, updatedAt: at }]
        : [{ ...session, updatedAt: at }];
    await this.commit({ runs: changedRuns, sessions });
    this.deps.log.info({ run: runId, state: finished.state, code: finished.error?.code }, 'turn ended');
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
    this.deps.log.warn({ run: runId, error: outcome.error }, 'Factory title not applied; will retry on the next turn');
    const note = { at: this.now().toISOString(), kind: 'title_sync_failed', detail: `title not applied in Factory (retried next turn): ${outcome.error ?? 'unknown'}` };
    await this.commit({ runs: [{ ...run, events: [...run.events, note].slice(-MAX_EVENTS) }] });
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
   * (bounded) for their workers to go. Queued turns stay queued on disk and
   * become queue_lost at the next start: they were never submitted.
   */
  async shutdown(timeoutMs: number): Promise<void> {
    this.stopped = true;
    this.queue.length = 0;
    // Not marked as requested: nobody asked for these turns to stop, so an
    // interrupted outcome needs the caller's attention.
    const cleanups = [...this.live.values()].map((turn) => {
      turn.handle.cancel();
      return turn.handle.cleanedUp;
    });
    await Promise.race([Promise.all(cleanups), sleep(timeoutMs)]);
    await this.acceptChain;
  }

}
