/**
 * The scripted model: what it answers to a conversation droid sends. Pure;
 * model-server.ts serves it. It reads the newest user message that holds
 * either of two kinds of instruction:
 *
 * - a `<<script:{…}>>` marker (script() renders one): the tests' exact
 *   control over text, tool calls, pace, HTTP failures and usage. The prompt
 *   itself says what the "model" does, so tests stay deterministic without
 *   any shared mutable state between test and server.
 * - one of three plain instructions, which a real model follows too, so the
 *   demo and the verification commands use the same prompts against either:
 *
 *     Reply with exactly: TEXT                        → the reply is TEXT
 *     Create the file /ABSOLUTE/PATH containing: TEXT → droid's Create tool, then "Done. The tool said: …"
 *     Write the numbers from 1 to N, one per line     → streamed slowly (NUMBER_MS each)
 *
 * Anything else gets "ok" (the demo's server answers INSTRUCTIONS_HELP instead).
 */

export type ChatMessage = {
  role: string;
  content?: unknown;
  tool_calls?: unknown;
  tool_call_id?: string;
};

type ToolCall = { name: string; arguments: Record<string, unknown> };
type Usage = { prompt_tokens: number; completion_tokens: number };

export type Script = {
  /** Final reply text (default "ok"). With `tool`, also streamed before the tool call. */
  text?: string;
  /** Call this tool once; after its result arrives, reply `tool said: <result>`. */
  tool?: ToolCall;
  /** Call these tools one after another; then reply `tool said: <result 1> | <result 2> | …`. */
  steps?: ToolCall[];
  /** Spread the streamed reply over this many milliseconds. */
  slowMs?: number;
  /**
   * Fail the request with this HTTP status instead of answering. Real droid
   * 0.225.2: 401 ends the turn `model_authentication_failed` at once; 500 is
   * retried with backoff for minutes, so pair it with an interrupt.
   */
  status?: 401 | 500;
  /** Report this usage in a final chunk of every response. */
  usage?: Usage;
  /**
   * What the summarizer answers when droid compacts a session whose newest
   * script carries this (default SCRIPTED_SUMMARY). droid 0.225.2 sends the
   * whole conversation as text in one user message, so the newest script in
   * that message is the newest turn's.
   */
  summary?: string;
};

/** The answer to one request. `text` comes before the tool call of a `tool` plan (often empty). */
export type Plan =
  | { kind: 'status'; status: 401 | 500 }
  | { kind: 'tool'; text: string; tool: ToolCall; slowMs: number; usage: Usage | null }
  | { kind: 'text'; text: string; slowMs: number; usage: Usage | null };

const MARK = '<<script:';
/** Streaming pace of "Write the numbers": slow enough to steer or cancel, short enough to wait for. */
const NUMBER_MS = 40;
/** The longest count it streams. */
const MAX_NUMBERS = 2_000;

/** The demo's answer to a prompt it cannot follow (its `unscripted` reply). */
export const INSTRUCTIONS_HELP =
  'I am the droid-mcp scripted demo model. I understand "Reply with exactly: TEXT", ' +
  '"Create the file /absolute/path containing: TEXT" and "Write the numbers from 1 to N, one per line".';

/** Renders a script so it can be embedded anywhere in a prompt. */
export function script(s: Script): string {
  return `${MARK}${JSON.stringify(s)}>>`;
}

/**
 * Non-repeating filler text for slow streams: droid stops a model whose
 * output repeats exactly (LLMOutputDegenerationError), so `'word '.repeat(n)` fails.
 */
export function prose(words: number, prefix = 'word'): string {
  return Array.from({ length: words }, (_, i) => `${prefix}${i}`).join(' ');
}

/** Text of a message whose content is a string or an array of text parts. */
export function messageText(m: ChatMessage): string {
  if (typeof m.content === 'string') return m.content;
  if (!Array.isArray(m.content)) return '';
  return m.content
    .map((p: unknown) => (typeof p === 'object' && p !== null && typeof (p as { text?: unknown }).text === 'string' ? (p as { text: string }).text : ''))
    .join('');
}

