/**
 * Runtime schemas of the messages that cross the worker ↔ controller process
 * boundary (`WorkerToParent`, `ParentToWorker` in protocol.ts). Both sides
 * validate what they receive: an invalid message is reported and ignored,
 * never acted on. The assertions at the bottom make the compiler fail if a
 * schema and its TypeScript type drift apart.
 *
 * The shapes of droid's own records come from droid/schemas.ts, shared with
 * the store.
 */
import { z } from 'zod';
import type { ProgressEvent } from '../../droid/turn-collector.js';
import { agree, catalogModel, errorInfo, permissionRecord, questionRecord, tokenUsage, transcriptEntry, type Same } from '../../droid/schemas.js';
import { head } from '../../util/text.js';
import { judgeStop, turnStopSchema } from '../../shared/turn-stop.js';
import { changeSet, contextStats, egressEvidence, type ChangeSet, type ContextStats } from '../../shared/evidence-types.js';
import {
  START_STAGES,
  turnSpecSchema,
  type ParentToWorker,
  type RenameOutcome,
  type ReplyEvent,
  type TurnOutcome,
  type TurnResult,
  type WarmDroidSpec,
  type WorkerToParent,
} from './protocol.js';
import type { WireLaunch } from './worker-process.js';

/** How much of a validation problem a diagnostic keeps. */
const PROBLEM_CHARS = 500;

const progressEventSchema = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('assistant_text'), text: z.string() }).strict(),
  z.object({ kind: z.literal('assistant_partial'), text: z.string() }).strict(),
  z.object({ kind: z.literal('tool_started'), tool: z.string(), input: z.string() }).strict(),
  z.object({ kind: z.literal('tool_finished'), tool: z.string(), isError: z.boolean(), result: z.string() }).strict(),
  z.object({ kind: z.literal('droid_error'), message: z.string() }).strict(),
  z.object({ kind: z.literal('ignored_turn_end'), turnId: z.string(), reason: z.string() }).strict(),
]);


const turnOutcome = z.enum(['succeeded', 'interrupted', 'cancelled', 'failed', 'timed_out']);

const turnResultSchema = z
  .object({
    stop: turnStopSchema,
    outcome: turnOutcome,
    reason: z.string().nullable(),
    submitted: z.boolean(),
    droidSessionId: z.string().min(1).nullable(),
    finalText: z.string(),
    partialText: z.string(),
    usage: tokenUsage.nullable(),
    permissionsDeclined: z.array(permissionRecord),
    permissionsApproved: z.array(permissionRecord),
    questions: z.array(questionRecord),
    transcript: z.array(transcriptEntry),
    error: errorInfo.nullable(),
    diagnostics: z.array(z.string()),
    stderrTail: z.string(),
    // Wall-clock difference: a clock stepped back may make it negative, which is no reason to lose a result.
    durationMs: z.number().finite(),
    structuredOutput: z.record(z.string(), z.unknown()).nullable().optional(),
    changes: changeSet.nullable().optional(),
    context: contextStats.nullable().optional(),
    egress: egressEvidence.optional(),
  })
  .strict()
  // A successful turn names its droid session and carries no error; anything else is not a success.
  .refine((r) => r.outcome !== 'succeeded' || (r.error === null && r.droidSessionId !== null && r.submitted), {
    message: 'a succeeded result must be submitted, name its droid session and carry no error',
  })
  // The controller records the stop: a verdict that is not the stop's is a broken worker, not a second opinion.
  .refine((r) => judgeStop(r.stop, true).outcome === r.outcome, { message: "the result's outcome is not its stop's", path: ['outcome'] });

const renameOutcome = z.object({ title: z.string().min(1), ok: z.boolean(), error: z.string().nullable() }).strict();

/** A puck call droid asked permission for; `input` is droid's tool input, judged by the controller's gate. */
const replyCall = z.object({ toolUseId: z.string().min(1), input: z.unknown() }).strict();

const replyEventSchema = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('send_result'), toolUseId: z.string().min(1), ok: z.boolean(), handle: z.string().min(1).nullable() }).strict(),
  z.object({ kind: z.literal('bypass'), tool: z.string(), toolUseId: z.string().min(1) }).strict(),
]);

const startMarks = z.partialRecord(z.enum(START_STAGES), z.number().finite());

const workerToParentSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('started'), droidSessionId: z.string().min(1), submittedAt: z.iso.datetime(), stages: startMarks.optional() }).strict(),
  // Never empty: an empty list is no catalog (model-catalog.ts `offer`).
  z.object({ type: z.literal('catalog'), models: z.array(catalogModel).min(1), answeredAt: z.iso.datetime() }).strict(),
  z.object({ type: z.literal('progress'), event: progressEventSchema }).strict(),
  z.object({ type: z.literal('usage'), usage: tokenUsage }).strict(),
  z.object({ type: z.literal('terminal'), result: turnResultSchema }).strict(),
  z.object({ type: z.literal('rename'), outcome: renameOutcome }).strict(),
  z.object({ type: z.literal('reply_call'), id: z.string().min(1), call: replyCall }).strict(),
  z.object({ type: z.literal('reply_event'), event: replyEventSchema }).strict(),
  z.object({ type: z.literal('warm_ready') }).strict(),
  z.object({ type: z.literal('warm_lost'), detail: z.string() }).strict(),
]);

const warmDroidSpec = z
  .object({ droidPath: z.string().min(1), droidEnv: z.record(z.string(), z.string()), dir: z.string().startsWith('/') })
  .strict();

const wireLaunch = z
  .object({
    droidPath: z.string().min(1),
    env: z.record(z.string(), z.string()),
    cwd: z.string().startsWith('/'),
    launcher: z.object({ command: z.string().min(1), args: z.array(z.string()), fd3: z.base64(), egress: z.literal(true).optional() }).strict().optional(),
  })
  .strict();

const parentToWorkerSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('run'), spec: turnSpecSchema, launch: wireLaunch.optional() }).strict(),
  z.object({ type: z.literal('warm'), droid: warmDroidSpec.nullable() }).strict(),
  z.object({ type: z.literal('launch'), launch: wireLaunch }).strict(),
  z.object({ type: z.literal('cancel') }).strict(),
  z.object({ type: z.literal('ack') }).strict(),
  z.object({ type: z.literal('skip_rename') }).strict(),
  z.object({ type: z.literal('reply_decision'), id: z.string().min(1), approve: z.boolean() }).strict(),
]);

/**
 * A `run` whose envelope is right but whose spec may not be: the worker
 * answers it with a `turn_spec_invalid` result instead of silence, so the
 * controller is never left waiting for a turn that cannot start.
 */
export const runEnvelopeSchema = z.object({ type: z.literal('run'), spec: z.unknown(), launch: z.unknown().optional() }).strict();

export type Parsed<T> = { ok: true; message: T } | { ok: false; problem: string };

/** Validates a message from a worker. */
export function parseWorkerMessage(raw: unknown): Parsed<WorkerToParent> {
  return parse(workerToParentSchema, raw);
}

/** Validates a message from the controller. */
export function parseParentMessage(raw: unknown): Parsed<ParentToWorker> {
  return parse(parentToWorkerSchema, raw);
}

function parse<T>(schema: z.ZodType<T>, raw: unknown): Parsed<T> {
  const parsed = schema.safeParse(raw);
  if (parsed.success) return { ok: true, message: parsed.data };
  return { ok: false, problem: describe(raw, parsed.error) };
}

/** `type=X: path: message; …`, bounded; never the message's content. */
function describe(raw: unknown, error: z.ZodError): string {
  let what: string;
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) what = `not an object (${raw === null ? 'null' : Array.isArray(raw) ? 'array' : typeof raw})`;
  else {
    const type = (raw as { type?: unknown }).type;
    what = typeof type === 'string' ? `type=${head(type, 40)}` : 'no type';
  }
  const issues = error.issues.map((i) => `${i.path.length ? i.path.map(String).join('.') : '(message)'}: ${i.message}`);
  return head(`${what}: ${issues.join('; ')}`, PROBLEM_CHARS);
}

// ---- compile-time proof that the schemas and protocol.ts agree ----
// Identity of types (not mere assignability), so a missing optional field also fails.
agree<Same<z.infer<typeof workerToParentSchema>, WorkerToParent>>();
agree<Same<z.infer<typeof parentToWorkerSchema>, ParentToWorker>>();
agree<Same<z.infer<typeof turnResultSchema>, TurnResult>>();
agree<Same<z.infer<typeof turnOutcome>, TurnOutcome>>();
agree<Same<z.infer<typeof renameOutcome>, RenameOutcome>>();
agree<Same<z.infer<typeof replyEventSchema>, ReplyEvent>>();
agree<Same<z.infer<typeof warmDroidSpec>, WarmDroidSpec>>();
agree<Same<z.infer<typeof wireLaunch>, WireLaunch>>();
agree<Same<z.infer<typeof progressEventSchema>, ProgressEvent>>();
agree<Same<z.infer<typeof changeSet>, ChangeSet>>();
agree<Same<z.infer<typeof contextStats>, ContextStats>>();
