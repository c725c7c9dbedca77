/**
 * Folds the notifications of one turn into its result. The turn ends only on
 * `agent_turn_completed` whose `turnId` is the `messageId` we submitted.
 */
import { textOf, type SessionNotification, type TokenUsage } from './notifications.js';
import { sessionTotal, TurnUsageMeter, type RawUsage } from './turn-usage.js';
import { head, summarize, tail } from '../util/text.js';
import type { ProgressEvent, TranscriptEntry } from './schemas.js';

const FINAL_TEXT_CHARS = 16_000;
const FIELD_CHARS = 4_000;
const MAX_TRANSCRIPT_ENTRIES = 500;
/** Streaming text reaches the controller at most this often. */
const PARTIAL_EVERY_MS = 250;

export type { ProgressEvent, TranscriptEntry };
type ToolSpan = Extract<TranscriptEntry, { kind: 'tool' }>;

export interface TurnEnd {
  reason: string;
  usage: TokenUsage | null;
}

/** An `error` notification of this turn: droid's error class name (e.g. `AuthenticationError`) and its text. */
export interface DroidErrorNote {
  name: string | null;
  text: string;
}

/** How a collector counts the turn's usage (turn-usage.ts). */
export interface UsageOptions {
  /** The session's total when the turn began; null: unknown (no running figure). Default: zeros, a new session. */
  baseline?: RawUsage | null;
  /** The turn's running figure changed. */
  onUsage?(usage: TokenUsage): void;
}

export class TurnCollector {
  readonly transcript: TranscriptEntry[] = [];
  readonly droidErrors: DroidErrorNote[] = [];
  finalText = '';
  partialText = '';
  /** Set when the turn ended: matching notification seen. */
  end: TurnEnd | undefined;
  droppedEntries = 0;
  /** The last object droid sent in a `structured_output` notification during this turn; undefined when none came. */
  structuredOutput: unknown = undefined;
  private readonly spans = new Map<string, ToolSpan>();
  private readonly meter: TurnUsageMeter;
  private readonly onUsage: (usage: TokenUsage) => void;
  private lastPartialAt = 0;
  private resolveEnd!: (end: TurnEnd) => void;
  readonly ended: Promise<TurnEnd>;

  constructor(
    readonly turnId: string,
    private readonly onProgress: (event: ProgressEvent) => void = () => {},
    usage: UsageOptions = {},
  ) {
    this.meter = new TurnUsageMeter(usage.baseline === undefined ? {} : usage.baseline);
    this.onUsage = usage.onUsage ?? (() => {});
    this.ended = new Promise((resolve) => (this.resolveEnd = resolve));
  }

  get usage(): TokenUsage | null {
    return this.end ? this.end.usage : this.meter.current;
  }

  handle(n: SessionNotification): void {
    if (this.end) return;
    switch (n.type) {
      case 'create_message':
        return this.onMessage(n as Extract<SessionNotification, { type: 'create_message' }>);
      case 'assistant_text_delta': {
        const delta = (n as { textDelta?: unknown }).textDelta;
        if (typeof delta !== 'string') return;
        this.partialText = tail(this.partialText + delta, FIELD_CHARS);
        const now = Date.now();
        if (now - this.lastPartialAt >= PARTIAL_EVERY_MS) {
          this.lastPartialAt = now;
          this.onProgress({ kind: 'assistant_partial', text: this.partialText });
        }
        return;
      }
      case 'tool_call':
        return this.onToolCall((n as Extract<SessionNotification, { type: 'tool_call' }>).toolUse);
      case 'tool_result':
        return this.onToolResult(n as Extract<SessionNotification, { type: 'tool_result' }>);
      case 'session_token_usage_changed':
        if (this.meter.observe(sessionTotal(n as { tokenUsage?: unknown; inclusiveTokenUsage?: unknown }))) this.onUsage(this.meter.current!);
        return;
      case 'error': {
        const e = n as Extract<SessionNotification, { type: 'error' }>;
        const message = head([e.error?.name, e.error?.message ?? e.message].filter(Boolean).join(': '), FIELD_CHARS);
        const name = typeof e.error?.name === 'string' && e.error.name !== '' ? head(e.error.name, 200) : null;
        this.droidErrors.push({ name, text: message });
        this.onProgress({ kind: 'droid_error', message });
        return;
      }
      case 'structured_output':
        // Its messageId is the StructuredOutput tool call's id, not our turn id (droid 0.225, measured).
        this.structuredOutput = (n as { structuredOutput?: unknown }).structuredOutput;
        return;
      case 'agent_turn_completed':
        return this.onTurnCompleted(n as Extract<SessionNotification, { type: 'agent_turn_completed' }>);
    }
  }

  /** droid died or the turn was abandoned: close open tool spans with a note. */
  abortOpenSpans(note: string): void {
    for (const span of this.spans.values()) {
      if (span.status !== 'open') continue;
      span.status = 'aborted';
      span.isError = true;
      span.result = head(note, FIELD_CHARS);
    }
  }

  private push(entry: TranscriptEntry): void {
    if (this.transcript.length >= MAX_TRANSCRIPT_ENTRIES) {
      this.droppedEntries++;
      return;
    }
    this.transcript.push(entry);
  }

  private onMessage(n: Extract<SessionNotification, { type: 'create_message' }>): void {
    // Only assistant text is kept: droid also echoes the user's prompt here.
    if (n.message?.role !== 'assistant') return;
    const text = textOf(n.message.content);
    if (text === '') return;
    this.finalText = tail(text, FINAL_TEXT_CHARS);
    this.partialText = '';
    this.push({ kind: 'assistant', text: tail(text, FINAL_TEXT_CHARS) });
    this.onProgress({ kind: 'assistant_text', text: tail(text, FIELD_CHARS) });
  }

  private onToolCall(toolUse: { id?: string; name?: string; input?: unknown } | undefined): void {
    if (!toolUse || typeof toolUse.id !== 'string') return;
    const input = summarize(toolUse.input ?? {}, FIELD_CHARS);
    const existing = this.spans.get(toolUse.id);
    // droid resends tool_call as the input fills in: one span per id.
    if (existing) {
      existing.input = input;
      if (typeof toolUse.name === 'string') existing.name = toolUse.name;
      return;
    }
    const span: ToolSpan = {
      kind: 'tool',
      toolUseId: toolUse.id,
      name: typeof toolUse.name === 'string' ? toolUse.name : 'unknown',
      input,
      status: 'open',
      isError: false,
    };
    this.spans.set(toolUse.id, span);
    this.push(span);
    this.onProgress({ kind: 'tool_started', tool: span.name, input: span.input });
  }

  private onToolResult(n: Extract<SessionNotification, { type: 'tool_result' }>): void {
    if (typeof n.toolUseId !== 'string') return;
    const span = this.spans.get(n.toolUseId);
    if (!span) return;
    span.status = 'done';
    span.isError = n.isError === true;
    span.result = summarize(n.content ?? '', FIELD_CHARS);
    this.onProgress({ kind: 'tool_finished', tool: span.name, isError: span.isError, result: span.result });
  }

  private onTurnCompleted(n: Extract<SessionNotification, { type: 'agent_turn_completed' }>): void {
    const reason = typeof n.reason === 'string' ? n.reason : 'unknown';
    if (n.turnId !== this.turnId) {
      this.onProgress({ kind: 'ignored_turn_end', turnId: head(String(n.turnId), 100), reason });
      return;
    }
    this.abortOpenSpans(`turn ended (${reason}) before the tool reported a result`);
    this.end = { reason, usage: this.meter.final(n) };
    this.resolveEnd(this.end);
  }
}
