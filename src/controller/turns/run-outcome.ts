/**
 * How a worker's terminal result becomes a run record, and the bounded
 * progress log. Pure.
 */
import type { ProgressEvent } from '../../droid/turn-collector.js';
import type { CommitsAhead, ProgressRecord, RunRecord, RunResultFile, TokenUsage } from '../../shared/records.js';
import type { TurnResult } from '../../worker/contract/protocol.js';
import { head, tail } from '../../util/text.js';
import { hasChanges } from '../../shared/evidence-types.js';
import { judgeStop } from '../../shared/turn-stop.js';

export const MAX_EVENTS = 20;
const EVENT_FIELD_CHARS = 4_000;
const PREVIEW_CHARS = 2_000;

function describe(event: ProgressEvent): string {
  switch (event.kind) {
    case 'assistant_text':
    case 'assistant_partial':
      return event.text;
    case 'tool_started':
      return `${event.tool} ${event.input}`;
    case 'tool_finished':
      return `${event.tool}${event.isError ? ' (error)' : ''}: ${event.result}`;
    case 'droid_error':
      return event.message;
    case 'ignored_turn_end':
      return `ignored end of another turn (${event.reason})`;
  }
}

/** Keeps the last MAX_EVENTS events, each field bounded. */
export function appendEvent(events: ProgressRecord[], event: ProgressEvent, at: string): void {
  events.push({ at, kind: event.kind, detail: head(describe(event), EVENT_FIELD_CHARS) });
  if (events.length > MAX_EVENTS) events.splice(0, events.length - MAX_EVENTS);
}

/** A worker's result as the owner records it: a checkout session's writer turn adds its branch's commits (checkouts.ts). */
export type OwnedResult = TurnResult & { commits?: CommitsAhead | null };

export interface TerminalContext {
  /** Someone asked for this turn to stop (cancel or steering). */
  cancelRequested: boolean;
  events: ProgressRecord[];
  at: string;
  /** The turn's running figure in memory (the worker's last report), null: none. */
  running?: TokenUsage | null;
}

export function terminalUpdate(run: RunRecord, result: OwnedResult, ctx: TerminalContext): RunRecord {
  // The stop decides the outcome (shared/turn-stop.ts); the rest of the result is evidence.
  const { outcome: state, reason, cancelReason, error, attention } = judgeStop(result.stop, ctx.cancelRequested);
  // A read-only turn that changed files is reported loudly: it should have been impossible.
  const readOnlyChanged = run.settings.autonomy === 'off' && !!result.changes && hasChanges(result.changes);
  const needsAttention =
    attention ||
    result.permissionsDeclined.length > 0 ||
    result.questions.length > 0 ||
    readOnlyChanged ||
    // A failed report needs attention; it never changes the run's state.
    (run.reply?.failure ?? null) !== null;
  const events = [...ctx.events];
  if (readOnlyChanged) {
    events.push({
      at: ctx.at,
      kind: 'readonly_turn_changed_files',
      detail: 'this autonomy off (read-only) turn shows changed files in its workspace; see changes',
    });
    if (events.length > MAX_EVENTS) events.splice(0, events.length - MAX_EVENTS);
  }
  // The running figure's mark goes: the terminal figure is droid's final one unless no end came.
  const { usageLive: _running, ...settled } = run;
  // No figure in the result (its worker died and a stand-in result was made): the spend so far
  // still counts, against the session's budget too, so the last running figure stands.
  const usage = result.usage ?? ctx.running ?? run.usage;
  return {
    ...settled,
    state,
    endedAt: ctx.at,
    reason,
    cancelReason,
    error,
    usage,
    preview: tail(result.finalText || result.partialText, PREVIEW_CHARS),
    needsAttention,
    permissionsDeclined: result.permissionsDeclined,
    questions: result.questions,
    events,
    hasResult: true,
    ...(result.structuredOutput !== undefined ? { structuredOutput: result.structuredOutput } : {}),
    ...(result.changes !== undefined ? { changes: result.changes } : {}),
    ...(result.context !== undefined ? { context: result.context } : {}),
    // No agent_turn_completed (droid died, the interrupt went unconfirmed), or no result at all: the figure is the last running one.
    ...(usage !== null && (reason === null || result.usage === null) ? { usageLive: true as const } : {}),
    ...(result.commits !== undefined ? { commits: result.commits } : {}),
    ...(result.egress !== undefined ? { egress: result.egress } : {}),
    ...(result.touched !== undefined ? { touched: result.touched } : {}),
    // The `started` report may not have been recorded: the result says droid had the prompt.
    ...(result.submitted && run.submittedAt === undefined ? { submittedAt: ctx.at } : {}),
  };
}

/** The evidence kept beside the record: transcript and diagnostics, never the prompt. */
export function resultFile(runId: string, result: TurnResult): RunResultFile {
  return {
    runId,
    finalText: result.finalText,
    transcript: result.transcript,
    permissionsApproved: result.permissionsApproved,
    diagnostics: result.diagnostics,
    stderrTail: result.stderrTail,
  };
}
