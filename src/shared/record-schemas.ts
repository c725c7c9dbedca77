/**
 * The durable records of the controller, each described once: the zod schema
 * here is the source, and the type (re-exported by records.ts, where callers
 * take it) is inferred from it. Plain JSON: what is written is what is read
 * back. Prompts are never part of any record.
 *
 * The schemas are strict, so a record from another version or a hand edit is
 * refused instead of half-understood. Everything the store reads back from
 * disk is checked against them; the start-up fast check
 * (store/formats/record-guard.ts) and the interner (store/tables/record-interner.ts)
 * are derived from them, so a new field is written here and nowhere else.
 */
import { z } from 'zod';
import { AUTONOMY_LEVELS } from '../droid/permission-policy.js';
import { errorInfo, permissionRecord, questionRecord, tokenUsage, transcriptEntry } from '../droid/schemas.js';
import { changeSet, contextStats, egressEvidence } from './evidence-types.js';
import { checkoutRecord, commitsAhead } from './checkout-types.js';

const id = z.string().min(1);

// The shared shapes below are also the public output shapes of the MCP tools.

/** The autonomy levels, as every schema that names one checks them. */
export const autonomySchema = z.enum(AUTONOMY_LEVELS);

export { errorInfo, permissionRecord, questionRecord, tokenUsage } from '../droid/schemas.js';

/** Every state a run can be in; the order is the schema's, not the run index's codes. */
const RUN_STATES = ['queued', 'starting', 'running', 'cancelling', 'succeeded', 'interrupted', 'failed', 'timed_out', 'cancelled', 'unknown'] as const;
export const runState = z.enum(RUN_STATES);
export type RunState = z.infer<typeof runState>;

/** Why a run was cancelled without a terminal result from droid. */
/** Why a run was cancelled without a terminal result from droid (turn-stop.ts decides it). */
export const cancelReasonSchema = z.enum(['cancelled', 'superseded', 'queue_lost', 'predecessor_failed', 'interrupt_unconfirmed']);

const effectiveSettings = z
  .object({
    model: z.string(),
    autonomy: autonomySchema,
    reasoningEffort: z.string().nullable(),
  })
  .strict();
export type EffectiveSettings = z.infer<typeof effectiveSettings>;

/** A stored ceiling: whole tokens, fractional credits, each positive or null (none). */
export const budgetRecord = z.object({ maxTokens: z.number().int().positive().nullable(), maxCredits: z.number().positive().finite().nullable() }).strict();
/** A ceiling; null in a dimension: none. */
export type Budget = z.infer<typeof budgetRecord>;

export const progressRecord = z.object({ at: z.string(), kind: z.string(), detail: z.string() }).strict();
export type ProgressRecord = z.infer<typeof progressRecord>;

export const sessionRecordSchema = z
  .object({
    id,
    createdAt: z.string(),
    updatedAt: z.string(),
    /** Canonical (realpath) workspace, fixed for the session's life. */
    workspace: z.string(),
    title: z.string().nullable(),
    labels: z.array(z.string()),
    archived: z.boolean(),
    /** Amp conversation the session reports to (`T-<uuid>`), or null: detached. */
    replyTo: z.string().nullable(),
    /**
     * The current reply route: a fresh id each time `replyTo` is set to a new
     * conversation, so a retarget or detach invalidates every older reply
     * handle for good. Present exactly when `replyTo` is not null; absent on
     * detached sessions, which includes every session written before
     * reply-back existed (those all have `replyTo: null`).
     */
    replyRouteId: id.optional(),
    /** droid's own session UUID: private, never leaves the controller. */
    droidSessionId: z.string().nullable(),
    /** The newest accepted run. */
    headRunId: id,
    /** Title known to be applied in Factory (for best-effort sync). */
    factoryTitle: z.string().nullable(),
    /** The caller's total budget over all the session's turns; absent: none (every session before budgets). */
    budget: budgetRecord.optional(),
    /**
     * The session's own checkout (`isolation: "worktree"`). Absent: the session
     * runs in `workspace` itself, which includes every session written before
     * checkouts existed.
     */
    checkout: checkoutRecord.optional(),
    /** The session asked for less network than the host allows (issue 37): only the model endpoints. Absent: the host's policy (every session before issue 37). */
    network: z.literal('model-only').optional(),
    /** A fork (issue 40): the session it was forked from, and the run whose end it starts from. Absent: not a fork. */
    forkOf: z.object({ sessionId: id, runId: id }).strict().optional(),
  })
  .strict()
  // A routed session without its route (or a route without a recipient) is incomplete.
  .refine((s) => (s.replyTo === null) === (s.replyRouteId === undefined), {
    message: 'replyRouteId must be present exactly when replyTo is set',
    path: ['replyRouteId'],
  });
