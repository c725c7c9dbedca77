/**
 * The paged history of one session: what droid produced, turn by turn, and
 * what the controller noticed about each turn. Pure.
 *
 * Never a user prompt: records and result files never hold one (the turn
 * collector keeps only assistant messages), and nothing here invents text.
 */
import type { ChangeSet } from '../../shared/evidence-types.js';
import type { PermissionRecord, QuestionRecord } from '../../droid/permission-policy.js';
import type { CommitsAhead, RunRecord, RunResultFile, RunState } from '../../shared/records.js';
import type { CheckoutView } from './views.js';
import { LIVE_STATES } from '../../shared/records.js';
import { ControllerError } from '../../shared/public-error.js';

const PAGE_LIMIT_DEFAULT = 25;
const PAGE_LIMIT_MAX = 100;
const HISTORY_CURSOR_VERSION = 1;
/** Cursors are small; anything longer is not one of ours. */
const MAX_CURSOR_CHARS = 1_000;

export interface AssistantTextItem {
  type: 'assistant_text';
  run: string;
  text: string;
}

export interface ToolCallItem {
  type: 'tool_call';
  run: string;
  toolUseId: string;
  tool: string;
  input: string;
  /** `open` only when droid never reported a result and nothing closed the span. */
  status: 'open' | 'done' | 'aborted';
  isError: boolean;
  result: string | null;
}

export type NoticeKind =
  | 'interrupted'
  | 'cancelled'
  | 'permission_declined'
  | 'question_declined'
  | 'failed'
  | 'timed_out'
  | 'unknown'
  // Session powers (issue 40): what a turn did before its prompt, and the runs a rewind undid.
  | 'rewind'
  | 'compacted'
  | 'rewound';

export interface NoticeItem {
  type: 'notice';
  run: string;
  kind: NoticeKind;
  detail: string;
}

/** The latest partial text of a turn still running; replaced by its transcript when it ends. */
export interface PartialTextItem {
  type: 'partial_text';
  run: string;
  text: string;
}

/** The schema-valid structured output of a run that asked for one. */
export interface StructuredOutputItem {
  type: 'structured_output';
  run: string;
  value: Record<string, unknown>;
}

/** The files a run changed (recorded only when known: a git work tree). */
export interface ChangesItem {
  type: 'changes';
  run: string;
  changes: ChangeSet;
}

/** A checkout session's writer turn: its branch's commits ahead of the base. */
export interface CommitsItem {
  type: 'commits';
  run: string;
  commits: CommitsAhead;
}

export type HistoryItem = AssistantTextItem | ToolCallItem | NoticeItem | PartialTextItem | StructuredOutputItem | ChangesItem | CommitsItem;

export interface HistoryPage {
  items: HistoryItem[];
  /** Pass back to get the next page; null when no more items exist now. */
  nextCursor: string | null;
  /** False when some turn that reached droid has no retained transcript. */
  historyAvailable: boolean;
  /** Present only for sessions created with isolation: "worktree": where the work is. */
  checkout?: CheckoutView;
}

export interface HistoryInput {
  sessionId: string;
  /** The session's runs in seq order. */
  runs: readonly RunRecord[];
  results: ReadonlyMap<string, RunResultFile>;
  /** runId → latest partial text of a live run. */
  livePartialText: Pick<ReadonlyMap<string, string>, 'get'>;
  cursor?: string;
  limit?: number;
}

// ── shared paging helpers (also used by find) ─────────────────────────────

/** A page size in 1..PAGE_LIMIT_MAX; default PAGE_LIMIT_DEFAULT. */
export function pageLimit(limit: number | undefined): number {
  if (limit === undefined) return PAGE_LIMIT_DEFAULT;
  if (!Number.isInteger(limit) || limit < 1 || limit > PAGE_LIMIT_MAX) {
    throw new ControllerError(
      'invalid_arguments',
      `limit is a whole number from 1 to ${PAGE_LIMIT_MAX}`,
      `Pass a limit between 1 and ${PAGE_LIMIT_MAX}, or omit it for ${PAGE_LIMIT_DEFAULT}.`,
    );
  }
  return limit;
}

export function encodeCursor(payload: Record<string, unknown>): string {
  return Buffer.from(JSON.stringify(payload), 'utf8').toString('base64url');
}

