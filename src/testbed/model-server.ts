/**
 * A stand-in for an OpenAI-compatible chat-completions provider on
 * 127.0.0.1 (port 0), answering with the scripted model (scripted-model.ts).
 * droid reaches it as a BYOK custom model (provider
 * "generic-chat-completion-api"), so whole agent loops run offline: real tool
 * calls, real files, real interrupts. The stream format is the one droid was
 * measured to accept (docs/PROTOCOL-NOTES.md).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { isTitleRequest, planReply, type ChatMessage, type Plan } from './scripted-model.js';

export type RecordedRequest = {
  method: string;
  path: string;
  body: unknown;
  messages: ChatMessage[];
  at: number;
  /** Set once the client hung up before the streamed reply was complete. */
  disconnected?: boolean;
};

export type ModelServer = {
  /** e.g. http://127.0.0.1:PORT/v1 — what goes into customModels[].baseUrl. */
  baseUrl: string;
  /** Every request except droid's session-title requests, in arrival order. */
  requests: RecordedRequest[];
  /** droid's own title requests (first turn of an untitled session), kept apart so tests count turns only. */
  titleRequests: RecordedRequest[];
  close(): Promise<void>;
};

type Answer = Exclude<Plan, { kind: 'status' }>;

const MAX_BODY = 10 * 1024 * 1024;
const TICK_MS = 50;

function readBody(req: http.IncomingMessage): Promise<string | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY) {
        resolve(undefined); // caller answers 413; stop buffering
        req.removeAllListeners('data');
        req.resume();
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function sendJson(res: http.ServerResponse, status: number, value: unknown): void {
  const body = JSON.stringify(value);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

function errorBody(status: number): unknown {
  const type = status === 401 ? 'authentication_error' : 'server_error';
  const message = status === 401 ? 'Incorrect API key provided (scripted)' : 'Internal server error (scripted)';
  return { error: { message, type, code: type, param: null } };
}

/** Splits text into at most `n` non-empty pieces of near-equal length. */
function pieces(text: string, n: number): string[] {
  const count = Math.max(1, Math.min(n, text.length));
  const size = Math.ceil(text.length / count);
  const out: string[] = [];
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size));
  return out.length ? out : [''];
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

function withTotal(u: NonNullable<Answer['usage']>): Record<string, number> {
  return { ...u, total_tokens: u.prompt_tokens + u.completion_tokens };
}

async function stream(res: http.ServerResponse, p: Answer, ids: { chunk: string; call: () => string }, model: string, record: RecordedRequest): Promise<void> {
  let gone = false;
  res.on('close', () => {
    gone = true; // client hung up (or we finished): stop writing
    if (!res.writableFinished) record.disconnected = true;
  });
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
  const created = Math.floor(Date.now() / 1000);
  const send = (choices: unknown[], extra: Record<string, unknown> = {}) => {
    if (gone) return;
    res.write(`data: ${JSON.stringify({ id: ids.chunk, object: 'chat.completion.chunk', created, model, choices, ...extra })}\n\n`);
  };
  const delta = (d: Record<string, unknown>, finish: string | null = null) => send([{ index: 0, delta: d, finish_reason: finish }]);

  // Sleeps in ticks so a hang-up (an interrupt) is noticed within TICK_MS.
  const wait = async (ms: number) => {
    for (const end = Date.now() + ms; !gone && Date.now() < end;) await sleep(Math.min(TICK_MS, end - Date.now()));
  };
  delta({ role: 'assistant', content: '' });
  if (p.text) {
    const parts = p.slowMs > 0 ? pieces(p.text, Math.ceil(p.slowMs / TICK_MS)) : [p.text];
    const gap = p.slowMs > 0 ? p.slowMs / parts.length : 0;
    for (const part of parts) {
      if (gap) await wait(gap);
      if (gone) return;
      delta({ content: part });
    }
  } else if (p.slowMs > 0) {
    await wait(p.slowMs);
  }
  if (gone) return;
  if (p.kind === 'tool') {
    const id = ids.call();
    delta({ tool_calls: [{ index: 0, id, type: 'function', function: { name: p.tool.name, arguments: '' } }] });
    delta({ tool_calls: [{ index: 0, function: { arguments: JSON.stringify(p.tool.arguments) } }] });
    delta({}, 'tool_calls');
  } else {
    delta({}, 'stop');
  }
  if (p.usage) send([], { usage: withTotal(p.usage) });
  if (!gone) res.end('data: [DONE]\n\n');
}

/** Non-streaming answer, in case droid ever asks without `stream: true`. */
function completion(p: Answer, callId: string, model: string): unknown {
  const message =
    p.kind === 'tool'
      ? {
          role: 'assistant',
          content: p.text || null,
          tool_calls: [{ id: callId, type: 'function', function: { name: p.tool.name, arguments: JSON.stringify(p.tool.arguments) } }],
        }
      : { role: 'assistant', content: p.text };
  return {
    id: 'chatcmpl-sync',
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model,
    choices: [{ index: 0, message, finish_reason: p.kind === 'tool' ? 'tool_calls' : 'stop' }],
    ...(p.usage ? { usage: withTotal(p.usage) } : {}),
  };
}

/** `unscripted`: the reply to a prompt with neither a script nor a plain instruction (default "ok"). */
export async function startModelServer(options: { unscripted?: string } = {}): Promise<ModelServer> {
  const requests: RecordedRequest[] = [];
  const titleRequests: RecordedRequest[] = [];
  let callN = 0;
  let chunkN = 0;
  const server = http.createServer((req, res) => {
    void handle(req, res).catch(() => {
      if (!res.headersSent) sendJson(res, 500, errorBody(500));
      else res.destroy();
    });
  });

  async function handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?')[0]!;
    const raw = await readBody(req);
    let body: unknown = undefined;
    if (raw) {
      try {
        body = JSON.parse(raw);
      } catch {
        body = raw;
      }
    }
    const msgs = (body as { messages?: unknown } | undefined)?.messages;
    const messages = Array.isArray(msgs) ? (msgs as ChatMessage[]) : [];
    const record: RecordedRequest = { method: req.method ?? 'GET', path, body, messages, at: Date.now() };
    (isTitleRequest(messages) ? titleRequests : requests).push(record);

    if (raw === undefined) return sendJson(res, 413, { error: { message: 'body too large', type: 'invalid_request_error' } });
    if (req.method === 'GET' && path === '/v1/models') {
      return sendJson(res, 200, { object: 'list', data: [{ id: 'scripted', object: 'model', created: 0, owned_by: 'droid-mcp-testbed' }] });
    }
    if (req.method !== 'POST' || path !== '/v1/chat/completions') {
      return sendJson(res, 404, { error: { message: `no route ${req.method} ${path}`, type: 'not_found' } });
    }
    if (typeof body !== 'object' || body === null) {
      return sendJson(res, 400, { error: { message: 'body must be JSON', type: 'invalid_request_error' } });
    }
    const p = planReply(messages, options.unscripted);
    if (p.kind === 'status') return sendJson(res, p.status, errorBody(p.status));
    const model = typeof (body as { model?: unknown }).model === 'string' ? (body as { model: string }).model : 'scripted';
    if ((body as { stream?: unknown }).stream !== true) return sendJson(res, 200, completion(p, `call_${++callN}`, model));
    await stream(res, p, { chunk: `chatcmpl-${++chunkN}`, call: () => `call_${++callN}` }, model, record);
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    requests,
    titleRequests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections(); // streaming responses would otherwise hold close() open
        server.close(() => resolve());
      }),
  };
}
