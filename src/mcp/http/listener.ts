/**
 * The HTTP listener: binds 127.0.0.1 only, sets the connection timeouts,
 * and feeds every request through the guarded pipeline. There is no
 * unauthenticated mode: a token is required to construct it.
 */
import { createServer, type Server as NodeHttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Server as McpServer } from '@modelcontextprotocol/sdk/server/index.js';
import { bearerAuth } from './auth.js';
import { createPipeline, MCP_PATH, type HttpLog, type PipelineLimits } from './pipeline.js';
import { hostAllowlist } from './host-allowlist.js';
import { IdleServers } from './idle-servers.js';
import { createMcpServer } from '../server.js';
import type { ToolContext } from '../tools.js';

export type { HttpLog } from './pipeline.js';

/** Loopback only: remote callers come through the approved HTTPS proxy. */
export const HTTP_HOST = '127.0.0.1';

export interface HttpLimits extends PipelineLimits {
  /** Node's own cap on receiving the request headers (slow-header clients). */
  headersTimeoutMs: number;
  /** Node's own cap on receiving a whole request. */
  requestTimeoutMs: number;
}

export const DEFAULT_HTTP_LIMITS: HttpLimits = {
  maxBodyBytes: 1024 * 1024,
  bodyTimeoutMs: 10_000,
  headersTimeoutMs: 10_000,
  // Tool waits are capped at 60 s; every deadline below leaves room for that.
  requestTimeoutMs: 120_000,
  responseTimeoutMs: 90_000,
};

export interface HttpListenerOptions {
  ctx: ToolContext;
  log: HttpLog;
  /** The bearer token (see config/token.ts); required, there is no open mode. */
  token: string;
  /** 0 picks a free port (tests); the bound one is logged and returned. */
  port: number;
  publicUrl?: string;
  limits?: Partial<HttpLimits>;
  /** Builds the MCP servers lent to exchanges (idle-servers.ts); a seam for tests that inject failures. */
  newServer?: (ctx: ToolContext, log: HttpLog) => McpServer;
}

export interface HttpListener {
  readonly port: number;
  /** http://127.0.0.1:<port>/mcp */
  readonly url: string;
  /** Stops accepting, lets in-flight requests finish for up to graceMs, then cuts them. */
  close(graceMs?: number): Promise<void>;
}

export async function startHttpListener(options: HttpListenerOptions): Promise<HttpListener> {
  if (options.token.length === 0) throw new Error('startHttpListener needs a bearer token');
  const limits: HttpLimits = { ...DEFAULT_HTTP_LIMITS, ...options.limits };
  const newServer = options.newServer ?? createMcpServer;
  const makeServer = () => newServer(options.ctx, options.log);
  const authorize = bearerAuth(options.token);

  const server = createServer({
    headersTimeout: limits.headersTimeoutMs,
    requestTimeout: limits.requestTimeoutMs,
    // Node checks both timeouts on this interval; its 30 s default would let them overrun.
    connectionsCheckingInterval: 1_000,
    requireHostHeader: true,
  });
  // Idle sockets never outlive a request's own budget.
  server.setTimeout(limits.requestTimeoutMs + 10_000);

  const port = await listen(server, options.port);
  const url = `http://${HTTP_HOST}:${port}${MCP_PATH}`;
  const handler = createPipeline({
    authorize,
    hosts: hostAllowlist(port, options.publicUrl),
    limits,
    servers: new IdleServers(makeServer),
    endpoint: url,
    log: options.log,
  });
  server.on('request', (req, res) => handler(req, res));
  // Guards run before "100 Continue", so a refused client never sends its body.
  server.on('checkContinue', (req, res) => handler(req, res, true));
  // Without a listener a late socket error (EMFILE on accept, …) would crash the controller.
  server.on('error', (err) => options.log.error({ err }, 'http listener error'));
  options.log.info({ transport: 'http', host: HTTP_HOST, port, path: MCP_PATH }, 'http listener bound');

  return {
    port,
    url,
    close: (graceMs = 5_000) => close(server, graceMs),
  };
}

function listen(server: NodeHttpServer, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host: HTTP_HOST, port, exclusive: true }, () => {
      server.off('error', reject);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

function close(server: NodeHttpServer, graceMs: number): Promise<void> {
  return new Promise((resolve) => {
    const force = setTimeout(() => server.closeAllConnections(), graceMs);
    server.close(() => {
      clearTimeout(force);
      resolve();
    });
    server.closeIdleConnections();
  });
}
