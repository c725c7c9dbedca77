// A scripted stand-in for an OpenAI-compatible chat-completions provider.
// droid (BYOK, provider "generic-chat-completion-api") talks to it over
// loopback; the prompt itself says what the "model" does, so tests stay
// deterministic without any shared mutable state between test and server.
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export type ChatMessage = {
  role: string;
  content?: unknown;
  tool_calls?: unknown;
  tool_call_id?: string;
};

export type Script = {
  /** Final reply text (default "ok"). With `tool`, also streamed before the tool call. */
  text?: string;
  /** Call this tool once; after its result arrives, reply `tool said: <result>`. */
  tool?: { name: string; arguments: Record<string, unknown> };
  /** Call these tools one after another; then reply `tool said: <result 1> | <result 2> | …`. */
  steps?: Array<{ name: string; arguments: Record<string, unknown> }>;
  /** Spread the streamed reply over this many milliseconds. */
  slowMs?: number;
  /**
   * Fail the request with this HTTP status instead of answering. Real droid
   * 0.225.2: 401 ends the turn `model_authentication_failed` at once; 500 is
   * retried with backoff for minutes, so pair it with an interrupt.
   */
  status?: 401 | 500;
  /** Report this usage in a final chunk of every response. */
  usage?: { prompt_tokens: number; completion_tokens: number };
};

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

const MARK = '<<script:';
const MAX_BODY = 10 * 1024 * 1024;
const TICK_MS = 50;

/** Renders a script so it can be embedded anywhere in a prompt. */
export function script(s: Script): string {
  return `${MARK}${JSON.stringify(s)}>>`;
}

/** Text of a message whose content is a string or an array of text parts. */
export function messageText(m: ChatMessage): string {
  if (typeof m.content === 'string') return m.content;
  if (!Array.isArray(m.content)) return '';
  return m.content
    .map((p: unknown) =>
      typeof p === 'object' && p !== null && typeof (p as { text?: unknown }).text === 'string'
        ? (p as { text: string }).text
        : '',
    )
    .join('');
}

/** Finds the script in `text`; tries each `>>` so a `>>` inside JSON strings is harmless. */
export function parseScript(text: string): Script | undefined {
  const start = text.lastIndexOf(MARK);
  if (start < 0) return undefined;
  const from = start + MARK.length;
  for (let end = text.indexOf('>>', from); end >= 0; end = text.indexOf('>>', end + 1)) {
    try {
      const v: unknown = JSON.parse(text.slice(from, end));
      if (typeof v === 'object' && v !== null && !Array.isArray(v)) return v as Script;
    } catch {
      // keep looking: this '>>' was inside the JSON
    }
  }
  return undefined;
}

type Plan =
  | { kind: 'status'; status: number; script: Script }
  | { kind: 'tool'; script: Script; tool: NonNullable<Script['tool']> }
  | { kind: 'text'; script: Script; text: string };

/** droid asks the model for a session title after the first turn of an untitled session. */
export function isTitleRequest(messages: ChatMessage[]): boolean {
  const system = messages[0];
  return system?.role === 'system' && messageText(system).includes('generates concise session titles');
}

/** Decides the reply from the conversation droid sent. */
function plan(messages: ChatMessage[]): Plan {
  // Title requests carry the user's first message, script and all; they get
  // a plain title and no usage, so scripts describe the turn alone.
  if (isTitleRequest(messages)) return { kind: 'text', script: {}, text: 'Scripted session' };
  let at = -1;
  let found: Script | undefined;
  for (let i = messages.length - 1; i >= 0 && at < 0; i--) {
    const m = messages[i]!;
    if (m.role !== 'user') continue;
    const text = messageText(m);
    if (!text.includes(MARK)) continue;
    at = i;
    found = parseScript(text);
  }
  // A marker that does not parse is a test bug: say so where the test will look.
  if (at >= 0 && !found) return { kind: 'text', script: {}, text: 'model-server: unparsable <<script:…>>' };
  const s: Script = found ?? {};
  if (s.status) return { kind: 'status', status: s.status, script: s };
  const toolMsgs = messages.slice(at + 1).filter((m) => m.role === 'tool');
  const steps = s.steps ?? (s.tool ? [s.tool] : []);
  if (steps.length > 0 && at >= 0) {
    if (toolMsgs.length < steps.length) return { kind: 'tool', script: s, tool: steps[toolMsgs.length]! };
    return { kind: 'text', script: s, text: `tool said: ${toolMsgs.map(messageText).join(' | ')}` };
  }
  return { kind: 'text', script: s, text: s.text ?? 'ok' };
}

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

async function stream(
  res: http.ServerResponse,
  p: Exclude<Plan, { kind: 'status' }>,
  ids: { chunk: string; call: () => string },
  model: string,
  record: RecordedRequest,
): Promise<void> {
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

  // Sleeps in ticks so a hang-up is noticed within TICK_MS.
  const wait = async (ms: number) => {
    for (const end = Date.now() + ms; !gone && Date.now() < end; ) await sleep(Math.min(TICK_MS, end - Date.now()));
  };
  const slowMs = p.script.slowMs ?? 0;
  const text = p.kind === 'text' ? p.text : (p.script.text ?? '');
  delta({ role: 'assistant', content: '' });
  if (text) {
    const parts = slowMs > 0 ? pieces(text, Math.ceil(slowMs / TICK_MS)) : [text];
    const gap = slowMs > 0 ? slowMs / parts.length : 0;
    for (const part of parts) {
      if (gap) await wait(gap);
      if (gone) return;
      delta({ content: part });
    }
  } else if (slowMs > 0) {
    await wait(slowMs);
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
  const u = p.script.usage;
  if (u) send([], { usage: { ...u, total_tokens: u.prompt_tokens + u.completion_tokens } });
  if (!gone) res.end('data: [DONE]\n\n');
}

/** Non-streaming answer, in case droid ever asks without `stream: true`. */
function completion(p: Exclude<Plan, { kind: 'status' }>, callId: string, model: string): unknown {
  const u = p.script.usage;
  const message =
    p.kind === 'tool'
      ? {
          role: 'assistant',
          content: p.script.text ?? null,
          tool_calls: [{ id: callId, type: 'function', function: { name: p.tool.name, arguments: JSON.stringify(p.tool.arguments) } }],
        }
      : { role: 'assistant', content: p.text };
  return {
    id: 'chatcmpl-sync',
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model,
    choices: [{ index: 0, message, finish_reason: p.kind === 'tool' ? 'tool_calls' : 'stop' }],
    ...(u ? { usage: { ...u, total_tokens: u.prompt_tokens + u.completion_tokens } } : {}),
  };
}

export async function startModelServer(): Promise<ModelServer> {
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
      return sendJson(res, 200, { object: 'list', data: [{ id: 'scripted', object: 'model', created: 0, owned_by: 'test' }] });
    }
    if (req.method !== 'POST' || path !== '/v1/chat/completions') {
      return sendJson(res, 404, { error: { message: `no route ${req.method} ${path}`, type: 'not_found' } });
    }
    if (typeof body !== 'object' || body === null) {
      return sendJson(res, 400, { error: { message: 'body must be JSON', type: 'invalid_request_error' } });
    }
    const p = plan(messages);
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

/**
 * Non-repeating filler text for slow streams: droid stops a model whose
 * output repeats exactly (LLMOutputDegenerationError), so `'word '.repeat(n)` fails.
 */
export function prose(words: number, prefix = 'word'): string {
  return Array.from({ length: words }, (_, i) => `${prefix}${i}`).join(' ');
}
