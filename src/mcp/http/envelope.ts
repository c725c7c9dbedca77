/**
 * Turns a request body into JSON-RPC messages, or says why it cannot: bad
 * UTF-8 or JSON is a parse error, anything that is not a JSON-RPC message
 * (or a bounded batch of them) is an invalid request. Both are HTTP 400.
 */
import { JSONRPCMessageSchema, type JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';

/** Mirrors the SDK transport's own batch bound. */
const MAX_BATCH = 100;

export type Envelope = { ok: true; messages: JSONRPCMessage | JSONRPCMessage[] } | { ok: false; code: -32700 | -32600; message: string };

const utf8 = new TextDecoder('utf-8', { fatal: true });

export function parseEnvelope(body: Buffer): Envelope {
  let raw: unknown;
  try {
    raw = JSON.parse(utf8.decode(body));
  } catch {
    return { ok: false, code: -32700, message: 'Parse error: the body is not valid UTF-8 JSON' };
  }
  if (Array.isArray(raw)) {
    if (raw.length === 0 || raw.length > MAX_BATCH) {
      return { ok: false, code: -32600, message: `Invalid Request: a batch must hold 1 to ${MAX_BATCH} messages` };
    }
    const messages: JSONRPCMessage[] = [];
    for (const item of raw) {
      const parsed = JSONRPCMessageSchema.safeParse(item);
      if (!parsed.success) return invalid();
      messages.push(parsed.data);
    }
    return { ok: true, messages };
  }
  const parsed = JSONRPCMessageSchema.safeParse(raw);
  return parsed.success ? { ok: true, messages: parsed.data } : invalid();
}

function invalid(): Envelope {
  return { ok: false, code: -32600, message: 'Invalid Request: not a JSON-RPC 2.0 message' };
}
