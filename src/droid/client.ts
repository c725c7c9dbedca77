/**
 * The droid methods we use, typed, over one DroidProcess; plus the answers to
 * droid's own requests, routed through the pure permission policy.
 */
import { randomUUID } from 'node:crypto';
import { UNKNOWN_METHOD, type ServerRequestAnswer } from './connection.js';
import { DroidError } from './errors.js';
import { sessionNotification } from './notifications.js';
import {
  ASK_USER_DECLINED,
  decidePermission,
  recordQuestions,
  type Autonomy,
  type PermissionRecord,
  type QuestionRecord,
} from './permission-policy.js';
import { spawnDroid, type DroidProcess, type SpawnDroidOptions } from './process.js';
import { TurnCollector, type ProgressEvent } from './turn-collector.js';

export interface CatalogModel {
  id: string;
  displayName?: string;
  shortDisplayName?: string;
  modelProvider?: string;
  supportedReasoningEfforts?: string[];
  defaultReasoningEffort?: string;
  deprecated?: boolean;
  disabled?: boolean;
  deprecationDate?: string;
  isCustom?: boolean;
  [key: string]: unknown;
}

export interface SessionSettings {
  modelId?: string;
  reasoningEffort?: string;
  autonomyLevel: Autonomy;
  interactionMode: 'auto' | 'spec';
}

export interface InitializeParams extends SessionSettings {
  machineId: string;
  cwd: string;
  title?: string;
  tags?: Array<{ name: string }>;
  structuredOutputFormat?: StructuredOutputFormat;
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

export interface ContextStatsResult {
  used?: unknown;
  limit?: unknown;
}

export interface InitializeResult {
  sessionId: string;
  availableModels?: CatalogModel[];
}

export interface LoadResult {
  cwd?: string;
  isAgentLoopInProgress?: boolean;
}

/** What we declined or approved on droid's behalf during one turn. */
export interface DecisionLog {
  permissionsDeclined: PermissionRecord[];
  permissionsApproved: PermissionRecord[];
  questions: QuestionRecord[];
  unknownRequests: string[];
}

export const MAX_DECISIONS = 50;
/**
 * Closing droid: close_session is answered in milliseconds by a healthy droid;
 * after stdin EOF droid lingers ~6 s (cloud sync, measured), so a short exit
 * wait is followed by SIGKILL. Part of the turn timeline (worker/timeline.ts).
 */
export const SHUTDOWN_BUDGET = { closeMs: 500, exitWaitMs: 300 } as const;

/** `off` is read-only Spec mode; every other level is auto mode at that level. */
export function settingsFor(autonomy: Autonomy): Pick<SessionSettings, 'autonomyLevel' | 'interactionMode'> {
  return autonomy === 'off'
    ? { autonomyLevel: 'off', interactionMode: 'spec' }
    : { autonomyLevel: autonomy, interactionMode: 'auto' };
}

export class DroidClient {
  readonly decisions: DecisionLog = { permissionsDeclined: [], permissionsApproved: [], questions: [], unknownRequests: [] };
  private autonomy: Autonomy = 'off';

  private constructor(readonly process: DroidProcess) {
    process.connection.setServerRequestHandler((method, params) => this.answer(method, params));
  }

  static spawn(options: SpawnDroidOptions): DroidClient {
    return new DroidClient(spawnDroid(options));
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

  async loadSession(sessionId: string, extra: { structuredOutputFormat?: StructuredOutputFormat } = {}): Promise<LoadResult> {
    return (await this.process.connection.request<LoadResult>('droid.load_session', { sessionId, ...extra })) ?? {};
  }

  /** Context window occupancy of the open session. */
  async contextStats(timeoutMs: number): Promise<ContextStatsResult> {
    return (await this.process.connection.request<ContextStatsResult>('droid.get_context_stats', {}, timeoutMs)) ?? {};
  }

  async updateSettings(settings: Partial<SessionSettings>): Promise<void> {
    if (settings.autonomyLevel) this.autonomy = settings.autonomyLevel;
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
  async submit(text: string, onProgress?: (e: ProgressEvent) => void): Promise<TurnCollector> {
    const collector = new TurnCollector(randomUUID(), onProgress);
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
   * close_session, so a short wait is followed by SIGKILL.
   */
  async shutdown(budget: { closeMs: number; exitWaitMs: number } = SHUTDOWN_BUDGET): Promise<void> {
    const { connection, child } = this.process;
    if (!connection.closed) {
      // Answered in milliseconds when droid is healthy; a hung droid must not delay the kill.
      await connection.request('droid.close_session', {}, budget.closeMs).catch(() => undefined);
    }
    child.stdin.end();
    if (await settlesWithin(this.process.exited, budget.exitWaitMs)) return;
    this.process.kill('SIGKILL');
    await this.process.exited;
  }

  private answer(method: string, params: unknown): ServerRequestAnswer {
    if (method === 'droid.request_permission') {
      const decision = decidePermission(this.autonomy, params);
      const log = decision.approved ? this.decisions.permissionsApproved : this.decisions.permissionsDeclined;
      for (const tool of decision.tools) if (log.length < MAX_DECISIONS) log.push(tool);
      return { result: { selectedOption: decision.selectedOption } };
    }
    if (method === 'droid.ask_user') {
      for (const q of recordQuestions(params)) if (this.decisions.questions.length < MAX_DECISIONS) this.decisions.questions.push(q);
      return { result: ASK_USER_DECLINED };
    }
    if (this.decisions.unknownRequests.length < MAX_DECISIONS) this.decisions.unknownRequests.push(method.slice(0, 200));
    return UNKNOWN_METHOD(method);
  }
}

function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    promise.then(
      () => {
        clearTimeout(timer);
        resolve(true);
      },
      () => {
        clearTimeout(timer);
        resolve(true);
      },
    );
  });
}
