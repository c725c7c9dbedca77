/**
 * Runtime schemas for everything the store reads back from disk. They mirror
 * `records.ts` field for field and are strict, so a record from another
 * version or a hand edit is refused instead of half-understood. The type
 * assertions at the bottom make the compiler fail if the two drift apart.
 */
import { z } from 'zod';
import { agree, errorInfo, permissionRecord, questionRecord, tokenUsage, transcriptEntry, type Same } from '../droid/schemas.js';
import { changeSet, contextStats, egressEvidence } from './evidence-types.js';
import type { Budget } from './budget.js';
import { checkoutRecord, commitsAhead } from './checkout-types.js';
import {
  AUTONOMY_LEVELS,
  RUN_STATES,
  type CancelReason,
  type EffectiveSettings,
  type ProgressRecord,
  type ReplyHandleRecord,
  type RunRecord,
  type RunReply,
  type RunResultFile,
  type RunState,
  type SessionRecord,
} from './records.js';

const id = z.string().min(1);

// The shared shapes below are also the public output shapes of the MCP tools.

/** The autonomy levels, as every schema that names one checks them. */
export const autonomySchema = z.enum(AUTONOMY_LEVELS);

export { errorInfo, permissionRecord, questionRecord, tokenUsage } from '../droid/schemas.js';

export const runState = z.enum(RUN_STATES);

const cancelReason = z.enum(['cancelled', 'superseded', 'queue_lost', 'predecessor_failed', 'interrupt_unconfirmed']);

const effectiveSettings = z
  .object({
    model: z.string(),
    autonomy: autonomySchema,
    reasoningEffort: z.string().nullable(),
  })
  .strict();

/** A stored ceiling: whole tokens, fractional credits, each positive or null (none). */
export const budgetRecord = z
  .object({ maxTokens: z.number().int().positive().nullable(), maxCredits: z.number().positive().finite().nullable() })
  .strict();

export const progressRecord = z.object({ at: z.string(), kind: z.string(), detail: z.string() }).strict();

export const sessionRecordSchema = z
  .object({
    id,
    createdAt: z.string(),
    updatedAt: z.string(),
    workspace: z.string(),
    title: z.string().nullable(),
    labels: z.array(z.string()),
    archived: z.boolean(),
    replyTo: z.string().nullable(),
    // Optional: absent on detached sessions, including all written before reply-back.
    replyRouteId: id.optional(),
    droidSessionId: z.string().nullable(),
    headRunId: id,
    factoryTitle: z.string().nullable(),
    // Optional: absent on sessions without a budget, including all written before budgets.
    budget: budgetRecord.optional(),
    // Optional: absent on sessions without a checkout, including all written before checkouts.
    checkout: checkoutRecord.optional(),
    // Optional: absent on sessions with the host's network policy, including all written before issue 37.
    network: z.literal('model-only').optional(),
  })
  .strict()
  // A routed session without its route (or a route without a recipient) is incomplete.
  .refine((s) => (s.replyTo === null) === (s.replyRouteId === undefined), {
    message: 'replyRouteId must be present exactly when replyTo is set',
    path: ['replyRouteId'],
  });

const replyHandleRecord = z.object({ handle: z.string().min(1), routeId: id }).strict();

const runReply = z
  .object({
    routeId: id,
    accepted: z.number().int().min(0),
    handles: z.array(replyHandleRecord),
    failure: errorInfo.nullable(),
  })
  .strict();

export const runRecordSchema = z
  .object({
    id,
    sessionId: id,
    seq: z.number().int().min(1),
    kind: z.enum(['create', 'send']),
    requestKey: z.string().nullable(),
    fingerprint: z.string(),
    interrupt: z.boolean(),
    settings: effectiveSettings,
    state: runState,
    acceptedAt: z.string(),
    startedAt: z.string().nullable(),
    endedAt: z.string().nullable(),
    cancelReason: cancelReason.nullable(),
    reason: z.string().nullable(),
    error: errorInfo.nullable(),
    usage: tokenUsage.nullable(),
    preview: z.string(),
    needsAttention: z.boolean(),
    permissionsDeclined: z.array(permissionRecord),
    questions: z.array(questionRecord),
    predecessorFailure: z
      .object({ runId: id, state: runState, error: errorInfo.nullable() })
      .strict()
      .nullable(),
    events: z.array(progressRecord),
    hasResult: z.boolean(),
    structuredOutput: z.record(z.string(), z.unknown()).nullable().optional(),
    changes: changeSet.nullable().optional(),
    context: contextStats.nullable().optional(),
    commits: commitsAhead.nullable().optional(),
    egress: egressEvidence.optional(),
    // Optional: absent on detached turns, including all written before reply-back.
    reply: runReply.optional(),
    // Optional, so runs written before budgets and live usage load unchanged.
    budget: budgetRecord.optional(),
    limit: budgetRecord.optional(),
    usageLive: z.literal(true).optional(),
  })
  .strict();

export const runResultFileSchema = z
  .object({
    runId: id,
    finalText: z.string(),
    transcript: z.array(transcriptEntry),
    permissionsApproved: z.array(permissionRecord),
    diagnostics: z.array(z.string()),
    stderrTail: z.string(),
  })
  .strict();

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

// ---- compile-time proof that the schemas and records.ts agree ----
// Identity of types (not mere assignability), so a missing optional field also fails.
agree<Same<z.infer<typeof sessionRecordSchema>, SessionRecord>>();
agree<Same<z.infer<typeof runRecordSchema>, RunRecord>>();
agree<Same<z.infer<typeof runResultFileSchema>, RunResultFile>>();
agree<Same<z.infer<typeof runState>, RunState>>();
agree<Same<z.infer<typeof cancelReason>, CancelReason>>();
agree<Same<z.infer<typeof effectiveSettings>, EffectiveSettings>>();
agree<Same<z.infer<typeof progressRecord>, ProgressRecord>>();
agree<Same<z.infer<typeof runReply>, RunReply>>();
agree<Same<z.infer<typeof replyHandleRecord>, ReplyHandleRecord>>();
agree<Same<z.infer<typeof budgetRecord>, Budget>>();
