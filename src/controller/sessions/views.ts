/**
 * Public projections of controller records. Pure. These are the only shapes
 * tools return, so nothing private (droid session ids, fingerprints, stderr,
 * state paths) may be added here.
 */
import type { Budget, CheckoutRecord, RunRecord, RunState, SessionRecord, TokenUsage } from '../../shared/records.js';
import { LIVE_STATES, TERMINAL_STATES } from '../../shared/records.js';

export type AgentState = 'working' | 'idle' | 'unknown';

/**
 * What the controller observed the latest turn do about reporting back (it
 * never sends anything itself): `disabled` detached; `pending` routed and
 * queued or running; `accepted` an approved own-route send came back without
 * error (not proof anyone read it); `failed` a send errored, a misroute was
 * attempted, or droid ran an Amp tool unasked; `not_sent` it ended without
 * a report.
 */
export type Notification = 'disabled' | 'pending' | 'accepted' | 'failed' | 'not_sent';

export interface RunView {
  run: string;
  seq: number;
  state: RunState;
  requestKey: string | null;
  interrupt: boolean;
  model: string;
  autonomy: string;
  reasoningEffort: string | null;
  acceptedAt: string;
  startedAt: string | null;
  endedAt: string | null;
  cancelReason: string | null;
  droidReason: string | null;
  error: { code: string; message: string; retryable: boolean } | null;
  /** Usage so far; `final` once droid's terminal figure is recorded. Null: nothing reported. */
  usage: (TokenUsage & { final: boolean }) | null;
  /** The spend ceiling the turn ran under (its budget, the session's remaining, the host's), null: none. */
  limit: Budget | null;
  needsAttention: boolean;
  permissionsDeclined: RunRecord['permissionsDeclined'];
  questions: RunRecord['questions'];
  predecessorFailure: { run: string; state: RunState; error: { code: string; message: string } | null } | null;
  events: RunRecord['events'];
  /** The schema-valid structured output; null when none was asked for, or none was valid (see error). */
  structuredOutput: Record<string, unknown> | null;
  /** Files the turn changed; null when unknown or not recorded. */
  changes: NonNullable<RunRecord['changes']> | null;
  /** Context occupancy after the turn; null when not known. */
  context: NonNullable<RunRecord['context']> | null;
  /** Checkout sessions' writer turns only: the branch's commits ahead of its base; null when git could not tell. */
  commits?: RunRecord['commits'];
  /** Sandboxed turns with their own network: the destinations the proxy refused. */
  egress?: RunRecord['egress'];
  /** A rewind turn (issue 40): the run whose start it rewound the session to. */
  rewindTo?: string;
  /** What that rewind did to the files, once droid did it. */
  rewind?: RunRecord['rewind'];
  /** Undone by a later turn's rewind: that run. */
  rewoundBy?: string;
  /** The compaction before this turn's prompt: asked for or automatic, and the context before and after. */
  compaction?: RunRecord['compaction'];
}

/** Where a checkout session's work is (only sessions created with isolation: "worktree" have one). */
export interface CheckoutView {
  isolation: 'worktree';
  /** The folder its turns run in. */
  path: string;
  branch: string;
  /** The commit it was made from; null until its first turn made it. */
  base: string | null;
  /** The repository the branch is kept in. */
  repository: string;
  state: CheckoutRecord['state'];
}

export function checkoutView(c: CheckoutRecord): CheckoutView {
  return { isolation: c.isolation, path: c.workspace, branch: c.branch, base: c.base, repository: c.repository, state: c.state };
}

export interface SessionView {
  session: string;
  workspace: string;
  title: string | null;
  labels: string[];
  archived: boolean;
  replyTo: string | null;
  createdAt: string;
  updatedAt: string;
  agentState: AgentState;
  needsAttention: boolean;
  notification: Notification;
  /** Why notification is `failed`; null otherwise. */
  notificationError: { code: string; message: string } | null;
  queuedRuns: number;
  preview: string;
  /** The session's total budget and what its turns spent so far; null: no session budget. */
  budget: SessionBudgetView | null;
  latestRun: RunView;
  /** Present only for sessions created with isolation: "worktree". */
  checkout?: CheckoutView;
  /** Present only for sessions created with network "model-only". */
  network?: 'model-only';
  /** Present only for forks: the source session and the run the fork starts after. */
  forkOf?: { session: string; run: string };
}

export interface SessionBudgetView extends Budget {
  spentTokens: number;
  spentCredits: number;
}

