/**
 * The identity of a request, for idempotency. Only a SHA-256 digest of the
 * normalized intent is kept: the prompt itself is never stored.
 */
import { createHash } from 'node:crypto';

export interface Intent {
  kind: 'create' | 'send';
  /** Canonical workspace for create, controller session id for send. */
  target: string;
  prompt: string;
  interrupt: boolean;
  /**
   * create: the recipient (null: detached). send: the requested route
   * change, undefined when replyTo was omitted (keep the route).
   */
  replyTo: string | null | undefined;
  title: string | null;
  labels: readonly string[];
  /** Canonical JSON of the outputSchema, when one was given. */
  outputSchema?: string;
  /** The caller's budget (create: the session's; send: the turn's), when one was given. */
  budget?: { maxTokens: number | null; maxCredits: number | null };
  /** A create that asked for its own checkout. */
  isolation?: 'worktree';
  /** A create that asked for a network other than the host's policy. */
  network?: 'model-only' | 'open';
  /** A create that forks a session (issue 40): the source and the run asked for (null: its latest). */
  forkFrom?: { session: string; run: string | null };
  /** A send that rewinds the session to its state before this run first. */
  rewindTo?: string;
  /** A send that compacts the conversation first. */
  compact?: true;
}

export function fingerprint(intent: Intent): string {
  // A fixed key order and normalized values make equal intents hash equally.
  const normalized = [
    intent.kind,
    intent.target,
    intent.prompt.normalize('NFC'),
    intent.interrupt,
    // Omitted on send is null, as every send fingerprint before reply-back
    // was (sessions were all detached), so their replays still match; an
    // explicit replyTo on send is an object, never equal to an omitted one.
    intent.replyTo === undefined ? null : intent.kind === 'send' ? { replyTo: intent.replyTo } : intent.replyTo,
    intent.title,
    [...intent.labels].sort(),
    // Only when present, so fingerprints of requests without a schema stay as they were.
    ...(intent.outputSchema !== undefined ? [intent.outputSchema] : []),
    // Likewise; an array, so it can never equal an outputSchema string.
    ...(intent.budget !== undefined ? [['budget', intent.budget.maxTokens, intent.budget.maxCredits]] : []),
    // Likewise; an object, so it can never equal a schema's canonical JSON.
    ...(intent.isolation !== undefined ? [{ isolation: intent.isolation }] : []),
    // Likewise; its own key, so it can never equal an isolation object.
    ...(intent.network !== undefined ? [{ network: intent.network }] : []),
    // Likewise, each under its own key (issue 40).
    ...(intent.forkFrom !== undefined ? [{ forkFrom: [intent.forkFrom.session, intent.forkFrom.run] }] : []),
    ...(intent.rewindTo !== undefined ? [{ rewindTo: intent.rewindTo }] : []),
    ...(intent.compact !== undefined ? [{ compact: true }] : []),
  ];
  return createHash('sha256').update(JSON.stringify(normalized)).digest('hex');
}
