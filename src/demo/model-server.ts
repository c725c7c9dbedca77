/**
 * An OpenAI-compatible chat-completions server on 127.0.0.1 (port 0) that
 * answers with the scripted model of model.ts. droid reaches it as a BYOK
 * custom model (provider "generic-chat-completion-api"), so whole agent loops
 * run offline: real tool calls, real files, real interrupts. The stream
 * format is the one droid was measured to accept (docs/PROTOCOL-NOTES.md).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { messageText, planReply, roughTokens, type ChatMessage, type Reply } from './model.js';

export interface ScriptedModelServer {
  /** e.g. http://127.0.0.1:PORT/v1, for customModels[].baseUrl. */
  baseUrl: string;
  /** Chat requests answered so far (title requests included). */
  requests(): number;
  close(): Promise<void>;
}

const MAX_BODY = 10 * 1024 * 1024;
const TICK_MS = 50;

function sendJson(res: http.ServerResponse, status: number, value: unknown): void {
  const body = JSON.stringify(value);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

async function readBody(req: http.IncomingMessage): Promise<string | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY) return undefined;
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** Splits text into pieces sent TICK_MS apart over `ms`. */
function pieces(text: string, ms: number): string[] {
  const count = Math.max(1, Math.min(text.length, Math.ceil(ms / TICK_MS)));
  const size = Math.ceil(text.length / count);
  const out: string[] = [];
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size));
  return out.length ? out : [''];
}

async function stream(res: http.ServerResponse, reply: Reply, model: string, promptChars: number, ids: { chunk: string; call: string }): Promise<void> {
  let gone = false;
  res.on('close', () => (gone = true));
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
  const created = Math.floor(Date.now() / 1000);
  const send = (choices: unknown[], extra: Record<string, unknown> = {}) => {
    if (!gone) res.write(`data: ${JSON.stringify({ id: ids.chunk, object: 'chat.completion.chunk', created, model, choices, ...extra })}\n\n`);
  };
  const delta = (d: Record<string, unknown>, finish: string | null = null) => send([{ index: 0, delta: d, finish_reason: finish }]);
  delta({ role: 'assistant', content: '' });
  let completionChars = 0;
  if (reply.kind === 'text') {
    const parts = reply.streamMs > 0 ? pieces(reply.text, reply.streamMs) : [reply.text];
    const gap = reply.streamMs > 0 ? reply.streamMs / parts.length : 0;
    for (const part of parts) {
      // Sleeping in ticks notices a hang-up (an interrupt) quickly.
      for (const end = Date.now() + gap; !gone && Date.now() < end; ) await sleep(Math.min(TICK_MS, end - Date.now()));
      if (gone) return;
      delta({ content: part });
    }
    completionChars = reply.text.length;
    delta({}, 'stop');
  } else {
    const args = JSON.stringify(reply.arguments);
    delta({ tool_calls: [{ index: 0, id: ids.call, type: 'function', function: { name: reply.name, arguments: '' } }] });
    delta({ tool_calls: [{ index: 0, function: { arguments: args } }] });
    delta({}, 'tool_calls');
    completionChars = args.length;
  }
  const usage = { prompt_tokens: roughTokens(promptChars), completion_tokens: roughTokens(completionChars) };
  send([], { usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens } });
  if (!gone) res.end('data: [DONE]\n\n');
}

export async function startScriptedModel(): Promise<ScriptedModelServer> {
  let answered = 0;
  let n = 0;
  const server = http.createServer((req, res) => {
    void handle(req, res).catch(() => {
      if (!res.headersSent) sendJson(res, 500, { error: { message: 'scripted model failed', type: 'server_error' } });
      else res.destroy();
    });
  });

  async function handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?')[0];
    const raw = await readBody(req);
    if (raw === undefined) return sendJson(res, 413, { error: { message: 'body too large', type: 'invalid_request_error' } });
    if (req.method === 'GET' && path === '/v1/models') {
      return sendJson(res, 200, { object: 'list', data: [{ id: 'scripted', object: 'model', created: 0, owned_by: 'droid-mcp-demo' }] });
    }
    if (req.method !== 'POST' || path !== '/v1/chat/completions') return sendJson(res, 404, { error: { message: 'no such route', type: 'not_found' } });
    let body: { messages?: unknown; model?: unknown; stream?: unknown };
    try {
      body = JSON.parse(raw) as typeof body;
    } catch {
      return sendJson(res, 400, { error: { message: 'body must be JSON', type: 'invalid_request_error' } });
    }
    const messages = Array.isArray(body.messages) ? (body.messages as ChatMessage[]) : [];
    const reply = planReply(messages);
    const model = typeof body.model === 'string' ? body.model : 'scripted';
    const promptChars = messages.reduce((sum, m) => sum + messageText(m).length, 0);
    answered++;
    n++;
    if (body.stream !== true) {
      const message =
        reply.kind === 'text'
          ? { role: 'assistant', content: reply.text }
          : { role: 'assistant', content: null, tool_calls: [{ id: `call_${n}`, type: 'function', function: { name: reply.name, arguments: JSON.stringify(reply.arguments) } }] };
      return sendJson(res, 200, {
        id: `chatcmpl-${n}`,
        object: 'chat.completion',
        created: Math.floor(Date.now() / 1000),
        model,
        choices: [{ index: 0, message, finish_reason: reply.kind === 'tool' ? 'tool_calls' : 'stop' }],
      });
    }
    await stream(res, reply, model, promptChars, { chunk: `chatcmpl-${n}`, call: `call_${n}` });
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    requests: () => answered,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
