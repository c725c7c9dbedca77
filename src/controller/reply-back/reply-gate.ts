/**
 * The reply-back permission gate: whether one `amp-puck___puck` call of a
 * routed turn may run, and what Amp's answer to an approved send proves.
 * Pure: the same call against the same route always gets the same verdict.
 *
 * Default deny. A call runs only when it is exactly one of:
 * - `{action: "send", params: {conversationID, message}}` with conversationID
 *   equal to the session's current replyTo;
 * - `{action: "read_reply", params: {replyHandle}}` with a handle proven on
 *   the current route (returned to an approved own-route send whose result
 *   was not an error).
 * Anything else (another conversation, a missing or unproven handle, extra
 * or missing fields, any other action) is denied, at every autonomy level.
 */
import { isReplyHandle as isHandle } from '../../droid/amp-tools.js';

export type GateVerdict =
  { approve: true; action: 'send' } | { approve: true; action: 'read_reply'; handle: string } | { approve: false; code: GateDenial; reason: string };

export type GateDenial =
  /** A send to anything but the session's current recipient (including none, or detached). */
  | 'reply_misrouted'
  /** read_reply without a usable handle string. */
  | 'reply_handle_missing'
  /** read_reply with a handle not proven on the current route (foreign, stale or invented). */
  | 'reply_handle_unproven'
  /** Not a send or read_reply of the documented shape. */
  | 'reply_call_malformed';

export interface GateRoute {
  /** The session's recipient right now; null when it is detached. */
  replyTo: string | null;
  /** Handles proven on the current route. */
  proven: ReadonlySet<string>;
}

const MAX_MESSAGE_CHARS = 100_000;

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function onlyKeys(v: Record<string, unknown>, allowed: readonly string[]): boolean {
  return Object.keys(v).every((k) => allowed.includes(k));
}

const deny = (code: GateDenial, reason: string): GateVerdict => ({ approve: false, code, reason });

/** The verdict for one puck call, from the tool input droid put in its permission request. */
export function decideReplyCall(route: GateRoute, input: unknown): GateVerdict {
  if (!isRecord(input) || !onlyKeys(input, ['action', 'params']) || !isRecord(input.params)) {
    return deny('reply_call_malformed', 'a puck call is {action, params} with params an object');
  }
  const { action, params } = input;
  if (action === 'send') {
    const target = params.conversationID;
    // Checked first: an attempt to reach another conversation is what must be recorded.
    if (route.replyTo === null || target !== route.replyTo) {
      const to = typeof target === 'string' ? `conversation ${target.slice(0, 80)}` : 'no conversation (Amp might pick one)';
      const own = route.replyTo === null ? 'the session is detached' : `this session reports only to ${route.replyTo}`;
      return deny('reply_misrouted', `send to ${to} refused: ${own}`);
    }
    if (
      !onlyKeys(params, ['conversationID', 'message']) ||
      typeof params.message !== 'string' ||
      params.message.length === 0 ||
      params.message.length > MAX_MESSAGE_CHARS
    ) {
      return deny('reply_call_malformed', 'send takes exactly params {conversationID, message} with a non-empty message');
    }
    return { approve: true, action: 'send' };
  }
  if (action === 'read_reply') {
    if (!onlyKeys(params, ['replyHandle']) || !isHandle(params.replyHandle)) {
      return deny('reply_handle_missing', 'read_reply takes exactly params {replyHandle} with the handle a send of this session returned');
    }
    if (!route.proven.has(params.replyHandle)) {
      return deny('reply_handle_unproven', 'this handle was not returned to an approved send of this session on its current route');
    }
    return { approve: true, action: 'read_reply', handle: params.replyHandle };
  }
  return deny('reply_call_malformed', `action ${JSON.stringify(String(action)).slice(0, 60)} is not allowed; only send and read_reply`);
}
