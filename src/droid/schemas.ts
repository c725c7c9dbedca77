/**
 * The shapes droid's turns produce (errors, usage, permission and question
 * records, transcript entries, progress events, catalog entries), each
 * described once: the zod schema is the source and the type is inferred
 * from it. They live at the bottom layer because two boundaries check them:
 * worker ↔ controller IPC (worker/contract/ipc.ts) and the state read back
 * from disk (shared/record-schemas.ts). The droid modules that make them
 * re-export the types under the names they always had.
 */
import { z } from 'zod';

/** A plain, serializable view of any error, safe to send over IPC. */
export const errorInfo = z.object({ code: z.string().min(1), message: z.string(), retryable: z.boolean() }).strict();
export type ErrorInfo = z.infer<typeof errorInfo>;

const count = z.number().finite().nonnegative();
export const tokenUsage = z
  .object({
    inputTokens: count,
    outputTokens: count,
    cacheCreationTokens: count,
    cacheReadTokens: count,
    thinkingTokens: count,
    factoryCredits: count.nullable(),
  })
  .strict();
export type TokenUsage = z.infer<typeof tokenUsage>;

export const permissionRecord = z.object({ tool: z.string(), summary: z.string() }).strict();
export type PermissionRecord = z.infer<typeof permissionRecord>;

export const questionRecord = z.object({ topic: z.string(), question: z.string(), options: z.array(z.string()) }).strict();
export type QuestionRecord = z.infer<typeof questionRecord>;

/** What a turn produced, in order; never the user's prompt. */
export const transcriptEntry = z.discriminatedUnion('kind', [
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
export type TranscriptEntry = z.infer<typeof transcriptEntry>;

/** What the worker reports of a running turn, as it happens. */
export const progressEvent = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('assistant_text'), text: z.string() }).strict(),
  /** Streaming text so far, throttled; the only history of a running turn. */
  z.object({ kind: z.literal('assistant_partial'), text: z.string() }).strict(),
  z.object({ kind: z.literal('tool_started'), tool: z.string(), input: z.string() }).strict(),
  z.object({ kind: z.literal('tool_finished'), tool: z.string(), isError: z.boolean(), result: z.string() }).strict(),
  z.object({ kind: z.literal('droid_error'), message: z.string() }).strict(),
  z.object({ kind: z.literal('ignored_turn_end'), turnId: z.string(), reason: z.string() }).strict(),
]);
export type ProgressEvent = z.infer<typeof progressEvent>;

/**
 * One entry of droid's model catalog (list_models; availableModels of
 * initialize_session and load_session): the fields the controller reads are
 * typed, the rest are kept as droid sent them.
 */
export const catalogModel = z.looseObject({
  id: z.string().min(1),
  displayName: z.string().optional(),
  shortDisplayName: z.string().optional(),
  modelProvider: z.string().optional(),
  supportedReasoningEfforts: z.array(z.string()).optional(),
  defaultReasoningEffort: z.string().optional(),
  deprecated: z.boolean().optional(),
  disabled: z.boolean().optional(),
  deprecationDate: z.string().optional(),
  isCustom: z.boolean().optional(),
});
export type CatalogModel = z.infer<typeof catalogModel>;
