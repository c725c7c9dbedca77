/**
 * Finding sessions: typed filters and a text query over controller records,
 * newest created first, with a keyset cursor. Pure.
 *
 * The text query looks at the title, the labels and the retained output
 * preview only: prompts are never stored, so they can never match.
 */
import { createHash } from 'node:crypto';
import type { SessionRecord } from '../../shared/records.js';
import { ControllerError } from '../../shared/public-error.js';
import { decodeCursor, encodeCursor, invalidCursor, pageLimit } from './history.js';
import { LABEL_PATTERN } from './metadata.js';
import type { AgentState } from './views.js';
import { compareKeys, searchText, SessionIndex, type IndexedSession, type SessionSummary, type SortKey, type WorkspaceScope } from './session-index.js';

export { SessionIndex, type SessionSummary } from './session-index.js';

const FIND_CURSOR_VERSION = 1;

export interface FindFilters {
  /** Case-insensitive substring of the title, a label or the output preview. */
  query?: string;
  state?: AgentState;
  /** Canonical absolute path: that directory and its descendants, by path segments. */
  workspace?: string;
  /** Every one of these labels is required. */
  labels?: string[];
  /** Created at or after this ISO date-time (inclusive). */
  after?: string;
  /** Created before this ISO date-time (exclusive). */
  before?: string;
  /** Default false hides archived sessions; true selects archived ones only. */
  archived?: boolean;
  /** true: sessions where some turn recorded changed files; false: none did (unknown counts as none). */
  hasChanges?: boolean;
  /** Sessions whose turns spent more than this many tokens (a running turn's figure so far included). */
  tokensAbove?: number;
  /** Sessions whose turns spent more than this many Factory credits. */
  creditsAbove?: number;
}

export interface FindPage {
  sessions: SessionRecord[];
  /** Pass back with the same filters for the next page; null when no more match now. */
  nextCursor: string | null;
}

function invalidArguments(message: string, action: string): ControllerError {
  return new ControllerError('invalid_arguments', message, action);
}

// ── instants ──────────────────────────────────────────────────────────────

const ISO_INSTANT = /^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?(Z|[+-]\d{2}:\d{2}))?$/;

/**
 * Milliseconds of an ISO 8601 date (`2030-01-31`, UTC midnight) or date-time
 * with a zone (`…T10:00Z`, `…T10:00:00.5+07:00`). Computed here rather than
 * by Date.parse, which rolls `02-30` over to March and reads zone-less times
 * as local time. Throws `invalid_arguments` naming `field`.
 */
export function parseInstant(value: unknown, field: string): number {
  const bad = () =>
    invalidArguments(
      `${field} is not an ISO date-time`,
      `Pass ${field} like "2030-01-31" or "2030-01-31T09:30:00Z" (a time needs Z or an offset such as +07:00).`,
    );
  if (typeof value !== 'string') throw bad();
  const m = ISO_INSTANT.exec(value);
  if (!m) throw bad();
  const [year, month, day, hour, minute, second] = [m[1], m[2], m[3], m[4], m[5], m[6]].map((x) => (x === undefined ? 0 : Number(x))) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const millis = m[7] === undefined ? 0 : Number(m[7].slice(0, 3).padEnd(3, '0'));
  if (month < 1 || month > 12 || hour > 23 || minute > 59 || second > 59) throw bad();
  const date = new Date(Date.UTC(year, month - 1, day));
  // Years 0..99 would be shifted to 19xx by Date.UTC.
  date.setUTCFullYear(year);
  if (date.getUTCDate() !== day || date.getUTCMonth() !== month - 1) throw bad();
  let offsetMinutes = 0;
  const zone = m[8];
  if (zone !== undefined && zone !== 'Z') {
    const oh = Number(zone.slice(1, 3));
    const om = Number(zone.slice(4, 6));
    if (oh > 23 || om > 59) throw bad();
    offsetMinutes = (zone[0] === '-' ? -1 : 1) * (oh * 60 + om);
  }
  return date.getTime() + ((hour * 60 + minute - offsetMinutes) * 60 + second) * 1000 + millis;
}

/** Validated [after, before) bounds in ms; either may be open. */
export function parseRange(after: unknown, before: unknown): { afterMs: number | null; beforeMs: number | null } {
  const afterMs = after === undefined ? null : parseInstant(after, 'after');
  const beforeMs = before === undefined ? null : parseInstant(before, 'before');
  if (afterMs !== null && beforeMs !== null && afterMs >= beforeMs) {
    throw invalidArguments('after must be earlier than before (after is inclusive, before exclusive)', 'Swap or widen the dates.');
  }
  return { afterMs, beforeMs };
}

