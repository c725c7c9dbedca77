/**
 * The droid methods we use, typed, over one DroidProcess; plus the answers to
 * droid's own requests, routed through the pure permission policy.
 */
import { randomUUID } from 'node:crypto';
import { UNKNOWN_METHOD, type ServerRequestAnswer } from './connection.js';
import { DroidError } from './errors.js';
import { sessionNotification, type SessionNotification } from './notifications.js';
import { isServerToolId, parseReplyHandle } from './amp-tools.js';
import {
  ASK_USER_DECLINED,
  classifyToolUses,
  decidePermission,
  decideRoutedPermission,
  recordQuestions,
  type Autonomy,
  type PermissionDecision,
  type PermissionRecord,
  type QuestionRecord,
} from './permission-policy.js';
import { adoptDroid, spawnDroid, type DroidProcess, type SpawnDroidOptions } from './process.js';
import type { StartedDroid } from './start-droid.js';
import { TurnCollector, type ProgressEvent, type UsageOptions } from './turn-collector.js';
import type { CatalogModel } from './schemas.js';

export type { CatalogModel };

export interface SessionSettings {
  modelId?: string;
  reasoningEffort?: string;
  autonomyLevel: Autonomy;
  interactionMode: 'auto' | 'spec';
}

/** An HTTP MCP server attached to one session (droid 0.225.2 shape). */
export interface McpServerSpec {
  name: string;
  type: 'http';
  url: string;
}

export interface InitializeParams extends SessionSettings {
  machineId: string;
  cwd: string;
  title?: string;
  tags?: Array<{ name: string }>;
  structuredOutputFormat?: StructuredOutputFormat;
  mcpServers?: McpServerSpec[];
}

/**
 * Kept by the droid process, not the session: droid 0.225 honours it in
 * initialize_session and load_session, and answers `{}` to it in
 * update_session_settings but ignores it (docs/PROTOCOL-NOTES.md).
 */
export interface StructuredOutputFormat {
  type: 'json_schema';
  schema: Record<string, unknown>;
}

/** The part of droid's session settings we read back. */
export interface ReportedSettings {
  disabledToolIds?: unknown;
}

export interface ContextStatsResult {
  used?: unknown;
  limit?: unknown;
}

export interface InitializeResult {
  sessionId: string;
  /** droid's catalog (docs/PROTOCOL-NOTES.md part 4); not checked here: worker/contract/ipc.ts does before it leaves the worker. */
  availableModels?: unknown;
  settings?: ReportedSettings;
}

export interface LoadResult {
  cwd?: string;
  /** The session's running totals so far (droid 0.225.2; turn-usage.ts). */
  tokenUsage?: unknown;
  inclusiveTokenUsage?: unknown;
  /** The catalog, as in InitializeResult. */
  availableModels?: unknown;
  isAgentLoopInProgress?: boolean;
  settings?: ReportedSettings;
  /** The conversation droid loaded (measured on 0.225.2: `session.messages[].id`, a user message's id being its turn's). */
  session?: { messages?: unknown };
}

/**
 * Whether droid already reports every setting we would send (a resumed
 * session whose settings did not change): then update_session_settings is a
 * no-op and a follow-up need not wait for it. Only defined values count;
 * anything droid did not report, or reported differently, means "send". Pure.
 */
export function settingsAlreadyApplied(reported: object | undefined, wanted: Partial<SessionSettings>): boolean {
  if (!reported) return false;
  const seen = reported as Record<string, unknown>;
  return Object.entries(wanted).every(([key, value]) => value === undefined || seen[key] === value);
}

/** The tool ids a session disables, as droid reported them (strings only). */
export function disabledToolIdsOf(settings: ReportedSettings | undefined): string[] {
  const ids = settings?.disabledToolIds;
  return Array.isArray(ids) ? ids.filter((id): id is string => typeof id === 'string') : [];
}

/** A puck call droid asked permission for. */
export interface ReplyCallRequest {
  toolUseId: string;
  input: unknown;
}

