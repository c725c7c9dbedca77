/**
 * The demo's scripted model: what it answers to a conversation droid sends.
 * Pure. It understands three plain instructions, which a real model follows
 * too, so the demo and the verification scripts use the same prompts against
 * either:
 *
 *   Reply with exactly: TEXT                       → the reply is TEXT
 *   Create the file /ABSOLUTE/PATH containing: TEXT → droid's Create tool, then "Created PATH."
 *   Write the numbers from 1 to N, one per line    → streamed slowly (NUMBER_MS each)
 *
 * Anything else gets a line saying what it understands. The instruction is
 * the newest one in a user message; a tool result after it ends the turn.
 */

export interface ChatMessage {
  role: string;
  content?: unknown;
  tool_calls?: unknown;
}

export type Reply =
  | { kind: 'text'; text: string; /** Spread over this many ms. */ streamMs: number }
  | { kind: 'tool'; name: string; arguments: Record<string, unknown> };

/** Streaming pace of "Write the numbers": slow enough to steer or cancel, short enough to wait for. */
export const NUMBER_MS = 40;
/** The longest count it streams. */
export const MAX_NUMBERS = 2_000;

export const HELP_TEXT =
  'I am the droid-mcp scripted demo model. I understand "Reply with exactly: TEXT", ' +
  '"Create the file /absolute/path containing: TEXT" and "Write the numbers from 1 to N, one per line".';

/** Text of a message whose content is a string or an array of text parts. */
export function messageText(m: ChatMessage): string {
  if (typeof m.content === 'string') return m.content;
  if (!Array.isArray(m.content)) return '';
  return m.content
    .map((part: unknown) =>
      typeof part === 'object' && part !== null && typeof (part as { text?: unknown }).text === 'string' ? (part as { text: string }).text : '',
    )
    .join('');
}

/** droid asks for a session title after an untitled session's first turn. */
export function isTitleRequest(messages: readonly ChatMessage[]): boolean {
  const first = messages[0];
  return first?.role === 'system' && messageText(first).includes('generates concise session titles');
}

/**
 * droid wraps what the user typed with context (system reminders, file
 * notes); the instruction is the last line that holds one.
 */
function instruction(text: string): Reply | null {
  const exact = /reply with exactly:\s*([^\n]+)/i.exec(text);
  const create = /create the file\s+(\/\S+)\s+containing:\s*([^\n]+)/i.exec(text);
  const count = /write the numbers from 1 to (\d+)/i.exec(text);
  const found = [exact, create, count].filter((m): m is RegExpExecArray => m !== null).sort((a, b) => b.index - a.index)[0];
  if (!found) return null;
  if (found === exact) return { kind: 'text', text: found[1]!.trim(), streamMs: 0 };
  if (found === create) return { kind: 'tool', name: 'Create', arguments: { file_path: found[1], content: `${found[2]!.trim()}\n` } };
  const n = Math.min(MAX_NUMBERS, Math.max(1, Number(found[1])));
  return { kind: 'text', text: Array.from({ length: n }, (_, i) => String(i + 1)).join('\n'), streamMs: n * NUMBER_MS };
}

export function planReply(messages: readonly ChatMessage[]): Reply {
  if (isTitleRequest(messages)) return { kind: 'text', text: 'Demo session', streamMs: 0 };
  // The newest user message holding an instruction: droid may add user-role
  // reminders after the prompt (Spec mode does).
  for (let i = messages.length - 1; i >= 0; i--) {
    if (messages[i]!.role !== 'user') continue;
    const reply = instruction(messageText(messages[i]!));
    if (!reply) continue;
    const toolResults = messages.slice(i + 1).filter((m) => m.role === 'tool');
    if (toolResults.length === 0) return reply;
    const result = messageText(toolResults.at(-1)!).replace(/\s+/g, ' ').trim();
    return { kind: 'text', text: `Done. The tool said: ${result.slice(0, 200)}`, streamMs: 0 };
  }
  return { kind: 'text', text: HELP_TEXT, streamMs: 0 };
}

/** A rough token count (4 characters a token), so usage reports are not all zero. */
export function roughTokens(chars: number): number {
  return Math.max(1, Math.ceil(chars / 4));
}
