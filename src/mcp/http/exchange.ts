/**
 * One stateless MCP exchange over HTTP: the Streamable HTTP rules of the
 * spec for a POST (as the SDK's server transport applies them in stateless
 * JSON response mode), then the already-validated messages answered by an
 * MCP server lent to this exchange alone by the idle servers
 * (idle-servers.ts), connected to a transport of the exchange's own
 * (json-transport.ts), and that server handed back closed. Every message
 * reaches the server through the SDK's own transport callback, so a caller's
 * ids, cancellations and log level live on a connection no other caller's
 * requests share.
 *
 * Every refusal is decided before a server is taken, so a refused request
 * runs nothing and changes nothing. Every failure comes back to the
 * listener, which alone decides what the caller sees.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { isJsonContentType } from '@modelcontextprotocol/sdk/shared/mediaType.js';
import {
  isInitializeRequest,
  SUPPORTED_PROTOCOL_VERSIONS,
  type JSONRPCMessage,
  type MessageExtraInfo,
  type RequestId,
} from '@modelcontextprotocol/sdk/types.js';
import { untilEnded, type ExchangeEnd } from './exchange-end.js';
import { isRequest, JsonExchangeTransport } from './json-transport.js';
import type { ServerLender } from './idle-servers.js';
import type { Refusal } from './listener-answers.js';

export interface McpExchange {
  /** Absolute URL of the endpoint, as handlers see it in their request info. */
  url: string;
  headers: IncomingHttpHeaders;
  messages: JSONRPCMessage | JSONRPCMessage[];
  /** Ends early when the caller is gone or the response deadline passed. */
  end: ExchangeEnd;
}

export type McpOutcome =
  /** The JSON answer: one response object, or an array of them for a batch. */
  | { kind: 'answer'; body: string }
  /** Only notifications and responses arrived: 202, no body. */
  | { kind: 'accepted' }
  | { kind: 'refused'; refusal: Refusal; reason: string };

/** The request headers handlers may see; credentials never go past the listener. */
const FORWARDED = ['accept', 'content-type', 'mcp-protocol-version'] as const;

const NOT_ACCEPTABLE: Refusal = {
  status: 406,
  code: -32000,
  message: 'Not Acceptable: Client must accept both application/json and text/event-stream',
};
const UNSUPPORTED_MEDIA_TYPE: Refusal = {
  status: 415,
  code: -32000,
  message: 'Unsupported Media Type: Content-Type must be application/json',
};
const INITIALIZE_ALONE: Refusal = { status: 400, code: -32600, message: 'Invalid Request: Only one initialization request is allowed' };
const DUPLICATE_IDS: Refusal = {
  status: 400,
  code: -32600,
  message: 'Invalid Request: the requests of a batch need distinct ids (an answer is matched to its request by id)',
};

function header(headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name];
  return typeof value === 'string' ? value : undefined;
}

/**
 * The spec's checks of a POST, in the SDK transport's order; pure. Returns
 * the refusal, or the ids of the requests to answer (distinct, in order).
 */
function admit(
  headers: IncomingHttpHeaders,
  messages: readonly JSONRPCMessage[],
): { ok: true; requestIds: RequestId[] } | { ok: false; refusal: Refusal; reason: string } {
  const accept = header(headers, 'accept');
  // A comma-separated list: a substring check is the SDK's (and the spec's) reading.
  if (!accept?.includes('application/json') || !accept.includes('text/event-stream')) {
    return { ok: false, refusal: NOT_ACCEPTABLE, reason: 'not_acceptable' };
  }
  if (!isJsonContentType(header(headers, 'content-type'))) return { ok: false, refusal: UNSUPPORTED_MEDIA_TYPE, reason: 'content_type' };
  // The method test first: the zod check runs only for what claims to be initialize.
  const initializing = messages.some((m) => 'method' in m && m.method === 'initialize' && isInitializeRequest(m));
  if (initializing) {
    if (messages.length > 1) return { ok: false, refusal: INITIALIZE_ALONE, reason: 'initialize_batched' };
  } else {
    // Only after initialization is the header required to name a version we speak.
    const version = header(headers, 'mcp-protocol-version');
    if (version !== undefined && !SUPPORTED_PROTOCOL_VERSIONS.includes(version)) {
      const message = `Bad Request: Unsupported protocol version: ${version} (supported versions: ${SUPPORTED_PROTOCOL_VERSIONS.join(', ')})`;
      return { ok: false, refusal: { status: 400, code: -32000, message }, reason: 'protocol_version' };
    }
  }
  const requestIds: RequestId[] = [];
  const seen = new Set<RequestId>();
  for (const message of messages) {
    if (!isRequest(message)) continue;
    if (seen.has(message.id)) return { ok: false, refusal: DUPLICATE_IDS, reason: 'duplicate_ids' };
    seen.add(message.id);
    requestIds.push(message.id);
  }
  return { ok: true, requestIds };
}

export async function exchange(servers: ServerLender, request: McpExchange): Promise<McpOutcome> {
  const batch = Array.isArray(request.messages);
  const messages = Array.isArray(request.messages) ? request.messages : [request.messages];
  const admitted = admit(request.headers, messages);
  if (!admitted.ok) return { kind: 'refused', refusal: admitted.refusal, reason: admitted.reason };

  const requestHeaders: Record<string, string> = {};
  for (const name of FORWARDED) {
    const value = header(request.headers, name);
    if (value !== undefined) requestHeaders[name] = value;
  }
  // The URL is built only if a handler asks for it (none of ours does): a URL per request was 1% of its CPU.
  let url: URL | undefined;
  const extra: MessageExtraInfo = {
    requestInfo: {
      headers: requestHeaders,
      get url() {
        return (url ??= new URL(request.url));
      },
    },
  };
  return lentExchange(servers, messages, admitted.requestIds, batch, extra, request.end);
}

/** The exchange's messages on a server lent to it alone, connected to its own transport. */
async function lentExchange(
  servers: ServerLender,
  messages: readonly JSONRPCMessage[],
  requestIds: readonly RequestId[],
  batch: boolean,
  extra: MessageExtraInfo,
  end: ExchangeEnd,
): Promise<McpOutcome> {
  // Ended already (the client left while the body was read): nothing is taken, nothing runs.
  if (end.reason !== undefined) throw end.reason;
  const server = servers.take();
  // The SDK keeps the level logging/setLevel sets on the server itself: such a server serves no other caller.
  const configured = messages.some((m) => 'method' in m && m.method === 'logging/setLevel');
  const transport = new JsonExchangeTransport(requestIds);
  let outcome: McpOutcome | undefined;
  try {
    await server.connect(transport);
    transport.deliver(messages, extra);
    if (requestIds.length === 0) {
      outcome = { kind: 'accepted' };
    } else {
      const answers = await untilEnded(transport.answered, end);
      // A batch is answered with an array (JSON-RPC 2.0, section 6), even of one.
      outcome = { kind: 'answer', body: JSON.stringify(batch ? answers : answers[0]) };
    }
    return outcome;
  } finally {
    if (outcome !== undefined) {
      // Answered: the server is closed once the handlers' own bookkeeping (which
      // runs in the microtasks after their last send) is done, so closing aborts
      // nothing that already answered. It is lent again only after that.
      setImmediate(() => {
        server.close().then(
          () => servers.give(server, !configured),
          () => servers.give(server, false),
        );
      });
    } else {
      // Ended early or failed: closing now aborts the handlers still running and
      // forgets every request of this connection; the server is not lent again.
      try {
        await server.close();
      } finally {
        servers.give(server, false);
      }
    }
  }
}