/** Finds the script in `text`; tries each `>>` so a `>>` inside JSON strings is harmless. */
function parseScript(text: string): Script | undefined {
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

/** droid asks the model for a session title after the first turn of an untitled session. */
export function isTitleRequest(messages: readonly ChatMessage[]): boolean {
  const system = messages[0];
  return system?.role === 'system' && messageText(system).includes('generates concise session titles');
}

/**
 * droid asks the model for a summary when it compacts a session
 * (droid.compact_session, or its own threshold): a system prompt holding this
 * sentence (both its first-summary and its incremental variant, found in the
 * 0.225.2 bundle), one user message "Please summarize the following
 * conversation:" (or "Previous summary: …") with the transcript as text, and
 * no tools. Measured: droid rejects an answer without text ("Summarizer model
 * … returned no text (stop reason: tool-calls)").
 */
export function isSummaryRequest(messages: readonly ChatMessage[]): boolean {
  const system = messages[0];
  return system?.role === 'system' && messageText(system).includes('You excel at creating and maintaining summaries');
}

/** The summarizer's default answer; droid keeps what is inside <summary>. */
export const SCRIPTED_SUMMARY = 'Scripted summary of the conversation so far.';

const text = (reply: string, usage: Usage | null = null, slowMs = 0): Plan => ({ kind: 'text', text: reply, slowMs, usage });

function fromScript(found: Script | undefined, toolResults: readonly ChatMessage[]): Plan {
  // A marker that does not parse is a test bug: say so where the test will look.
  if (!found) return text('model-server: unparsable <<script:…>>');
  const usage = found.usage ?? null;
  const slowMs = found.slowMs ?? 0;
  if (found.status) return { kind: 'status', status: found.status };
  const steps = found.steps ?? (found.tool ? [found.tool] : []);
  if (steps.length === 0) return text(found.text ?? 'ok', usage, slowMs);
  if (toolResults.length < steps.length) return { kind: 'tool', text: found.text ?? '', tool: steps[toolResults.length]!, slowMs, usage };
  return text(`tool said: ${toolResults.map(messageText).join(' | ')}`, usage, slowMs);
}

/** A rough token count (4 characters a token), so the plain instructions' usage reports are not all zero. */
function roughUsage(messages: readonly ChatMessage[], completionChars: number): Usage {
  const promptChars = messages.reduce((sum, m) => sum + messageText(m).length, 0);
  return { prompt_tokens: Math.max(1, Math.ceil(promptChars / 4)), completion_tokens: Math.max(1, Math.ceil(completionChars / 4)) };
}

/**
 * droid wraps what the user typed with context (system reminders, file
 * notes); the instruction is the last one in the text.
 */
function instruction(content: string): { kind: 'text'; text: string; slowMs: number } | { kind: 'tool'; tool: ToolCall } | null {
  const exact = /reply with exactly:\s*([^\n]+)/i.exec(content);
  const create = /create the file\s+(\/\S+)\s+containing:\s*([^\n]+)/i.exec(content);
  const count = /write the numbers from 1 to (\d+)/i.exec(content);
  const found = [exact, create, count].filter((m): m is RegExpExecArray => m !== null).sort((a, b) => b.index - a.index)[0];
  if (!found) return null;
  if (found === exact) return { kind: 'text', text: found[1]!.trim(), slowMs: 0 };
  if (found === create) return { kind: 'tool', tool: { name: 'Create', arguments: { file_path: found[1], content: `${found[2]!.trim()}\n` } } };
  const n = Math.min(MAX_NUMBERS, Math.max(1, Number(found[1])));
  return { kind: 'text', text: Array.from({ length: n }, (_, i) => String(i + 1)).join('\n'), slowMs: n * NUMBER_MS };
}

function fromInstruction(found: NonNullable<ReturnType<typeof instruction>>, toolResults: readonly ChatMessage[], messages: readonly ChatMessage[]): Plan {
  if (toolResults.length > 0) {
    const result = messageText(toolResults.at(-1)!).replace(/\s+/g, ' ').trim();
    const reply = `Done. The tool said: ${result.slice(0, 200)}`;
    return text(reply, roughUsage(messages, reply.length));
  }
  if (found.kind === 'text') return text(found.text, roughUsage(messages, found.text.length), found.slowMs);
  return { kind: 'tool', text: '', tool: found.tool, slowMs: 0, usage: roughUsage(messages, JSON.stringify(found.tool.arguments).length) };
}

/** Decides the reply from the conversation droid sent; `unscripted` answers a prompt with no instruction at all. */
export function planReply(messages: readonly ChatMessage[], unscripted = 'ok'): Plan {
  // Title requests carry the user's first message, script and all; they get
  // a plain title and no usage, so scripts describe the turn alone.
  if (isTitleRequest(messages)) return text('Scripted session');
  // Summary requests quote the whole conversation, scripts and all: answer
  // the summary, never the quoted turn's tool calls.
  if (isSummaryRequest(messages)) {
    const quoted = messages
      .filter((m) => m.role === 'user')
      .map(messageText)
      .join('\n');
    return text(`<summary>${parseScript(quoted)?.summary ?? SCRIPTED_SUMMARY}</summary>`);
  }
  // The newest user message holding an instruction: droid may add user-role
  // reminders after the prompt (Spec mode does).
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i]!;
    if (m.role !== 'user') continue;
    const content = messageText(m);
    const toolResults = messages.slice(i + 1).filter((r) => r.role === 'tool');
    if (content.includes(MARK)) return fromScript(parseScript(content), toolResults);
    const found = instruction(content);
    if (found) return fromInstruction(found, toolResults, messages);
  }
  return text(unscripted);
}
