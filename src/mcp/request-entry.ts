/**
 * The SDK server's own request dispatch, reached past its message
 * classification. The callback an SDK server sets on its transport checks
 * every message against the response, error, request and notification
 * schemas in turn; for a request the first two fail, and each failure
 * builds a zod error with its message and stack (≈ 80 µs a request here,
 * about half of an HTTP status call's CPU). Both of our transports have
 * already parsed each message with JSONRPCMessageSchema (the SDK's stdio
 * transport; envelope.ts for HTTP), so for a request that classification
 * could only answer "request".
 *
 * `_onrequest` is private in the SDK's types. The SDK is pinned to one
 * version, and shared-server.test.ts fails when the method is gone, so
 * an upgrade that drops it is seen; until then requests would go through
 * the transport's callback again, as slow as before but still correct.
 */
import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCRequest, MessageExtraInfo } from '@modelcontextprotocol/sdk/types.js';

export type RequestEntry = (request: JSONRPCRequest, extra?: MessageExtraInfo) => void;

export function requestEntry(server: Server): RequestEntry | undefined {
  const entry: unknown = (server as unknown as { _onrequest?: unknown })._onrequest;
  return typeof entry === 'function' ? (entry as RequestEntry).bind(server) : undefined;
}

/**
 * Makes a connected transport hand requests to the server's dispatch
 * directly, every other message still to the SDK's callback. Only for a
 * transport that has already parsed each message with JSONRPCMessageSchema
 * (the SDK's stdio transport does): its members are strict objects, so a
 * message with both `method` and `id` is a request.
 */
export function dispatchRequestsDirectly(server: Server, transport: Transport): void {
  const entry = requestEntry(server);
  const classify = transport.onmessage;
  if (entry === undefined || classify === undefined) return;
  transport.onmessage = (message, extra) => {
    if ('method' in message && 'id' in message) entry(message, extra);
    else classify(message, extra);
  };
}
