/**
 * Validation of the messages that cross the worker ↔ controller process
 * boundary, against their schemas in protocol.ts (the one description of
 * each message). Both sides validate what they receive: an invalid message
 * is reported and ignored, never acted on.
 */
import { z } from 'zod';
import { head } from '../../util/text.js';
import { parentToWorkerSchema, workerToParentSchema, type ParentToWorker, type WorkerToParent } from './protocol.js';

/** How much of a validation problem a diagnostic keeps. */
const PROBLEM_CHARS = 500;

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
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw))
    what = `not an object (${raw === null ? 'null' : Array.isArray(raw) ? 'array' : typeof raw})`;
  else {
    const type = (raw as { type?: unknown }).type;
    what = typeof type === 'string' ? `type=${head(type, 40)}` : 'no type';
  }
  const issues = error.issues.map((i) => `${i.path.length ? i.path.map(String).join('.') : '(message)'}: ${i.message}`);
  return head(`${what}: ${issues.join('; ')}`, PROBLEM_CHARS);
}