export type SessionRecord = z.infer<typeof sessionRecordSchema>;

/** A reply handle Amp returned to an approved own-route send, and the route it belongs to. */
const replyHandleRecord = z.object({ handle: z.string().min(1), routeId: id }).strict();

/** What the controller observed of a routed turn reporting back (it never sends anything itself). */
const runReply = z
  .object({
    /** The route the turn was accepted, then launched, under. */
    routeId: id,
    /** Approved own-route sends that returned without error. */
    accepted: z.number().int().min(0),
    /** Handles those sends returned; one is valid while its route is still the session's. */
    handles: z.array(replyHandleRecord),
    /** The first failure: reply_misrouted, reply_send_failed, reply_gate_bypassed, …; null if none. */
    failure: errorInfo.nullable(),
  })
  .strict();
export type RunReply = z.infer<typeof runReply>;

/** A path a rewind put back or removed, as droid named it (absolute), bounded like a change set. */
const rewoundPaths = z.array(z.string()).max(50);

/** What a rewind did before its turn's prompt (issue 40): droid's own rewind, as droid reported it. */
export const rewindRecord = z
  .object({
    /** Files droid's tools had edited, put back as they were before the run rewound to. */
    restored: rewoundPaths,
    /** Files droid's tools had created, removed. */
    deleted: rewoundPaths,
    /** Paths left out of the two lists beyond their caps. */
    truncated: z.number().int().nonnegative(),
    /** Files droid could not restore or remove (its counts), and files it no longer had a copy of (evicted). */
    failed: z.number().int().nonnegative(),
    notRestorable: rewoundPaths,
  })
  .strict();
export type RewindRecord = z.infer<typeof rewindRecord>;

/** A compaction before a turn's prompt (issue 40): asked for, or automatic (autoCompactAt), and the context around it. */
export const compactionRecord = z
  .object({
    auto: z.boolean(),
    /** Messages droid replaced by its summary. */
    removedMessages: z.number().int().nonnegative(),
    before: contextStats.nullable(),
    after: contextStats.nullable(),
  })
  .strict();

/**
 * The files droid's tools changed in a turn, with their content when it
 * ended (sha256; null: not there): what a later rewind compares against,
 * so an edit made since is never silently overwritten (issue 40).
 */
export const touchedFiles = z
  .object({
    files: z.array(z.object({ path: z.string(), sha256: z.string().nullable() }).strict()).max(200),
    /** Files left out beyond the cap: a rewind over this turn cannot check them, so it refuses. */
    truncated: z.number().int().nonnegative(),
  })
  .strict();
export type TouchedFiles = z.infer<typeof touchedFiles>;

