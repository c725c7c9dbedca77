/**
 * In-process fixtures for the HTTP transport tests: a fake tool context that
 * counts every controller call (no droid needed), a log that captures what
 * the listener writes, and a raw HTTP client that sends exactly what it is
 * told (no added Host, no retries).
 */
import { request, type IncomingHttpHeaders } from 'node:http';
import type { SessionController } from '../../src/controller/controller.js';
import { ControllerError } from '../../src/shared/public-error.js';
import { startHttpListener, type HttpListener, type HttpLog } from '../../src/mcp/http/listener.js';
import { createMcpServer } from '../../src/mcp/server.js';
import type { ToolContext } from '../../src/mcp/tools.js';

export const ROOT = '/srv/repos/app';

export interface FakeContext {
  ctx: ToolContext;
  /** Every controller and catalog call, in order. */
  calls: string[];
  /** Reads of any ctx property: only a running tool handler reads the context. */
  reads(): number;
  /** Makes later calls of a controller method behave as given. */
  override(method: string, impl: (...args: unknown[]) => unknown): void;
}

/**
 * Every controller method exists on the fake (a Proxy), so tools added later
 * are counted too: by default they refuse with a ControllerError, except
 * capacity(), which droid_list_workspaces needs to succeed.
 */
export function fakeContext(): FakeContext {
  const calls: string[] = [];
  let reads = 0;
  const overrides = new Map<string, (...args: unknown[]) => unknown>([['capacity', () => ({ maximum: 4, active: 0, queued: 0, available: 4 })]]);
  const controller = new Proxy(
    {},
    {
      get: (_target, prop) => {
        // Not a thenable, not a symbol-keyed protocol object.
        if (typeof prop !== 'string' || prop === 'then') return undefined;
        return (...args: unknown[]) => {
          calls.push(prop);
          const impl = overrides.get(prop);
          if (impl) return impl(...args);
          throw new ControllerError('session_not_found', 'no such session in the fake', 'Use a handle from droid_create_session.');
        };
      },
    },
  );
  const base: ToolContext = {
    // The fake has only what the tools call; the class's private state is irrelevant here.
    controller: controller as unknown as SessionController,
    models: async () => {
      calls.push('models');
      return [];
    },
    approvedRoots: [ROOT],
    sandbox: { mode: 'off', available: true, detail: null },
    network: () => ({ mode: 'unconfined', allow: [], alwaysAllowed: [] }),
    policy: { defaultModel: 'model-a', defaultAutonomy: 'medium', maxAutonomy: 'high', reasoningEffort: null },
    runTimeoutMs: 3_600_000,
    replyBack: false,
    worktrees: false,
    droidVersion: async () => {
      calls.push('droidVersion');
      return '0.225.2';
    },
  };
  const ctx = new Proxy(base, {
    get: (target, prop, receiver) => {
      reads++;
      return Reflect.get(target, prop, receiver) as unknown;
    },
  });
  return { ctx, calls, reads: () => reads, override: (method, impl) => overrides.set(method, impl) };
}

export interface LogEntry {
  level: 'info' | 'warn' | 'error';
  obj: object;
  msg: string;
}

export interface CapturedLog extends HttpLog {
  entries: LogEntry[];
  /** Everything logged, serialized (errors with message and stack). */
  text(): string;
}

export function captureLog(): CapturedLog {
  const entries: LogEntry[] = [];
  const serialize = (value: unknown) => JSON.stringify(value, (_k, v: unknown) => (v instanceof Error ? { message: v.message, stack: v.stack } : v));
  return {
    entries,
    info: (obj, msg) => entries.push({ level: 'info', obj, msg }),
    warn: (obj, msg) => entries.push({ level: 'warn', obj, msg }),
    error: (obj, msg) => entries.push({ level: 'error', obj, msg }),
    text: () => entries.map((e) => `${e.level} ${e.msg} ${serialize(e.obj)}`).join('\n'),
  };
}

export interface RawRequest {
  method?: string;
  path?: string;
  headers?: Record<string, string | number>;
  body?: string | Buffer;
  /** Send the Host header from `headers` only (none if absent). */
  noDefaultHost?: boolean;
}

export interface RawResponse {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

/** One request on its own connection; resolves with the response or rejects on a socket error before it. */
export function rawRequest(port: number, spec: RawRequest): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        method: spec.method ?? 'POST',
        path: spec.path ?? '/mcp',
        headers: spec.headers ?? {},
        agent: false,
        setHost: !spec.noDefaultHost,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(spec.body);
  });
}

/** Headers of a well-formed MCP POST. */
export function mcpHeaders(token: string | undefined, port: number, extra: Record<string, string> = {}): Record<string, string> {
  return {
    host: `127.0.0.1:${port}`,
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    ...(token !== undefined && { authorization: `Bearer ${token}` }),
    ...extra,
  };
}

export function rpc(method: string, params: Record<string, unknown> = {}, id: number | string = 1): string {
  return JSON.stringify({ jsonrpc: '2.0', id, method, params });
}

export function toolCall(name: string, args: Record<string, unknown> = {}, id: number | string = 1): string {
  return rpc('tools/call', { name, arguments: args }, id);
}

/** A listener on a free port over the fake context, counting the MCP servers it builds; `close` it after the test. */
export interface CountingListener {
  port: number;
  fake: FakeContext;
  built: () => number;
  listener: HttpListener;
}

export async function startCountingListener(token: string): Promise<CountingListener> {
  const fake = fakeContext();
  let built = 0;
  const listener = await startHttpListener({
    ctx: fake.ctx,
    log: captureLog(),
    token,
    port: 0,
    newServer: (ctx, log) => {
      built++;
      return createMcpServer(ctx, log);
    },
  });
  return { port: listener.port, fake, built: () => built, listener };
}
