/**
 * Writes the listener's own answers. Every refusal has the JSON-RPC error
 * shape MCP clients already understand, with `id: null` because the request
 * was not (or could not be) read as a call.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';

/** The only text a caller ever sees for an unexpected failure. */
export const INTERNAL_ERROR_MESSAGE = 'Internal MCP server error';

export interface Refusal {
  status: number;
  /** JSON-RPC error code: -32700 parse, -32600 invalid request, -32603 internal, -32000 transport-level. */
  code: number;
  message: string;
  headers?: Record<string, string>;
}

export function internalError(): Refusal {
  return { status: 500, code: -32603, message: INTERNAL_ERROR_MESSAGE };
}

/**
 * Sends a refusal. When the request body was not read to its end the
 * connection is closed right after the answer, so the rest is never read
 * (Node would otherwise drain it to keep the connection alive).
 */
export function refuse(req: IncomingMessage, res: ServerResponse, refusal: Refusal, bodyPending: boolean): void {
  if (res.headersSent || res.destroyed) {
    req.socket.destroy();
    return;
  }
  const body = JSON.stringify({ jsonrpc: '2.0', error: { code: refusal.code, message: refusal.message }, id: null });
  res.statusCode = refusal.status;
  res.setHeader('Content-Type', 'application/json');
  res.setHeader('Content-Length', Buffer.byteLength(body));
  res.setHeader('Cache-Control', 'no-store');
  for (const [name, value] of Object.entries(refusal.headers ?? {})) res.setHeader(name, value);
  if (bodyPending) {
    res.setHeader('Connection', 'close');
    res.once('finish', () => req.socket.destroy());
  }
  res.end(body);
}

/** Sends MCP's answer: a JSON body, or none (202). */
export function answer(res: ServerResponse, status: 200 | 202, json?: string): void {
  if (res.headersSent || res.destroyed) return;
  // Raw header pairs: Node then builds no header map for the response.
  const length = String(json === undefined ? 0 : Buffer.byteLength(json));
  const headers =
    json === undefined
      ? ['Cache-Control', 'no-store', 'Content-Length', length]
      : ['Content-Type', 'application/json', 'Cache-Control', 'no-store', 'Content-Length', length];
  res.writeHead(status, headers);
  res.end(json);
}
