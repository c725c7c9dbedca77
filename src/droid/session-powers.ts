/**
 * droid's own session powers on the open session (issue 40): fork it, list
 * and execute a rewind to one of its user messages, compact it. Each makes
 * a NEW droid session and says its id (measured on 0.225.2,
 * docs/PROTOCOL-NOTES.md part 8); the one it was made from stays as it was.
 * Answers are checked here: a shape we do not know is a protocol error,
 * never a guess.
 */
import { z } from 'zod';
import type { DroidClient } from './client.js';
import { DroidError } from './errors.js';

const sessionId = z.string().min(1);
const count = z.number().int().nonnegative();

/** A file droid can put back as it was before the message: its content hash and size then. */
const restorableFile = z.looseObject({ filePath: z.string().min(1), contentHash: z.string(), size: z.number() });
const createdFile = z.looseObject({ filePath: z.string().min(1) });
const evictedFile = z.looseObject({ filePath: z.string().min(1), reason: z.string().optional() });

const rewindInfoAnswer = z.looseObject({
  availableFiles: z.array(restorableFile),
  createdFiles: z.array(createdFile),
  evictedFiles: z.array(evictedFile).optional(),
});
export type RewindInfo = z.infer<typeof rewindInfoAnswer>;
export type RestorableFile = z.infer<typeof restorableFile>;

const rewindAnswer = z.looseObject({
  newSessionId: sessionId,
  restoredCount: count,
  deletedCount: count,
  failedRestoreCount: count,
  failedDeleteCount: count,
});
export type RewindAnswer = z.infer<typeof rewindAnswer>;

const forkAnswer = z.looseObject({ newSessionId: sessionId });
const compactAnswer = z.looseObject({ newSessionId: sessionId, removedCount: count });
export type CompactAnswer = z.infer<typeof compactAnswer>;

/** droid's own client waits twice its usual request time for a rewind (it copies files): so do we. */
const SLOW_REQUEST_FACTOR = 2;

function checked<T>(schema: z.ZodType<T>, method: string, answer: unknown): T {
  const parsed = schema.safeParse(answer);
  if (!parsed.success)
    throw new DroidError('droid_protocol_error', `${method} answered in a shape we do not know: ${parsed.error.issues[0]?.message ?? 'invalid'}`);
  return parsed.data;
}

/** A fork of the open session at its latest message; the open session is left as it was. */
export async function forkSession(client: DroidClient, options: { title?: string; tags?: readonly string[] } = {}): Promise<string> {
  const params = { ...(options.title && { title: options.title }), ...(options.tags?.length && { tags: options.tags.map((name) => ({ name })) }) };
  return checked(forkAnswer, 'droid.fork_session', await client.process.connection.request('droid.fork_session', params)).newSessionId;
}

/** What a rewind to just before `messageId` would restore (files droid's tools edited) and delete (files they created). */
export async function rewindInfo(client: DroidClient, droidSessionId: string, messageId: string): Promise<RewindInfo> {
  const answer = await client.process.connection.request('droid.get_rewind_info', { sessionId: droidSessionId, messageId });
  return checked(rewindInfoAnswer, 'droid.get_rewind_info', answer);
}

/**
 * A new session holding the conversation before `messageId`, the listed
 * files restored and deleted first (none listed: the conversation alone).
 */
export async function executeRewind(
  client: DroidClient,
  params: { droidSessionId: string; messageId: string; restore: readonly RestorableFile[]; remove: readonly string[]; title: string; timeoutMs: number },
): Promise<RewindAnswer> {
  const answer = await client.process.connection.request(
    'droid.execute_rewind',
    {
      sessionId: params.droidSessionId,
      messageId: params.messageId,
      filesToRestore: params.restore.map((f) => ({ filePath: f.filePath, contentHash: f.contentHash, size: f.size })),
      filesToDelete: params.remove.map((filePath) => ({ filePath })),
      forkTitle: params.title,
    },
    params.timeoutMs * SLOW_REQUEST_FACTOR,
  );
  return checked(rewindAnswer, 'droid.execute_rewind', answer);
}

/** A new session whose conversation is droid's summary of the open one's. */
export async function compactSession(client: DroidClient, timeoutMs: number): Promise<CompactAnswer> {
  return checked(compactAnswer, 'droid.compact_session', await client.process.connection.request('droid.compact_session', {}, timeoutMs));
}
