/**
 * The durable records of the controller. Plain JSON: what is written is what
 * is read back. Prompts are never part of any record.
 */
import type { ErrorInfo } from '../droid/errors.js';
import type { TokenUsage } from '../droid/notifications.js';
import type { Autonomy, PermissionRecord, QuestionRecord } from '../droid/permission-policy.js';
import type { TranscriptEntry } from '../droid/turn-collector.js';
import type { ChangeSet, ContextStats, EgressEvidence } from './evidence-types.js';
import type { Budget } from './budget.js';
import type { CheckoutRecord, CommitsAhead } from './checkout-types.js';
import type { CancelReason } from './turn-stop.js';

// The droid-side shapes a record carries, so that the layers above the wire
// client take them from here rather than from src/droid/.
export { AUTONOMY_LEVELS } from '../droid/permission-policy.js';
export type { CheckoutRecord, CommitsAhead } from './checkout-types.js';
export type { Autonomy, Budget, ChangeSet, ContextStats, ErrorInfo, PermissionRecord, QuestionRecord, TokenUsage, TranscriptEntry };

export const STATE_VERSION = 1;

/** Every state a run can be in; the order is the schema's, not the run index's codes. */
export const RUN_STATES = ['queued', 'starting', 'running', 'cancelling', 'succeeded', 'interrupted', 'failed', 'timed_out', 'cancelled', 'unknown'] as const;
export type RunState = (typeof RUN_STATES)[number];

export const LIVE_STATES: readonly RunState[] = ['starting', 'running', 'cancelling'];
export const TERMINAL_STATES: readonly RunState[] = ['succeeded', 'interrupted', 'failed', 'timed_out', 'cancelled', 'unknown'];

/** Why a run was cancelled without a terminal result from droid (turn-stop.ts decides it). */
export type { CancelReason };

export interface EffectiveSettings {
  model: string;
  autonomy: Autonomy;
  reasoningEffort: string | null;
}

export interface SessionRecord {
  id: string;
  createdAt: string;
  updatedAt: string;
  /** Canonical (realpath) workspace, fixed for the session's life. */
  workspace: string;
  title: string | null;
  labels: string[];
  archived: boolean;
  /** Amp conversation the session reports to (`T-<uuid>`), or null: detached. */
  replyTo: string | null;
  /**
   * The current reply route: a fresh id each time `replyTo` is set to a new
   * conversation, so a retarget or detach invalidates every older reply
   * handle for good. Present exactly when `replyTo` is not null; absent on
   * detached sessions, which includes every session written before
   * reply-back existed (those all have `replyTo: null`).
   */
  replyRouteId?: string;
  /** droid's own session UUID: private, never leaves the controller. */
  droidSessionId: string | null;
  /** The newest accepted run. */
  headRunId: string;
  /** Title known to be applied in Factory (for best-effort sync). */
  factoryTitle: string | null;
  /** The caller's total budget over all the session's turns; absent: none (every session before budgets). */
  budget?: Budget;
  /**
   * The session's own checkout (`isolation: "worktree"`). Absent: the session
   * runs in `workspace` itself, which includes every session written before
   * checkouts existed.
   */
  checkout?: CheckoutRecord;
  /** The session asked for less network than the host allows (issue 37): only the model endpoints. Absent: the host's policy. */
  network?: 'model-only';
}

/** A reply handle Amp returned to an approved own-route send, and the route it belongs to. */
export interface ReplyHandleRecord {
  handle: string;
  routeId: string;
}

/** What the controller observed of a routed turn reporting back (it never sends anything itself). */
export interface RunReply {
  /** The route the turn was accepted, then launched, under. */
  routeId: string;
  /** Approved own-route sends that returned without error. */
  accepted: number;
  /** Handles those sends returned; one is valid while its route is still the session's. */
  handles: ReplyHandleRecord[];
  /** The first failure: reply_misrouted, reply_send_failed, reply_gate_bypassed, …; null if none. */
  failure: ErrorInfo | null;
}

export interface ProgressRecord {
  at: string;
  kind: string;
  detail: string;
}

export interface RunRecord {
  id: string;
  sessionId: string;
  /** 1-based position of the run in its session. */
  seq: number;
  kind: 'create' | 'send';
  requestKey: string | null;
  /** SHA-256 of the normalized intent (never the prompt itself). */
  fingerprint: string;
  interrupt: boolean;
  settings: EffectiveSettings;
  state: RunState;
  acceptedAt: string;
  startedAt: string | null;
  endedAt: string | null;
  cancelReason: CancelReason | null;
  /** droid's terminal reason (`completed`, `cancelled`, …) when one came. */
  reason: string | null;
  error: ErrorInfo | null;
  usage: TokenUsage | null;
  /** Short tail of the final text, for previews and search. */
  preview: string;
  needsAttention: boolean;
  permissionsDeclined: PermissionRecord[];
  questions: QuestionRecord[];
  predecessorFailure: { runId: string; state: RunState; error: ErrorInfo | null } | null;
  /** Last 20 progress events, each field bounded. */
  events: ProgressRecord[];
  /** Whether a full result file exists for this run. */
  hasResult: boolean;
  /**
   * Evidence (optional, so records written before it existed load unchanged;
   * absent means "not recorded": an older record, a turn not ended yet, or
   * one that never reached droid).
   * structuredOutput: absent when the turn asked for no outputSchema; the
   * schema-valid object; or null when none was valid (see `error`).
   */
  structuredOutput?: Record<string, unknown> | null;
  /** Files the turn changed; null = unknown (not a git work tree, or git failed). */
  changes?: ChangeSet | null;
  /** Context occupancy after the turn; null when droid did not say. */
  context?: ContextStats | null;
  /** A checkout session's writer turn: its branch's commits ahead of the base; null when git could not tell. */
  commits?: CommitsAhead | null;
  /** What the turn's egress proxy refused (issue 37). Absent: droid had the host's network, or the run predates it. */
  egress?: EgressEvidence;
  /**
   * Reply-back of a routed turn. Absent: the turn is detached, which
   * includes every run written before reply-back existed.
   */
  reply?: RunReply;
  /** The caller's budget for this turn (droid_send_message); absent: none given. Part of the fingerprint. */
  budget?: Budget;
  /** The ceiling the turn ran under, worked out when it started; absent: none (or not started). */
  limit?: Budget;
  /**
   * Present (true) while `usage` is a running figure, not droid's final one:
   * a live turn's last durable figure, which a crash leaves behind. Absent
   * on every run written before live usage, all final.
   */
  usageLive?: true;
}

/** The per-run result file: the evidence kept beyond the record. */
export interface RunResultFile {
  runId: string;
  finalText: string;
  transcript: TranscriptEntry[];
  permissionsApproved: PermissionRecord[];
  diagnostics: string[];
  /** Bounded tail; private to the state directory, never shown by tools. */
  stderrTail: string;
}

/** What identifies a run when it is accepted; everything else starts empty. */
export type AcceptedFields = Pick<RunRecord, 'id' | 'sessionId' | 'seq' | 'kind' | 'requestKey' | 'fingerprint' | 'interrupt' | 'settings' | 'acceptedAt'>;

/** A run as it is accepted: queued, nothing submitted, no outcome yet. */
export function acceptedRun(fields: AcceptedFields): RunRecord {
  return {
    ...fields,
    state: 'queued',
    startedAt: null,
    endedAt: null,
    cancelReason: null,
    reason: null,
    error: null,
    usage: null,
    preview: '',
    needsAttention: false,
    permissionsDeclined: [],
    questions: [],
    predecessorFailure: null,
    events: [],
    hasResult: false,
  };
}