// ── filters ───────────────────────────────────────────────────────────────

interface NormalizedFilters {
  query: string | null;
  state: AgentState | null;
  workspace: string | null;
  labels: string[];
  afterMs: number | null;
  beforeMs: number | null;
  archived: boolean;
  hasChanges: boolean | null;
  tokensAbove: number | null;
  creditsAbove: number | null;
}

const STATES: readonly AgentState[] = ['working', 'idle', 'unknown'];

function normalizeFilters(filters: FindFilters): NormalizedFilters {
  const { query, state, workspace, labels, archived, hasChanges } = filters;
  if (hasChanges !== undefined && typeof hasChanges !== 'boolean')
    throw invalidArguments('hasChanges is true or false', 'Pass hasChanges: true or false, or omit it.');
  if (query !== undefined && typeof query !== 'string') throw invalidArguments('query is text', 'Pass query as a string.');
  if (state !== undefined && !STATES.includes(state)) {
    throw invalidArguments('state is working, idle or unknown', 'Pass state as "working", "idle" or "unknown", or omit it.');
  }
  let ws: string | null = null;
  if (workspace !== undefined) {
    if (typeof workspace !== 'string' || !workspace.startsWith('/')) {
      throw invalidArguments('workspace is an absolute path', 'Pass a workspace as shown by droid_list_workspaces or a session status.');
    }
    // Trailing slashes do not change the directory; keep "/" itself.
    ws = workspace.replace(/\/+$/, '') || '/';
  }
  if (labels !== undefined && !Array.isArray(labels)) throw invalidArguments('labels is a list', 'Pass labels as a list of labels.');
  for (const label of labels ?? []) {
    if (typeof label !== 'string' || !LABEL_PATTERN.test(label)) {
      throw invalidArguments(
        `invalid label filter ${JSON.stringify(String(label).slice(0, 60))}`,
        'Labels are lowercase letters, digits and . _ : - (up to 50).',
      );
    }
  }
  if (archived !== undefined && typeof archived !== 'boolean')
    throw invalidArguments('archived is true or false', 'Pass archived: true to list archived sessions only.');
  const { afterMs, beforeMs } = parseRange(filters.after, filters.before);
  const { tokensAbove, creditsAbove } = filters;
  for (const [key, value] of [
    ['tokensAbove', tokensAbove],
    ['creditsAbove', creditsAbove],
  ] as const) {
    if (value !== undefined && !(typeof value === 'number' && Number.isFinite(value) && value >= 0)) {
      throw invalidArguments(`${key} is a number of at least 0`, `Pass ${key} as a number such as 1000, or omit it.`);
    }
  }
  return {
    // Matching ignores case, so "Bug" and "bug" are the same filter (and cursor).
    query: query === undefined || query === '' ? null : query.toLowerCase(),
    state: state ?? null,
    workspace: ws,
    labels: [...new Set(labels ?? [])].sort(),
    afterMs,
    beforeMs,
    archived: archived === true,
    hasChanges: hasChanges ?? null,
    tokensAbove: tokensAbove ?? null,
    creditsAbove: creditsAbove ?? null,
  };
}

/** Binds a cursor to its filters; a hash, so the query text never travels in the cursor. */
function filterHash(f: NormalizedFilters): string {
  // hasChanges only when set, so cursors issued before the filter existed stay valid.
  const spend = f.tokensAbove !== null || f.creditsAbove !== null ? [{ spend: [f.tokensAbove, f.creditsAbove] }] : [];
  const canonical = JSON.stringify([
    f.query,
    f.state,
    f.workspace,
    f.labels,
    f.afterMs,
    f.beforeMs,
    f.archived,
    ...(f.hasChanges !== null ? [f.hasChanges] : []),
    ...spend,
  ]);
  return createHash('sha256').update(canonical).digest('base64url').slice(0, 16);
}

// ── cursor ────────────────────────────────────────────────────────────────

const CURSOR_ACTION = 'Repeat the call with the same filters and the nextCursor it returned, or omit cursor to start from the newest session.';

function decodeFindCursor(raw: string, hash: string): SortKey {
  const c = decodeCursor(raw);
  if (!c || c.k !== 'f') throw invalidCursor('cursor is not a droid_find_sessions cursor', CURSOR_ACTION);
  if (c.v !== FIND_CURSOR_VERSION) throw invalidCursor('cursor comes from another version of the controller', CURSOR_ACTION);
  if (c.f !== hash) throw invalidCursor('cursor was issued for different filters', CURSOR_ACTION);
  const { createdAt, id } = c;
  const ms = typeof createdAt === 'string' ? Date.parse(createdAt) : NaN;
  if (Number.isNaN(ms) || typeof id !== 'string' || id === '') throw invalidCursor('cursor is malformed', CURSOR_ACTION);
  return { ms, id };
}

