/**
 * One stateless MCP exchange: a fresh SDK Streamable HTTP transport (no
 * session ids, JSON responses) connected, for exactly one already-validated
 * request, to an MCP server lent by the pool (see http-pool.ts) and handed
 * back closed.
 *
 * The Web-standard transport class is used rather than its Node wrapper on
 * purpose: the wrapper writes its own 500 bodies (with error text) straight
 * to the socket, while here every failure comes back to the listener, which
 * alone decides what the caller sees.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import type { ServerLender } from './http-pool.js';

export interface McpExchange {
  /** Absolute URL of the endpoint, as the transport reports it to handlers. */
  url: string;
  headers: IncomingHttpHeaders;
  messages: JSONRPCMessage | JSONRPCMessage[];
  /** Aborts when the caller is gone or the response deadline passed. */
  signal: AbortSignal;
}

export interface McpReply {
  status: number;
  headers: Headers;
  body: string;
}

/** The request headers the transport reads; credentials never go past the listener. */
const FORWARDED = ['accept', 'content-type', 'mcp-protocol-version'] as const;

export async function exchange(
  servers: ServerLender,
  request: McpExchange,
  onTransportError: (err: Error) => void,
): Promise<McpReply> {
  const server = servers.take();
  const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
  transport.onerror = onTransportError;
  let answered = false;
  let closed = false;
  try {
    await server.connect(transport);
    const headers = new Headers();
    for (const name of FORWARDED) {
      const value = request.headers[name];
      if (typeof value === 'string') headers.set(name, value);
    }
    const webRequest = new Request(request.url, { method: 'POST', headers });
    const response = await untilAborted(
      transport.handleRequest(webRequest, { parsedBody: request.messages }),
      request.signal,
    );
    const reply = { status: response.status, headers: response.headers, body: await untilAborted(response.text(), request.signal) };
    answered = true;
    return reply;
  } finally {
    // Also on abort: an unanswered JSON-mode request would otherwise pin the server.
    // Closing aborts the handlers still running and forgets every request of this connection.
    try {
      await server.close();
      closed = true;
    } finally {
      servers.give(server, answered && closed);
    }
  }
}

function untilAborted<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(abortReason(signal));
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(abortReason(signal));
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(err);
      },
    );
  });
}

function abortReason(signal: AbortSignal): Error {
  return signal.reason instanceof Error ? signal.reason : new Error(String(signal.reason));
}