export const runRecordSchema = z
  .object({
    id,
    sessionId: id,
    /** 1-based position of the run in its session. */
    seq: z.number().int().min(1),
    kind: z.enum(['create', 'send']),
    requestKey: z.string().nullable(),
    /** SHA-256 of the normalized intent (never the prompt itself). */
    fingerprint: z.string(),
    interrupt: z.boolean(),
    settings: effectiveSettings,
    state: runState,
    acceptedAt: z.string(),
    startedAt: z.string().nullable(),
    endedAt: z.string().nullable(),
    cancelReason: cancelReasonSchema.nullable(),
    /** droid's terminal reason (`completed`, `cancelled`, …) when one came. */
    reason: z.string().nullable(),
    error: errorInfo.nullable(),
    usage: tokenUsage.nullable(),
    /** Short tail of the final text, for previews and search. */
    preview: z.string(),
    needsAttention: z.boolean(),
    permissionsDeclined: z.array(permissionRecord),
    questions: z.array(questionRecord),
    predecessorFailure: z.object({ runId: id, state: runState, error: errorInfo.nullable() }).strict().nullable(),
    /** Last 20 progress events, each field bounded. */
    events: z.array(progressRecord),
    /** Whether a full result file exists for this run. */
    hasResult: z.boolean(),
    // The evidence fields are optional, so records written before them load
    // unchanged; absent means "not recorded": an older record, a turn not
    // ended yet, or one that never reached droid.
    /**
     * Absent when the turn asked for no outputSchema; the schema-valid
     * object; or null when none was valid (see `error`).
     */
    structuredOutput: z.record(z.string(), z.unknown()).nullable().optional(),
    /** Files the turn changed; null = unknown (not a git work tree, or git failed). */
    changes: changeSet.nullable().optional(),
    /** Context occupancy after the turn; null when droid did not say. */
    context: contextStats.nullable().optional(),
    /** A checkout session's writer turn: its branch's commits ahead of the base; null when git could not tell. */
    commits: commitsAhead.nullable().optional(),
    /** What the turn's egress proxy refused (issue 37). Absent: droid had the host's network, or the run predates it. */
    egress: egressEvidence.optional(),
    /**
     * Reply-back of a routed turn. Absent: the turn is detached, which
     * includes every run written before reply-back existed.
     */
    reply: runReply.optional(),
    /** The caller's budget for this turn (droid_send_message); absent: none given. Part of the fingerprint. */
    budget: budgetRecord.optional(),
    /** The ceiling the turn ran under, worked out when it started; absent: none (or not started). */
    limit: budgetRecord.optional(),
    /**
     * Present (true) while `usage` is a running figure, not droid's final one:
     * a live turn's last durable figure, which a crash leaves behind. Absent
     * on every run written before live usage, all final.
     */
    usageLive: z.literal(true).optional(),
    // Session powers (issue 40). Each absent on every run before them.
    /** When droid had the prompt, under the run's id as its message id (issue 40): a fork or rewind can name it. Absent: never, or before issue 40. */
    submittedAt: z.string().optional(),
    /** The caller asked this turn to rewind the session to its state before this run first. Part of the fingerprint. */
    rewindTo: id.optional(),
    /** The caller asked this turn to compact the conversation first. Part of the fingerprint. */
    compact: z.literal(true).optional(),
    /** Undone by a later turn's rewind: that run, and when. The run stays in history. */
    rewound: z.object({ by: id, at: z.string() }).strict().optional(),
    /** What this turn's rewind did, once droid did it. */
    rewind: rewindRecord.optional(),
    /** The compaction before this turn's prompt, once droid did it. */
    compaction: compactionRecord.optional(),
    /** Files droid's tools changed in this turn, as it left them. */
    touched: touchedFiles.optional(),
  })
  .strict();
export type RunRecord = z.infer<typeof runRecordSchema>;

/** The per-run result file: the evidence kept beyond the record. */
export const runResultFileSchema = z
  .object({
    runId: id,
    finalText: z.string(),
    transcript: z.array(transcriptEntry),
    permissionsApproved: z.array(permissionRecord),
    diagnostics: z.array(z.string()),
    /** Bounded tail; private to the state directory, never shown by tools. */
    stderrTail: z.string(),
  })
  .strict();
export type RunResultFile = z.infer<typeof runResultFileSchema>;

/**
 * First line of `state.jsonl`. The record counts let a reader tell a complete
 * snapshot from a truncated one; the records follow one per line.
 */
export const snapshotHeaderSchema = z
  .object({
    version: z.number(),
    seq: z.number().int().min(0),
    sessions: z.number().int().min(0),
    runs: z.number().int().min(0),
  })
  .strict();

/** One line of `journal.jsonl`: full replacement records changed by one commit. */
export const journalEntrySchema = z
  .object({
    seq: z.number().int().min(1),
    sessions: z.array(z.unknown()),
    runs: z.array(z.unknown()),
  })
  .strict();

/** Renders zod's first issue as `path: message`, short enough for an error line. */
export function describeIssue(error: z.ZodError): string {
  const issue = error.issues[0];
  if (!issue) return 'invalid value';
  const path = issue.path.length ? issue.path.map(String).join('.') : '(record)';
  return `${path}: ${issue.message}`;
}
