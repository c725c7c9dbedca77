/**
 * The sessions find searches (find.ts), kept sorted by creation time, with
 * what the index's owner prepared for each (its summary and the searchable
 * text made from it) so a search asks for no summary twice. Pure.
 */
import type { SessionRecord } from '../shared/records.js';
import type { AgentState } from './views.js';

/** What find needs from a session's runs; computed only when a filter needs it. */
export interface SessionSummary {
  agentState: AgentState;
  preview: string;
  /** Some run of the session recorded a non-empty change set (absent: none did). */
  hasChanges?: boolean;
  /** What the session's turns spent (absent: nothing known). */
  spend?: { tokens: number; credits: number };
}

/** A session's sort key: creation time, then id. */
export interface SortKey {
  ms: number;
  id: string;
}

export interface IndexedSession {
  readonly ms: number;
  readonly session: SessionRecord;
  /** What the index's owner prepared for the session (`SessionIndex.prepare`), until the session or its runs change. */
  readonly summary: SessionSummary | undefined;
  /** The prepared summary's searchable text (`searchText`), made the first time a text query needs it. */
  text: string | undefined;
}

interface Entry extends IndexedSession {
  ms: number;
  readonly id: string;
  session: SessionRecord;
  summary: SessionSummary | undefined;
}

/** Oldest possible time, so a malformed `createdAt` still sorts consistently (as oldest). */
const MIN_MS = -8.64e15;

function createdMs(session: SessionRecord): number {
  const ms = Date.parse(session.createdAt);
  return Number.isNaN(ms) ? MIN_MS : ms;
}

export function compareKeys(a: SortKey, b: SortKey): number {
  if (a.ms !== b.ms) return a.ms < b.ms ? -1 : 1;
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}

/**
 * Sessions kept sorted by (createdAt, id), maintained incrementally so find
 * never sorts per call. Stored ascending because new sessions are the newest:
 * an upsert of a new session is then an append, not a shift of the array.
 * Iterates newest first.
 */
export class SessionIndex implements Iterable<SessionRecord> {
  readonly #entries: Entry[] = [];
  readonly #byId = new Map<string, Entry>();

  constructor(sessions: Iterable<SessionRecord> = []) {
    for (const session of sessions) {
      const old = this.#byId.get(session.id);
      if (old) {
        old.session = session;
        old.ms = createdMs(session);
      } else {
        const entry: Entry = { ms: createdMs(session), id: session.id, session, summary: undefined, text: undefined };
        this.#byId.set(session.id, entry);
        this.#entries.push(entry);
      }
    }
    this.#entries.sort(compareKeys);
  }

  get size(): number {
    return this.#entries.length;
  }

  get(id: string): SessionRecord | undefined {
    return this.#byId.get(id)?.session;
  }

  /** The summary prepared for the session, if it still holds. */
  summaryOf(id: string): SessionSummary | undefined {
    return this.#byId.get(id)?.summary;
  }

  /**
   * Keeps `summary` for the session (of the index) until `forget` or `upsert`
   * of it: its owner must call one of them whenever what the summary says may
   * have changed. find then uses it instead of asking for the view.
   */
  prepare<S extends SessionSummary>(id: string, summary: S): S {
    const entry = this.#byId.get(id);
    if (entry) {
      entry.summary = summary;
      entry.text = undefined;
    }
    return summary;
  }

  /** Makes the searchable text of every prepared session now, so the first text query only searches. */
  prepareText(): void {
    for (const e of this.#entries) if (e.summary) e.text ??= searchText(e.session, e.summary.preview);
  }

  forget(id: string): void {
    const entry = this.#byId.get(id);
    if (entry) {
      entry.summary = undefined;
      entry.text = undefined;
    }
  }

  /** Adds or replaces a session (sessions are never deleted); what was prepared for it is forgotten. */
  upsert(session: SessionRecord): void {
    const ms = createdMs(session);
    const old = this.#byId.get(session.id);
    if (old && old.ms === ms) {
      old.session = session;
      old.summary = undefined;
      old.text = undefined;
      return;
    }
    if (old) this.#entries.splice(this.#lowerBound(old), 1);
    const entry: Entry = { ms, id: session.id, session, summary: undefined, text: undefined };
    this.#byId.set(session.id, entry);
    const at = this.#lowerBound(entry);
    if (at === this.#entries.length) this.#entries.push(entry);
    else this.#entries.splice(at, 0, entry);
  }

  /** First position whose key is >= `key`. */
  #lowerBound(key: SortKey): number {
    let lo = 0;
    let hi = this.#entries.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (compareKeys(this.#entries[mid]!, key) < 0) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /**
   * Visits sessions newest first, starting strictly below `below` when given,
   * until `visit` returns false. A callback rather than a generator: find
   * walks thousands of entries per call and this keeps the loop cheap.
   */
  scanDescending(below: SortKey | undefined, visit: (entry: IndexedSession) => boolean): void {
    const entries = this.#entries;
    for (let i = (below ? this.#lowerBound(below) : entries.length) - 1; i >= 0; i--) {
      if (!visit(entries[i]!)) return;
    }
  }

  *[Symbol.iterator](): Iterator<SessionRecord> {
    for (let i = this.#entries.length - 1; i >= 0; i--) yield this.#entries[i]!.session;
  }
}

/**
 * What a text query searches in a session: its title, its labels and its
 * preview, lowercased, each followed by NUL (so a query without one matches
 * within a field, never across two).
 */
export function searchText(s: SessionRecord, preview: string): string {
  let text = s.title === null ? '\0' : `${s.title.toLowerCase()}\0`;
  for (const label of s.labels) text += `${label.toLowerCase()}\0`;
  return `${text}${preview.toLowerCase()}\0`;
}
