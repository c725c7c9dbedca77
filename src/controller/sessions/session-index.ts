/**
 * The sessions find searches (find.ts), kept sorted by creation time, with
 * what the index's owner prepared for each (its summary and the searchable
 * text made from it) so a search asks for no summary twice. Pure.
 */
import type { SessionRecord } from '../../shared/records.js';
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

/** A workspace filter: the folder, and the prefix of every path below it. */
export interface WorkspaceScope {
  dir: string;
  below: string;
}

/**
 * A scope matching more workspaces than this is walked over every session:
 * merging its lists costs a comparison per list at every step.
 */
const MAX_MERGED_WORKSPACES = 16;

/** First position of an ascending list whose key is >= `key`. */
function lowerBound(list: readonly SortKey[], key: SortKey): number {
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (compareKeys(list[mid]!, key) < 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function insertSorted<T extends SortKey>(list: T[], item: T): void {
  const at = lowerBound(list, item);
  if (at === list.length) list.push(item);
  else list.splice(at, 0, item);
}

function removeSorted<T extends SortKey>(list: T[], item: T): void {
  const at = lowerBound(list, item);
  if (list[at] === item) list.splice(at, 1);
}

/**
 * Sessions kept sorted by (createdAt, id), maintained incrementally so find
 * never sorts per call. Stored ascending because new sessions are the newest:
 * an upsert of a new session is then an append, not a shift of the array.
 * Iterates newest first. The same entries are also kept per workspace, in
 * the same order, so a workspace filter walks that workspace's sessions
 * only (at 10,000 sessions in 50 workspaces: 200 instead of 10,000).
 */
export class SessionIndex implements Iterable<SessionRecord> {
  readonly #entries: Entry[] = [];
  readonly #byId = new Map<string, Entry>();
  readonly #byWorkspace = new Map<string, Entry[]>();

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
    for (const entry of this.#entries) this.#workspaceList(entry.session.workspace).push(entry);
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
    if (old && old.ms === ms && old.session.workspace === session.workspace) {
      old.session = session;
      old.summary = undefined;
      old.text = undefined;
      return;
    }
    if (old) {
      removeSorted(this.#entries, old);
      const list = this.#workspaceList(old.session.workspace);
      removeSorted(list, old);
      if (list.length === 0) this.#byWorkspace.delete(old.session.workspace);
    }
    const entry: Entry = { ms, id: session.id, session, summary: undefined, text: undefined };
    this.#byId.set(session.id, entry);
    insertSorted(this.#entries, entry);
    insertSorted(this.#workspaceList(session.workspace), entry);
  }

  #workspaceList(workspace: string): Entry[] {
    let list = this.#byWorkspace.get(workspace);
    if (!list) this.#byWorkspace.set(workspace, (list = []));
    return list;
  }

  /**
   * Visits sessions newest first, starting strictly below `below` when given,
   * until `visit` returns false. With `scope`, only sessions in that
   * workspace or below it (the caller still applies its own filters). A
   * callback rather than a generator: find walks thousands of entries per
   * call and this keeps the loop cheap.
   */
  scanDescending(below: SortKey | undefined, visit: (entry: IndexedSession) => boolean, scope?: WorkspaceScope): void {
    const lists = scope ? this.#listsIn(scope) : null;
    if (lists === null) return scanList(this.#entries, below, visit);
    if (lists.length === 1) return scanList(lists[0]!, below, visit);
    // Several workspaces (a parent folder): their lists merged, newest first.
    const at = lists.map((list) => (below ? lowerBound(list, below) : list.length) - 1);
    for (;;) {
      let best = -1;
      for (let k = 0; k < lists.length; k++) {
        if (at[k]! >= 0 && (best < 0 || compareKeys(lists[k]![at[k]!]!, lists[best]![at[best]!]!) > 0)) best = k;
      }
      if (best < 0 || !visit(lists[best]![at[best]!--]!)) return;
    }
  }

  /** The lists of the workspaces in `scope`; null when there are too many to merge. */
  #listsIn(scope: WorkspaceScope): Entry[][] | null {
    const lists: Entry[][] = [];
    for (const [workspace, list] of this.#byWorkspace) {
      if (workspace !== scope.dir && !workspace.startsWith(scope.below)) continue;
      if (lists.length === MAX_MERGED_WORKSPACES) return null;
      lists.push(list);
    }
    return lists;
  }

  *[Symbol.iterator](): Iterator<SessionRecord> {
    for (let i = this.#entries.length - 1; i >= 0; i--) yield this.#entries[i]!.session;
  }
}

function scanList(list: readonly Entry[], below: SortKey | undefined, visit: (entry: IndexedSession) => boolean): void {
  for (let i = (below ? lowerBound(list, below) : list.length) - 1; i >= 0; i--) {
    if (!visit(list[i]!)) return;
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