/** What a routed turn's client saw of puck calls after they ran. */
export type ReplyObservation =
  { kind: 'send_result'; toolUseId: string; ok: boolean; handle: string | null } | { kind: 'bypass'; tool: string; toolUseId: string };

/** Reply-back wiring of a routed turn. */
export interface ReplyRouting {
  /** The autonomy the caller asked for (droid may run at another level, see droidAutonomy). */
  caller: Autonomy;
  /** The reply gate's verdict on one puck call; anything but true is a denial. */
  gate(call: ReplyCallRequest): Promise<boolean>;
  observe(event: ReplyObservation): void;
}

/** What we declined or approved on droid's behalf during one turn. */
export interface DecisionLog {
  permissionsDeclined: PermissionRecord[];
  permissionsApproved: PermissionRecord[];
  questions: QuestionRecord[];
  unknownRequests: string[];
}

const MAX_DECISIONS = 50;
/**
 * Closing droid: close_session is answered in milliseconds by a healthy droid;
 * after stdin EOF droid lingers ~6 s (cloud sync, measured), so a short exit
 * wait is followed by SIGKILL. Part of the turn timeline (worker/contract/timeline.ts).
 */
export const SHUTDOWN_BUDGET = { closeMs: 500, exitWaitMs: 300 } as const;

/** `off` is read-only Spec mode; every other level is auto mode at that level. */
export function settingsFor(autonomy: Autonomy): Pick<SessionSettings, 'autonomyLevel' | 'interactionMode'> {
  return autonomy === 'off' ? { autonomyLevel: 'off', interactionMode: 'spec' } : { autonomyLevel: autonomy, interactionMode: 'auto' };
}

export class DroidClient {
  readonly decisions: DecisionLog = { permissionsDeclined: [], permissionsApproved: [], questions: [], unknownRequests: [] };
  private autonomy: Autonomy = 'off';
  private routing: ReplyRouting | null = null;
  /** Amp tool uses this client approved (all puck), and the sends among them, by tool-use id. */
  private readonly approvedAmpUses = new Set<string>();
  private readonly approvedSends = new Set<string>();
  /** Tool names by tool-use id, from tool_call notifications. */
  private readonly toolNames = new Map<string, string>();

  private constructor(readonly process: DroidProcess) {
    process.connection.setServerRequestHandler((method, params) => this.answer(method, params));
  }

  static spawn(options: SpawnDroidOptions): DroidClient {
    return new DroidClient(spawnDroid(options));
  }

  /** A client for a droid started earlier (droid/start-droid.ts startDroid). */
  static adopt(started: StartedDroid): DroidClient {
    return new DroidClient(adoptDroid(started));
  }

  /** The policy answers at the autonomy of the turn being run. */
  setAutonomy(autonomy: Autonomy): void {
    this.autonomy = autonomy;
  }

  async initializeSession(params: InitializeParams): Promise<InitializeResult> {
    this.autonomy = params.autonomyLevel;
    const result = await this.process.connection.request<InitializeResult>('droid.initialize_session', params);
    if (!result || typeof result.sessionId !== 'string') {
      throw new DroidError('droid_protocol_error', 'initialize_session returned no sessionId');
    }
    return result;
  }

  /**
   * `mcpServers` again on every load: droid 0.225.2 does not keep a session's
   * attachments; `structuredOutputFormat` is held by the droid process, so a
   * resumed turn gives it again too.
   */
  async loadSession(sessionId: string, extra: { mcpServers?: McpServerSpec[]; structuredOutputFormat?: StructuredOutputFormat } = {}): Promise<LoadResult> {
    return (await this.process.connection.request<LoadResult>('droid.load_session', { sessionId, ...extra })) ?? {};
  }

  /** Context window occupancy of the open session. */
  async contextStats(timeoutMs: number): Promise<ContextStatsResult> {
    return (await this.process.connection.request<ContextStatsResult>('droid.get_context_stats', {}, timeoutMs)) ?? {};
  }