function notificationOf(run: RunRecord): Notification {
  const reply = run.reply;
  if (!reply) return 'disabled';
  if (reply.failure) return 'failed';
  if (reply.accepted > 0) return 'accepted';
  return isWorking(run.state) ? 'pending' : 'not_sent';
}

export function isWorking(state: RunState): boolean {
  return state === 'queued' || LIVE_STATES.includes(state);
}

function runView(run: RunRecord): RunView {
  return {
    run: run.id,
    seq: run.seq,
    state: run.state,
    requestKey: run.requestKey,
    interrupt: run.interrupt,
    model: run.settings.model,
    autonomy: run.settings.autonomy,
    reasoningEffort: run.settings.reasoningEffort,
    acceptedAt: run.acceptedAt,
    startedAt: run.startedAt,
    endedAt: run.endedAt,
    cancelReason: run.cancelReason,
    droidReason: run.reason,
    error: run.error ? { code: run.error.code, message: run.error.message, retryable: run.error.retryable } : null,
    usage: run.usage === null ? null : { ...run.usage, final: run.usageLive !== true && TERMINAL_STATES.includes(run.state) },
    limit: run.limit ?? null,
    needsAttention: run.needsAttention,
    permissionsDeclined: run.permissionsDeclined,
    questions: run.questions,
    predecessorFailure: run.predecessorFailure
      ? {
          run: run.predecessorFailure.runId,
          state: run.predecessorFailure.state,
          error: run.predecessorFailure.error ? { code: run.predecessorFailure.error.code, message: run.predecessorFailure.error.message } : null,
        }
      : null,
    events: run.events,
    structuredOutput: run.structuredOutput ?? null,
    changes: run.changes ?? null,
    context: run.context ?? null,
    ...(run.commits !== undefined ? { commits: run.commits } : {}),
    ...(run.egress !== undefined ? { egress: run.egress } : {}),
    ...(run.rewindTo !== undefined ? { rewindTo: run.rewindTo } : {}),
    ...(run.rewind !== undefined ? { rewind: run.rewind } : {}),
    ...(run.rewound !== undefined ? { rewoundBy: run.rewound.by } : {}),
    ...(run.compaction !== undefined ? { compaction: run.compaction } : {}),
  };
}

/**
 * What a session's view needs of its runs besides its head run's record:
 * made from the store's facts (session-reader.ts) or from the records
 * (`summarizeRuns`), the same either way.
 */
export interface RunsSummary {
  agentState: AgentState;
  /** The latest non-empty preview of its runs, '' when none has one. */
  preview: string;
  queuedRuns: number;
  /** The run the view shows as latestRun: the session's head run (its last when the head is not among them). */
  headId: string;
}

/** `runs` are the session's runs in seq order (at least one). */
export function summarizeRuns(headRunId: string, runs: readonly Pick<RunRecord, 'id' | 'state' | 'preview'>[]): RunsSummary {
  const head = runs.find((r) => r.id === headRunId) ?? runs[runs.length - 1]!;
  const anyUnknown = runs.some((r) => r.state === 'unknown');
  const working = runs.some((r) => isWorking(r.state));
  const latestPreview = [...runs].reverse().find((r) => r.preview !== '')?.preview ?? '';
  return {
    agentState: working ? 'working' : anyUnknown ? 'unknown' : 'idle',
    preview: latestPreview,
    queuedRuns: runs.filter((r) => r.state === 'queued').length,
    headId: head.id,
  };
}

/** The session's view from its runs' summary and the record of its head run (`summary.headId`). */
export function sessionView(session: SessionRecord, summary: RunsSummary, head: RunRecord, budget: SessionBudgetView | null = null): SessionView {
  return {
    session: session.id,
    workspace: session.workspace,
    title: session.title,
    labels: session.labels,
    archived: session.archived,
    replyTo: session.replyTo,
    createdAt: session.createdAt,
    updatedAt: session.updatedAt,
    agentState: summary.agentState,
    needsAttention: head.needsAttention,
    notification: notificationOf(head),
    notificationError: head.reply?.failure ? { code: head.reply.failure.code, message: head.reply.failure.message } : null,
    queuedRuns: summary.queuedRuns,
    preview: summary.preview,
    budget,
    latestRun: runView(head),
    ...(session.checkout ? { checkout: checkoutView(session.checkout) } : {}),
    ...(session.network ? { network: session.network } : {}),
    ...(session.forkOf ? { forkOf: { session: session.forkOf.sessionId, run: session.forkOf.runId } } : {}),
  };
}
