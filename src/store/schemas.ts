/**
 * Runtime schemas for everything the store reads back from disk. They mirror
 * `records.ts` field for field and are strict, so a record from another
 * version or a hand edit is refused instead of half-understood. The type
 * assertions at the bottom make the compiler fail if the two drift apart.
 */
import { z } from 'zod';
import type { ErrorInfo } from '../droid/errors.js';
import type { TokenUsage } from '../droid/notifications.js';
import type { PermissionRecord, QuestionRecord } from '../droid/permission-policy.js';
import type { TranscriptEntry } from '../droid/turn-collector.js';
import type { ContextStats } from '../worker/protocol.js';
import type { ChangeSet } from '../worker/tree-state.js';
import type {
  CancelReason,
  EffectiveSettings,
  ProgressRecord,
  RunRecord,
  RunResultFile,
  RunState,
  SessionRecord,
} from './records.js';

const id = z.string().min(1);

// The shared shapes below are also the public output shapes of the MCP tools.

export const errorInfo = z.object({ code: z.string(), message: z.string(), retryable: z.boolean() }).strict();

export const tokenUsage = z
  .object({
    inputTokens: z.number(),
    outputTokens: z.number(),
    cacheCreationTokens: z.number(),
    cacheReadTokens: z.number(),
    thinkingTokens: z.number(),
    factoryCredits: z.number().nullable(),
  })
  .strict();

export const permissionRecord = z.object({ tool: z.string(), summary: z.string() }).strict();

export const questionRecord = z.object({ topic: z.string(), question: z.string(), options: z.array(z.string()) }).strict();

export const runState = z.enum([
  'queued',
  'starting',
  'running',
  'cancelling',
  'succeeded',
  'interrupted',
  'failed',
  'timed_out',
  'cancelled',
  'unknown',
]);

const cancelReason = z.enum(['cancelled', 'superseded', 'queue_lost', 'predecessor_failed', 'interrupt_unconfirmed']);

const effectiveSettings = z
  .object({
    model: z.string(),
    autonomy: z.enum(['off', 'low', 'medium', 'high']),
    reasoningEffort: z.string().nullable(),
  })
  .strict();

export const changeSet = z
  .object({
    added: z.array(z.string()),
    modified: z.array(z.string()),
    deleted: z.array(z.string()),
    renamed: z.array(z.object({ from: z.string(), to: z.string() }).strict()),
    truncated: z.number().int().nonnegative(),
    outsideWorkspace: z.boolean(),
  })
  .strict();

export const contextStats = z.object({ used: z.number(), limit: z.number(), fraction: z.number() }).strict();

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
    droidSessionId: z.string().nullable(),
    headRunId: id,
    factoryTitle: z.string().nullable(),
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
  })
  .strict();

const transcriptEntry = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('assistant'), text: z.string() }).strict(),
  z
    .object({
      kind: z.literal('tool'),
      toolUseId: z.string(),
      name: z.string(),
      input: z.string(),
      status: z.enum(['open', 'done', 'aborted']),
      isError: z.boolean(),
      result: z.string().optional(),
    })
    .strict(),
]);

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
type Same<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
function agree<T extends true>(): T | undefined {
  return undefined;
}
agree<Same<z.infer<typeof sessionRecordSchema>, SessionRecord>>();
agree<Same<z.infer<typeof runRecordSchema>, RunRecord>>();
agree<Same<z.infer<typeof runResultFileSchema>, RunResultFile>>();
agree<Same<z.infer<typeof runState>, RunState>>();
agree<Same<z.infer<typeof cancelReason>, CancelReason>>();
agree<Same<z.infer<typeof effectiveSettings>, EffectiveSettings>>();
agree<Same<z.infer<typeof progressRecord>, ProgressRecord>>();
agree<Same<z.infer<typeof changeSet>, ChangeSet>>();
agree<Same<z.infer<typeof contextStats>, ContextStats>>();
agree<Same<z.infer<typeof errorInfo>, ErrorInfo>>();
agree<Same<z.infer<typeof tokenUsage>, TokenUsage>>();
agree<Same<z.infer<typeof permissionRecord>, PermissionRecord>>();
agree<Same<z.infer<typeof questionRecord>, QuestionRecord>>();
agree<Same<z.infer<typeof transcriptEntry>, TranscriptEntry>>();
