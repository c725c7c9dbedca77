/**
 * A stand-in for Amp's remote MCP endpoint (`https://ampcode.com/mcp?profile=puck`),
 * built with the MCP SDK over stateless Streamable HTTP on 127.0.0.1. It offers
 * the tools the real profile was seen to offer (`puck`, the admin tool
 * `manage_amp`, `find_thread` / `read_thread`) plus one tool nobody has heard of,
 * and logs every HTTP request and every tool call, so tests can prove what
 * reached "Amp" and what never did.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { CallToolRequestSchema, ListToolsRequestSchema, type CallToolResult, type Tool } from '@modelcontextprotocol/sdk/types.js';

export type FakeAmpMode =
  /** Every tool, healthy. */
  | 'ok'
  /** Every request answered HTTP 401, as Amp does without OAuth tokens for the URL. */
  | 'unauthorized'
  /** The profile offers no `puck` tool. */
  | 'no_puck'
  /** Accepts connections and never answers (droid's initialize then waits ~10 s). */
  | 'hang';

export interface FakeAmpOptions {
  mode?: FakeAmpMode;
  /** Tools beyond the usual five (for instance one whose id droid cannot disable). */
  extraTools?: Tool[];
  /** Mark `puck` `readOnlyHint: true` (droid then runs it unasked below `high`). */
  puckReadOnlyHint?: boolean;
  /** How `send` answers: a handle in a JSON text block (default), an error, or a shape without a handle. */
  sendAnswer?: 'handle' | 'error' | 'unknown_format';
}

export interface ToolCallLog {
  tool: string;
  arguments: Record<string, unknown>;
  at: number;
}

export interface HttpLog {
  method: string;
  /** JSON-RPC methods in the body (POST), in order. */
  rpc: string[];
  status: number;
  at: number;
}

export interface FakeAmp {
  /** e.g. http://127.0.0.1:PORT/mcp?profile=puck — an `ampMcp.url` the controller accepts. */
  url: string;
  port: number;
  calls: ToolCallLog[];
  http: HttpLog[];
  /** Handles this server gave out, by conversation. */
  handles: Map<string, string[]>;
  /** `send` calls only. */
  sends(): ToolCallLog[];
  setMode(mode: FakeAmpMode): void;
  close(): Promise<void>;
}

/** The tool every test expects droid to find unknown and deny. */
export const UNKNOWN_TOOL = 'share_thread_publicly';

/**
 * The handle the k-th send (1-based) to a conversation gets. Deterministic, so
 * a scripted model (whose tool arguments are fixed in its prompt) can read the
 * reply to a send it has not made yet.
 */
export function replyHandleFor(conversationID: string, k = 1): string {
  return `rh-${conversationID}-${k}`;
}

const OBJECT = { type: 'object' as const };

function tools(options: FakeAmpOptions, mode: FakeAmpMode): Tool[] {
  const list: Tool[] = [];
  if (mode !== 'no_puck') {
    list.push({
      name: 'puck',
      description: 'Talk to the Amp conversation that delegated this work: send a message, or read the reply to one you sent.',
      inputSchema: {
        ...OBJECT,
        properties: {
          action: { type: 'string', enum: ['send', 'read_reply'] },
          params: {
            ...OBJECT,
            properties: { conversationID: { type: 'string' }, message: { type: 'string' }, replyHandle: { type: 'string' } },
          },
        },
        required: ['action', 'params'],
      },
      ...(options.puckReadOnlyHint ? { annotations: { readOnlyHint: true } } : {}),
    });
  }
  list.push(
    {
      name: 'manage_amp',
      description: 'Administer the Amp account: settings, members, tokens.',
      inputSchema: { ...OBJECT, properties: { command: { type: 'string' } } },
    },
    { name: 'find_thread', description: 'Search every Amp thread of the account.', inputSchema: { ...OBJECT, properties: { query: { type: 'string' } } } },
    { name: 'read_thread', description: 'Read any Amp thread of the account.', inputSchema: { ...OBJECT, properties: { threadID: { type: 'string' } } } },
    {
      name: UNKNOWN_TOOL,
      description: 'A tool Amp added later that nobody reviewed.',
      inputSchema: { ...OBJECT, properties: { threadID: { type: 'string' } } },
    },
    ...(options.extraTools ?? []),
  );
  return list;
}