  async listTools(): Promise<unknown> {
    return this.process.connection.request('droid.list_tools', {});
  }

  async setDisabledToolIds(ids: readonly string[]): Promise<void> {
    await this.process.connection.request('droid.update_session_settings', { disabledToolIds: [...ids] });
  }

  /**
   * Makes this a routed turn's client: permission requests are decided by
   * the routed decision table with the reply gate judging puck calls, and
   * what approved puck calls return (or an Amp tool that ran unasked) is
   * reported to `routing.observe`. Call before the session is opened.
   */
  routeReplies(routing: ReplyRouting): void {
    this.routing = routing;
    this.process.connection.onNotification((frame) => {
      const n = sessionNotification(frame);
      if (n) this.observeReply(n, routing);
    });
  }

  /** `reported`: what droid said the session's settings are; when they already match, nothing is sent. */
  async updateSettings(settings: Partial<SessionSettings>, reported?: object): Promise<void> {
    if (settings.autonomyLevel) this.autonomy = settings.autonomyLevel;
    if (settingsAlreadyApplied(reported, settings)) return;
    await this.process.connection.request('droid.update_session_settings', settings);
  }

  async listModels(): Promise<CatalogModel[]> {
    const result = await this.process.connection.request<{ models?: CatalogModel[] }>('droid.list_models', {});
    if (!result || !Array.isArray(result.models)) throw new DroidError('droid_protocol_error', 'list_models returned no models');
    return result.models;
  }

  /**
   * Submits one user message. The collector is attached first, so no early
   * notification of the turn can be missed.
   */
  /**
   * `messageId`: the id droid gives the message, and the turn (a run's id, so
   * a later rewind can name it). Never one the session already holds: droid
   * then answers but runs no turn (measured).
   */
  async submit(text: string, onProgress?: (e: ProgressEvent) => void, usage?: UsageOptions, messageId: string = randomUUID()): Promise<TurnCollector> {
    const collector = new TurnCollector(messageId, onProgress, usage);
    this.process.connection.onNotification((frame) => {
      const n = sessionNotification(frame);
      if (n) collector.handle(n);
    });
    await this.process.connection.request('droid.add_user_message', { text, messageId: collector.turnId });
    return collector;
  }

  /** Sets the session's title in Factory; needs an open session. */
  async rename(title: string, timeoutMs: number): Promise<{ success: boolean }> {
    const result = await this.process.connection.request<{ success?: unknown }>('droid.rename_session', { title }, timeoutMs);
    return { success: result?.success === true };
  }

  async interrupt(timeoutMs = 5_000): Promise<void> {
    await this.process.connection.request('droid.interrupt_session', {}, timeoutMs);
  }

  /**
   * Closes the session, then ends the process. droid 0.225 lingers about 6 s
   * after stdin EOF or SIGTERM (measured) with its session already saved by
   * close_session, so a short wait is followed by SIGKILL. `hurry` (someone
   * waits for this slot) ends the wait at once: droid was measured to write
   * nothing to its session files after close_session is answered.
   */
  async shutdown(budget: { closeMs: number; exitWaitMs: number } = SHUTDOWN_BUDGET, hurry?: AbortSignal): Promise<void> {
    const { connection, child } = this.process;
    if (!connection.closed) {
      // Answered in milliseconds when droid is healthy; a hung droid must not delay the kill.
      await connection.request('droid.close_session', {}, budget.closeMs).catch(() => undefined);
    }
    child.stdin.end();
    if (await settlesWithin(this.process.exited, budget.exitWaitMs, hurry)) return;
    this.process.kill('SIGKILL');
    await this.process.exited;
  }