function encodeFindCursor(hash: string, key: SortKey): string {
  // createdAt is rewritten from ms so the cursor round-trips exactly.
  return encodeCursor({ k: 'f', v: FIND_CURSOR_VERSION, f: hash, createdAt: new Date(key.ms).toISOString(), id: key.id });
}

// ── find ──────────────────────────────────────────────────────────────────

/**
 * One page of matching sessions, newest created first (ties: higher id
 * first). Pass a SessionIndex to avoid sorting on every call; any other
 * iterable is indexed (sorted) first. `view` is called at most once per
 * visited session, and only when `state` or `query` needs it.
 *
 * The returned records include private fields (droidSessionId): project them
 * with the public views before they leave the controller.
 */
export function findSessions(
  sessions: Iterable<SessionRecord>,
  view: (s: SessionRecord) => SessionSummary,
  filters: FindFilters,
  cursor?: string,
  limit?: number,
): FindPage {
  const f = normalizeFilters(filters);
  const size = pageLimit(limit);
  const hash = filterHash(f);
  const from = cursor === undefined ? undefined : decodeFindCursor(cursor, hash);
  const index = sessions instanceof SessionIndex ? sessions : new SessionIndex(sessions);

  // Start below both the cursor and `before`; "" sorts before every id, so
  // (before, "") excludes everything created at `before` itself.
  let below: SortKey | undefined = f.beforeMs === null ? undefined : { ms: f.beforeMs, id: '' };
  if (from && (!below || compareKeys(from, below) < 0)) below = from;

  const query = f.query === null ? null : compileQuery(f.query);
  const workspaceDir: WorkspaceScope | null =
    f.workspace === null ? null : { dir: f.workspace, below: f.workspace.endsWith('/') ? f.workspace : `${f.workspace}/` };
  const page: SessionRecord[] = [];
  let last: SortKey | undefined;
  let more = false;
  index.scanDescending(
    below,
    (entry) => {
      const { ms, session } = entry;
      if (f.afterMs !== null && ms < f.afterMs) return false;
      if (!matches(entry, f, workspaceDir, query, view)) return true;
      // One match beyond the page proves that a next page exists now.
      if (page.length === size) {
        more = true;
        return false;
      }
      page.push(session);
      last = { ms, id: session.id };
      return true;
    },
    workspaceDir ?? undefined,
  );
  return { sessions: page, nextCursor: more ? encodeFindCursor(hash, last!) : null };
}

interface Query {
  /** The query, lowercased. */
  lower: string;
  /** It holds no NUL: it can be looked up in a session's searchable text. */
  plain: boolean;
  /** Case-insensitive substring test of one field (as the searchable text does it). */
  test(text: string): boolean;
}

function compileQuery(lower: string): Query {
  return { lower, plain: !lower.includes('\0'), test: (text) => text.toLowerCase().includes(lower) };
}

/**
 * Cheap record filters first; the summary (which reads runs) only when
 * needed, and the prepared one (with its searchable text) when there is one.
 */
function matches(
  e: IndexedSession,
  f: NormalizedFilters,
  workspace: WorkspaceScope | null,
  query: Query | null,
  view: (s: SessionRecord) => SessionSummary,
): boolean {
  const s = e.session;
  if (s.archived !== f.archived) return false;
  // As isAtOrBelow, without making the prefix once per session.
  if (workspace !== null && s.workspace !== workspace.dir && !s.workspace.startsWith(workspace.below)) return false;
  for (const label of f.labels) if (!s.labels.includes(label)) return false;
  let summary = e.summary;
  if (f.state !== null) {
    summary ??= view(s);
    if (summary.agentState !== f.state) return false;
  }
  if (f.hasChanges !== null) {
    summary ??= view(s);
    if ((summary.hasChanges ?? false) !== f.hasChanges) return false;
  }
  if (f.tokensAbove !== null || f.creditsAbove !== null) {
    summary ??= view(s);
    const spend = summary.spend ?? { tokens: 0, credits: 0 };
    if (f.tokensAbove !== null && !(spend.tokens > f.tokensAbove)) return false;
    if (f.creditsAbove !== null && !(spend.credits > f.creditsAbove)) return false;
  }
  if (query === null) return true;
  if (e.summary !== undefined && query.plain) return (e.text ??= searchText(s, e.summary.preview)).includes(query.lower);
  if (s.title !== null && query.test(s.title)) return true;
  if (s.labels.some((label) => query.test(label))) return true;
  summary ??= view(s);
  return query.test(summary.preview);
}