function text(value: unknown, isError = false): CallToolResult {
  return { content: [{ type: 'text', text: typeof value === 'string' ? value : JSON.stringify(value) }], ...(isError ? { isError: true } : {}) };
}

export async function startFakeAmp(options: FakeAmpOptions = {}): Promise<FakeAmp> {
  let mode: FakeAmpMode = options.mode ?? 'ok';
  const calls: ToolCallLog[] = [];
  const httpLog: HttpLog[] = [];
  const handles = new Map<string, string[]>();
  const replies = new Map<string, string>();

  function answer(name: string, args: Record<string, unknown>): CallToolResult {
    if (name !== 'puck') return text({ ok: true, note: `${name} ran (it never should have)` });
    const params = (typeof args.params === 'object' && args.params !== null ? args.params : {}) as Record<string, unknown>;
    if (args.action === 'send') {
      const conversation = String(params.conversationID ?? '');
      if (options.sendAnswer === 'error') return text('conversation is archived', true);
      const given = handles.get(conversation) ?? [];
      const handle = replyHandleFor(conversation, given.length + 1);
      handles.set(conversation, [...given, handle]);
      replies.set(handle, conversation);
      if (options.sendAnswer === 'unknown_format') return text(`queued; your handle is ${handle}`);
      return text({ status: 'queued', replyHandle: handle });
    }
    if (args.action === 'read_reply') {
      const handle = String(params.replyHandle ?? '');
      if (!replies.has(handle)) return text({ error: 'unknown replyHandle' }, true);
      return text({ status: 'completed', reply: `answer for ${handle}` });
    }
    return text({ error: 'unknown action' }, true);
  }

  function mcpServer(): Server {
    const server = new Server({ name: 'fake-amp', version: '0.0.1' }, { capabilities: { tools: {} } });
    server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: tools(options, mode) }));
    server.setRequestHandler(CallToolRequestSchema, (request) => {
      const args = (request.params.arguments ?? {}) as Record<string, unknown>;
      calls.push({ tool: request.params.name, arguments: args, at: Date.now() });
      return answer(request.params.name, args);
    });
    return server;
  }

  const httpServer = http.createServer((req, res) => {
    void (async () => {
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      const raw = Buffer.concat(chunks).toString('utf8');
      let body: unknown;
      try {
        body = raw ? JSON.parse(raw) : undefined;
      } catch {
        body = undefined;
      }
      const frames = Array.isArray(body) ? body : body ? [body] : [];
      const entry: HttpLog = {
        method: req.method ?? '?',
        rpc: frames.map((f: { method?: unknown }) => String(f?.method ?? 'response')),
        status: 0,
        at: Date.now(),
      };
      httpLog.push(entry);
      res.on('finish', () => (entry.status = res.statusCode));
      if (mode === 'hang') return; // never answered; closeAllConnections ends it
      if (mode === 'unauthorized') {
        res.writeHead(401, { 'content-type': 'application/json', 'www-authenticate': 'Bearer realm="fake-amp"' });
        res.end(JSON.stringify({ error: 'unauthorized' }));
        return;
      }
      if (!(req.url ?? '').startsWith('/mcp')) {
        res.writeHead(404).end();
        return;
      }
      if (req.method !== 'POST') {
        // Stateless: no server-initiated stream.
        res.writeHead(405, { allow: 'POST' }).end();
        return;
      }
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
      const server = mcpServer();
      res.on('close', () => {
        void transport.close();
        void server.close();
      });
      await server.connect(transport);
      await transport.handleRequest(req, res, body);
    })().catch(() => {
      if (!res.headersSent) res.writeHead(500).end();
      else res.destroy();
    });
  });
  await new Promise<void>((resolve, reject) => {
    httpServer.once('error', reject);
    httpServer.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = httpServer.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/mcp?profile=puck`,
    port,
    calls,
    http: httpLog,
    handles,
    sends: () => calls.filter((c) => c.tool === 'puck' && c.arguments.action === 'send'),
    setMode: (m) => (mode = m),
    close: () =>
      new Promise<void>((resolve) => {
        httpServer.closeAllConnections();
        httpServer.close(() => resolve());
      }),
  };
}