/** The decoded JSON object, or undefined when `raw` is not a cursor at all. */
export function decodeCursor(raw: unknown): Record<string, unknown> | undefined {
  if (typeof raw !== 'string' || raw === '' || raw.length > MAX_CURSOR_CHARS || !/^[A-Za-z0-9_-]+$/.test(raw)) return undefined;
  try {
    const value: unknown = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8'));
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

export function invalidCursor(message: string, action: string): ControllerError {
  return new ControllerError('invalid_cursor', message, action);
}

// ── items of one run ──────────────────────────────────────────────────────

/** States after which droid was (or may have been) given the prompt. */
const REACHED_DROID: readonly RunState[] = ['succeeded', 'interrupted', 'failed', 'timed_out', 'unknown'];

function reachedDroid(run: RunRecord): boolean {
  return REACHED_DROID.includes(run.state) || (run.state === 'cancelled' && run.startedAt !== null);
}

function resultOf(run: RunRecord, results: ReadonlyMap<string, RunResultFile>): RunResultFile | undefined {
  return run.hasResult ? results.get(run.id) : undefined;
}

function permissionDetail(p: PermissionRecord): string {
  return p.summary === '' ? p.tool : `${p.tool}: ${p.summary}`;
}

function questionDetail(q: QuestionRecord): string {
  const text = q.topic === '' ? q.question : `${q.topic}: ${q.question}`;
  return q.options.length > 0 ? `${text} (options: ${q.options.join(' | ')})` : text;
}

function errorDetail(run: RunRecord, fallback: string): string {
  return run.error ? `${run.error.code}: ${run.error.message}` : fallback;
}

/** The terminal notice of a run, if its state warrants one. */
function outcomeNotice(run: RunRecord): NoticeItem | undefined {
  const notice = (kind: NoticeKind, detail: string): NoticeItem => ({ type: 'notice', run: run.id, kind, detail });
  switch (run.state) {
    case 'interrupted':
      return notice('interrupted', errorDetail(run, `the turn was interrupted before it finished${run.reason ? ` (droid: ${run.reason})` : ''}`));
    case 'cancelled': {
      const reason = run.cancelReason ?? 'cancelled';
      const because = run.error?.message ?? 'the turn was cancelled';
      const predecessor = run.predecessorFailure ? ` (run ${run.predecessorFailure.runId}: ${run.predecessorFailure.state})` : '';
      return notice('cancelled', `${reason}: ${because}${predecessor}`);
    }
    case 'failed':
    case 'timed_out':
    case 'unknown':
      return notice(run.state, errorDetail(run, `the turn ended ${run.state}`));
    default:
      return undefined;
  }
}

/** What a run's session power did before its prompt (issue 40). */
function powerNotices(run: RunRecord): HistoryItem[] {
  const items: HistoryItem[] = [];
  const notice = (kind: NoticeKind, detail: string) => items.push({ type: 'notice', run: run.id, kind, detail });
  if (run.rewind) {
    const r = run.rewind;
    notice(
      'rewind',
      `rewound the session to its state before run ${run.rewindTo ?? '?'}: ${r.restored.length} file(s) put back, ${r.deleted.length} removed` +
        `${r.truncated ? ` (${r.truncated} more not listed)` : ''}${r.failed ? `, ${r.failed} failed` : ''}${r.notRestorable.length ? `, ${r.notRestorable.length} no longer restorable` : ''}`,
    );
  }
  if (run.compaction) {
    const c = run.compaction;
    const context = (stats: typeof c.before) => (stats ? `${stats.used} tokens` : 'unknown');
    notice(
      'compacted',
      `${c.auto ? 'compacted automatically' : 'compacted'} before the prompt: ${c.removedMessages} message(s) summarized; context ${context(c.before)} before, ${context(c.after)} after`,
    );
  }
  return items;
}

/** Every item of one run, in order. Built per run so a page touches only the runs it shows. */
function runItems(run: RunRecord, input: HistoryInput): HistoryItem[] {
  if (run.state === 'queued') return [];
  if (LIVE_STATES.includes(run.state)) {
    // A live run's record holds no outcome yet; only its partial text exists.
    const text = input.livePartialText.get(run.id) ?? '';
    return text === '' ? [] : [{ type: 'partial_text', run: run.id, text }];
  }
  const items: HistoryItem[] = powerNotices(run);
  for (const entry of resultOf(run, input.results)?.transcript ?? []) {
    if (entry.kind === 'assistant') {
      items.push({ type: 'assistant_text', run: run.id, text: entry.text });
    } else {
      items.push({
        type: 'tool_call',
        run: run.id,
        toolUseId: entry.toolUseId,
        tool: entry.name,
        input: entry.input,
        status: entry.status,
        isError: entry.isError,
        result: entry.result ?? null,
      });
    }
  }
  for (const p of run.permissionsDeclined) items.push({ type: 'notice', run: run.id, kind: 'permission_declined', detail: permissionDetail(p) });
  for (const q of run.questions) items.push({ type: 'notice', run: run.id, kind: 'question_declined', detail: questionDetail(q) });
  if (run.structuredOutput) items.push({ type: 'structured_output', run: run.id, value: run.structuredOutput });
  if (run.changes) items.push({ type: 'changes', run: run.id, changes: run.changes });
  if (run.commits) items.push({ type: 'commits', run: run.id, commits: run.commits });
  const outcome = outcomeNotice(run);
  if (outcome) items.push(outcome);
  if (run.rewound)
    items.push({
      type: 'notice',
      run: run.id,
      kind: 'rewound',
      detail: `undone by the rewind of run ${run.rewound.by} at ${run.rewound.at}; kept here as it ran`,
    });
  return items;
}

// ── cursor ────────────────────────────────────────────────────────────────

/**
 * A position is (run seq, item index within that run) rather than an
 * absolute index: later turns only append runs, so a position never shifts.
 */
interface Position {
  seq: number;
  index: number;
}

const CURSOR_ACTION = 'Pass the nextCursor returned by the previous droid_read_session call for this same session, or omit cursor to start from the beginning.';

function decodeHistoryCursor(raw: string, sessionId: string): Position {
  const c = decodeCursor(raw);
  if (!c || c.k !== 'h') throw invalidCursor('cursor is not a droid_read_session cursor', CURSOR_ACTION);
  if (c.v !== HISTORY_CURSOR_VERSION) throw invalidCursor('cursor comes from another version of the controller', CURSOR_ACTION);
  if (c.s !== sessionId) throw invalidCursor('cursor belongs to another session', CURSOR_ACTION);
  const { q: seq, i: index } = c;
  if (typeof seq !== 'number' || !Number.isInteger(seq) || seq < 1 || typeof index !== 'number' || !Number.isInteger(index) || index < 0) {
    throw invalidCursor('cursor is malformed', CURSOR_ACTION);
  }
  return { seq, index };
}

function encodeHistoryCursor(sessionId: string, at: Position): string {
  return encodeCursor({ k: 'h', v: HISTORY_CURSOR_VERSION, s: sessionId, q: at.seq, i: at.index });
}

// ── paging ────────────────────────────────────────────────────────────────

export function pageHistory(input: HistoryInput): HistoryPage {
  const limit = pageLimit(input.limit);
  const { runs } = input;
  const historyAvailable = runs.every((r) => !reachedDroid(r) || resultOf(r, input.results) !== undefined);

  let startRun = 0;
  let startIndex = 0;
  if (input.cursor !== undefined) {
    const at = decodeHistoryCursor(input.cursor, input.sessionId);
    startRun = runs.findIndex((r) => r.seq === at.seq);
    if (startRun < 0) throw invalidCursor('cursor points at a turn this session does not have', CURSOR_ACTION);
    startIndex = at.index;
  }

  const items: HistoryItem[] = [];
  let next: Position | null = null;
  scan: for (let r = startRun; r < runs.length; r++) {
    const run = runs[r]!;
    const all = runItems(run, input);
    const from = r === startRun ? startIndex : 0;
    // `index == length` is the position just past a run whose live partial
    // text has since gone; anything beyond was never issued.
    if (from > all.length) throw invalidCursor('cursor points past the end of its turn', CURSOR_ACTION);
    for (let i = from; i < all.length; i++) {
      // The cursor names the next existing item, so null means nothing more exists now.
      if (items.length === limit) {
        next = { seq: run.seq, index: i };
        break scan;
      }
      items.push(all[i]!);
    }
  }
  return { items, nextCursor: next ? encodeHistoryCursor(input.sessionId, next) : null, historyAvailable };
}
