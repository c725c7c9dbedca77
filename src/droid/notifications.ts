/** Typed views of the `droid.session_notification` payloads we act on. */
import type { NotificationFrame } from './frames.js';
import type { TokenUsage } from './schemas.js';

const SESSION_NOTIFICATION = 'droid.session_notification';

export type { TokenUsage };

export interface ContentBlock {
  type: string;
  text?: string;
  id?: string;
  name?: string;
  input?: unknown;
}

export type SessionNotification =
  | { type: 'create_message'; message: { id?: string; role?: string; content?: ContentBlock[] | string } }
  | { type: 'assistant_text_delta'; messageId?: string; textDelta?: string }
  | { type: 'tool_call'; toolUse: { id?: string; name?: string; input?: unknown } }
  | { type: 'tool_result'; toolUseId?: string; content?: unknown; isError?: boolean }
  | { type: 'agent_turn_completed'; turnId?: string; reason?: string; tokenUsage?: Partial<TokenUsage>; childTokenUsage?: Partial<TokenUsage> }
  | { type: 'error'; message?: string; error?: { name?: string; message?: string } }
  | { type: 'droid_working_state_changed'; newState?: string }
  | { type: string; [key: string]: unknown };

/** Extracts the inner notification, or undefined for other methods/shapes. */
export function sessionNotification(frame: NotificationFrame): SessionNotification | undefined {
  if (frame.method !== SESSION_NOTIFICATION) return undefined;
  const params = frame.params as { notification?: unknown } | undefined;
  const inner = params?.notification;
  if (typeof inner !== 'object' || inner === null || typeof (inner as { type?: unknown }).type !== 'string') {
    return undefined;
  }
  return inner as SessionNotification;
}

function count(value: unknown): number {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 ? value : 0;
}

/**
 * droid reports all zeros when the provider reported nothing; zero is not
 * proof of free work, so such usage becomes `null` ("not reported").
 */
export function normalizeUsage(raw: Partial<TokenUsage> | undefined): TokenUsage | null {
  if (!raw || typeof raw !== 'object') return null;
  const usage: TokenUsage = {
    inputTokens: count(raw.inputTokens),
    outputTokens: count(raw.outputTokens),
    cacheCreationTokens: count(raw.cacheCreationTokens),
    cacheReadTokens: count(raw.cacheReadTokens),
    thinkingTokens: count(raw.thinkingTokens),
    factoryCredits: typeof raw.factoryCredits === 'number' && raw.factoryCredits > 0 ? raw.factoryCredits : null,
  };
  const any =
    usage.inputTokens + usage.outputTokens + usage.cacheCreationTokens + usage.cacheReadTokens + usage.thinkingTokens > 0 || usage.factoryCredits !== null;
  return any ? usage : null;
}

export function textOf(content: ContentBlock[] | string | undefined): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .filter((b) => b?.type === 'text' && typeof b.text === 'string')
    .map((b) => b.text)
    .join('');
}