  private answer(method: string, params: unknown): ServerRequestAnswer | Promise<ServerRequestAnswer> {
    if (method === 'droid.request_permission') {
      if (this.routing) return this.answerRouted(this.routing, params);
      return this.logged(decidePermission(this.autonomy, params));
    }
    if (method === 'droid.ask_user') {
      for (const q of recordQuestions(params)) if (this.decisions.questions.length < MAX_DECISIONS) this.decisions.questions.push(q);
      return { result: ASK_USER_DECLINED };
    }
    if (this.decisions.unknownRequests.length < MAX_DECISIONS) this.decisions.unknownRequests.push(method.slice(0, 200));
    return UNKNOWN_METHOD(method);
  }

  private logged(decision: PermissionDecision): ServerRequestAnswer {
    const log = decision.approved ? this.decisions.permissionsApproved : this.decisions.permissionsDeclined;
    for (const tool of decision.tools) if (log.length < MAX_DECISIONS) log.push(tool);
    return { result: { selectedOption: decision.selectedOption } };
  }

  /**
   * The gate is asked only when the rest of the request could run, so a
   * verdict is never spent on a request that is declined anyway; a gate that
   * fails or throws is a denial.
   */
  private async answerRouted(routing: ReplyRouting, params: unknown): Promise<ServerRequestAnswer> {
    const uses = classifyToolUses(params);
    let decision = decideRoutedPermission(routing.caller, params, () => false);
    if (!decision.approved && decideRoutedPermission(routing.caller, params, () => true).approved) {
      const verdicts = new Map<string, boolean>();
      for (const use of uses) {
        if (use.kind !== 'puck' || use.toolUseId === null) continue;
        const verdict = await routing.gate({ toolUseId: use.toolUseId, input: use.input }).catch(() => false);
        verdicts.set(use.toolUseId, verdict === true);
      }
      decision = decideRoutedPermission(routing.caller, params, (use) => use.toolUseId !== null && verdicts.get(use.toolUseId) === true);
    }
    if (decision.approved) {
      for (const use of uses) {
        if (use.kind !== 'puck' || use.toolUseId === null) continue;
        this.approvedAmpUses.add(use.toolUseId);
        if ((use.input as { action?: unknown } | null)?.action === 'send') this.approvedSends.add(use.toolUseId);
      }
    }
    return this.logged(decision);
  }

  private observeReply(n: SessionNotification, routing: ReplyRouting): void {
    if (n.type === 'tool_call') {
      const use = (n as Extract<SessionNotification, { type: 'tool_call' }>).toolUse;
      if (typeof use?.id === 'string' && typeof use.name === 'string') this.toolNames.set(use.id, use.name);
      return;
    }
    if (n.type !== 'tool_result') return;
    const r = n as Extract<SessionNotification, { type: 'tool_result' }>;
    if (typeof r.toolUseId !== 'string') return;
    const ok = r.isError !== true;
    if (this.approvedSends.delete(r.toolUseId)) {
      routing.observe({ kind: 'send_result', toolUseId: r.toolUseId, ok, handle: ok ? parseReplyHandle(r.content) : null });
      return;
    }
    const name = this.toolNames.get(r.toolUseId) ?? '';
    // A successful result of an Amp tool nobody approved: droid ran it unasked.
    // (An error result may be droid refusing a disabled tool; it cannot tell more.)
    if (ok && isServerToolId(name) && !this.approvedAmpUses.has(r.toolUseId)) {
      routing.observe({ kind: 'bypass', tool: name.slice(0, 200), toolUseId: r.toolUseId });
    }
  }
}

/** True when `promise` settles within `ms`; false at the timeout or as soon as `cutShort` aborts. */
function settlesWithin(promise: Promise<unknown>, ms: number, cutShort?: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    const done = (settled: boolean) => {
      clearTimeout(timer);
      cutShort?.removeEventListener('abort', onAbort);
      resolve(settled);
    };
    const onAbort = () => done(false);
    const timer = setTimeout(() => done(false), ms);
    if (cutShort?.aborted) return done(false);
    cutShort?.addEventListener('abort', onAbort, { once: true });
    promise.then(
      () => done(true),
      () => done(true),
    );
  });
}
