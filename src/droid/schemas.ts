/**
 * Runtime schemas of the shapes droid's turns produce (errors, usage,
 * permission and question records, transcript entries, catalog entries). They live at the
 * bottom layer because two boundaries check them: worker ↔ controller IPC
 * (worker/shared/ipc.ts) and the state read back from disk (shared/record-schemas.ts).
 * The assertions at the bottom make the compiler fail if a schema and its
 * TypeScript type drift apart.
 */
import { z } from 'zod';
import type { CatalogModel } from './client.js';
import type { ErrorInfo } from './errors.js';
import type { TokenUsage } from './notifications.js';
import type { PermissionRecord, QuestionRecord } from './permission-policy.js';
import type { TranscriptEntry } from './turn-collector.js';

export const errorInfo = z.object({ code: z.string().min(1), message: z.string(), retryable: z.boolean() }).strict();

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

export const permissionRecord = z.object({ tool: z.string(), summary: z.string() }).strict();

export const questionRecord = z.object({ topic: z.string(), question: z.string(), options: z.array(z.string()) }).strict();

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

// ---- compile-time proof that the schemas and the types agree ----
// Identity of types (not mere assignability), so a missing optional field also fails.
export type Same<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
export function agree<T extends true>(): T | undefined {
  return undefined;
}
agree<Same<z.infer<typeof transcriptEntry>, TranscriptEntry>>();
agree<Same<z.infer<typeof errorInfo>, ErrorInfo>>();
agree<Same<z.infer<typeof tokenUsage>, TokenUsage>>();
agree<Same<z.infer<typeof permissionRecord>, PermissionRecord>>();
agree<Same<z.infer<typeof questionRecord>, QuestionRecord>>();
agree<Same<z.infer<typeof catalogModel>, CatalogModel>>();
