/**
 * The SDK server's own request dispatch, reached past its message
 * classification. The callback an SDK server sets on its transport checks
 * every message against the response, error, request and notification
 * schemas in turn; for a request the first two fail, and each failure
 * builds a zod error with its message and stack (≈ 80 µs a request here,
 * a fifth of an HTTP call's CPU). What the shared server delivers has
 * already passed JSONRPCMessageSchema as a request (envelope.ts, and
 * `answersAlone`), so that classification could only answer "request".
 *
 * `_onrequest` is private in the SDK's types. The SDK is pinned to one
 * version, and http-shared-server.test.ts fails when the method is gone, so
 * an upgrade that drops it is seen; until then the shared server would go
 * back to the transport's callback, as slow as before but still correct.
 */
import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { JSONRPCRequest, MessageExtraInfo } from '@modelcontextprotocol/sdk/types.js';

export type RequestEntry = (request: JSONRPCRequest, extra?: MessageExtraInfo) => void;

export function requestEntry(server: Server): RequestEntry | undefined {
  const entry: unknown = (server as unknown as { _onrequest?: unknown })._onrequest;
  return typeof entry === 'function' ? (entry as RequestEntry).bind(server) : undefined;
}
