/**
 * A loopback reverse proxy that adds `Authorization: Bearer <token>` to every
 * request, for clients that cannot send headers (the MCP conformance suite).
 * It is transparent otherwise: Host and Origin that name the proxy are
 * rewritten to name the server (as a proxy configured with the server's
 * address does), every other Host or Origin passes unchanged, so the
 * server's own guards still decide. Bodies and answers stream through.
 */
import { createServer, request, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface BearerProxy {
  port: number;
  url: string;
  close(): Promise<void>;
}

/** Host or Origin naming the proxy, renamed to the server; anything else as it came. */
function retarget(value: string | undefined, from: number, to: number, scheme: string): string | undefined {
  if (value === undefined) return undefined;
  for (const name of ['127.0.0.1', 'localhost']) {
    if (value.toLowerCase() === `${scheme}${name}:${from}`) return `${scheme}${name}:${to}`;
  }
  return value;
}

/** Headers of one connection, not of the request: a proxy never forwards them (RFC 9110 7.6.1). */
const HOP_BY_HOP = ['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'trailer', 'upgrade'];
const endToEnd = (headers: IncomingHttpHeaders): IncomingHttpHeaders =>
  Object.fromEntries(Object.entries(headers).filter(([name]) => !HOP_BY_HOP.includes(name)));

export async function startBearerProxy(upstreamPort: number, token: string): Promise<BearerProxy> {
  const server = createServer((req, res) => {
    const port = (server.address() as AddressInfo).port;
    const headers: IncomingHttpHeaders = { ...endToEnd(req.headers), authorization: `Bearer ${token}` };
    headers.host = retarget(req.headers.host, port, upstreamPort, '');
    const origin = retarget(req.headers.origin, port, upstreamPort, 'http://');
    if (origin === undefined) delete headers.origin;
    else headers.origin = origin;
    const upstream = request({ host: '127.0.0.1', port: upstreamPort, method: req.method, path: req.url, headers, timeout: 120_000 }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, endToEnd(answer.headers));
      answer.pipe(res);
    });
    upstream.on('timeout', () => upstream.destroy(new Error('upstream timed out')));
    upstream.on('error', () => {
      // Cut short after the head: the client must see a broken answer, not a complete one.
      if (res.headersSent) res.destroy();
      else res.writeHead(502).end();
    });
    // The client gave up before the answer was complete: so does the request upstream.
    res.on('close', () => {
      if (!res.writableFinished) upstream.destroy();
    });
    req.pipe(upstream);
  });
  server.requestTimeout = 120_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host: '127.0.0.1', port: 0 }, resolve);
  });
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    url: `http://127.0.0.1:${port}/mcp`,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
