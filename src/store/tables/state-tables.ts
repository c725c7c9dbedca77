/**
 * The in-memory view of the state and its invariants. Every change is checked
 * here before it is written, with the same rules used when loading, so the
 * store can never write a state it would refuse to open.
 *
 * Invariants: a run's session exists; a session's head run exists and belongs
 * to it; a run keeps its session and position; positions are unique within a
 * session; a request key names at most one run.
 */
import { RecordInterner } from './record-interner.js';
import type { RunRecord, SessionRecord } from '../../shared/records.js';
import { RunTable } from './run-table.js';
import type { RunEntry, RunFacts } from '../formats/run-entry.js';

export interface StoreChange {
  sessions?: SessionRecord[];
  runs?: RunRecord[];
}

export interface IndexProblem {
  kind: 'session' | 'run';
  id: string;
  text: string;
}

export class StateTables {
  readonly sessions: Map<string, SessionRecord>;
  /** Runs by id; records of runs kept in the snapshot are read back when asked for (run-table.ts). */
  readonly runs: RunTable;
  /** Runs of each session, ascending by `seq`. */
  readonly #bySession = new Map<string, RunEntry[]>();
  readonly #byKey = new Map<string, RunEntry>();

  /** An empty index. */
  constructor();
  /** Only for `adopt`: takes the maps over without indexing or checking them. */
  constructor(sessions: Map<string, SessionRecord>, runs: RunTable);
  constructor(sessions = new Map<string, SessionRecord>(), runs?: RunTable) {
    this.sessions = sessions;
    this.runs = runs ?? new RunTable(new RecordInterner({ maxStrings: 1024, maxObjects: 256, sessionId: (id) => sessions.get(id)?.id }));
  }

  /**
   * An index over complete state read from disk, taking the maps over (no
   * copies of 100k-entry maps at start-up), or the first invariant the state
   * breaks: the same rules, in the same order, as `problemWith` applied to
   * all of it on an empty index. The records are frozen in place.
   */
  static adopt(sessions: Map<string, SessionRecord>, runs: RunTable): { index: StateTables } | { problem: IndexProblem } {
    const index = new StateTables(sessions, runs);
    for (const s of sessions.values()) deepFreeze(s);
    // A session's runs mostly follow each other: its list is looked up once for all of them.
    let lastSession: string | undefined;
    let list: RunEntry[] = [];
    for (const r of runs.facts()) {
      if (r.record !== undefined) deepFreeze(r.record);
      const problem = (text: string): { problem: IndexProblem } => ({ problem: { kind: 'run', id: r.id, text } });
      if (r.sessionId !== lastSession) {
        if (!sessions.has(r.sessionId)) return problem(`belongs to session ${r.sessionId}, which does not exist`);
        let known = index.#bySession.get(r.sessionId);
        if (known === undefined) {
          known = [];
          index.#bySession.set(r.sessionId, known);
        }
        list = known;
        lastSession = r.sessionId;
      }
      // As #atSeq, then #place: new runs almost always come last.
      const last = list[list.length - 1];
      if (last === undefined || last.seq < r.seq) list.push(r);
      else {
        const i = lowerBound(list, r.seq);
        const slotOwner = list[i];
        if (slotOwner?.seq === r.seq) return problem(`has position ${r.seq} in session ${r.sessionId}, already taken by run ${slotOwner.id}`);
        list.splice(i, 0, r);
      }
      if (r.requestKey !== null) {
        const holder = index.#byKey.get(r.requestKey);
        if (holder !== undefined) return problem(`uses request key ${JSON.stringify(r.requestKey)}, already used by run ${holder.id}`);
        index.#byKey.set(r.requestKey, r);
      }
    }
    for (const s of sessions.values()) {
      const problem = headProblem(s, runs.entry(s.headRunId));
      if (problem) return { problem };
    }
    return { index };
  }

  runsBySession(sessionId: string): RunRecord[] {
    return this.runs.recordsOf(this.#bySession.get(sessionId) ?? []);
  }

  /** The facts of the session's runs in `seq` order (a new array); reads no record. */
  runFactsBySession(sessionId: string): RunFacts[] {
    return [...(this.#bySession.get(sessionId) ?? [])];
  }

  runByRequestKey(key: string): RunRecord | undefined {
    const e = this.#byKey.get(key);
    return e === undefined ? undefined : this.runs.recordOf(e);
  }

  /** The first invariant `change` would break, applied on top of this index. */
  problemWith(sessions: readonly SessionRecord[], runs: readonly RunRecord[]): IndexProblem | undefined {
    const newSessions = new Map<string, SessionRecord>();
    for (const s of sessions) {
      if (newSessions.has(s.id)) return { kind: 'session', id: s.id, text: 'appears twice' };
      newSessions.set(s.id, s);
    }
    const newRuns = new Map<string, RunRecord>();
    for (const r of runs) {
      if (newRuns.has(r.id)) return { kind: 'run', id: r.id, text: 'appears twice' };
      newRuns.set(r.id, r);
    }

    const slots = new Map<string, string>();
    const keys = new Map<string, string>();
    for (const r of runs) {
      const problem = (text: string): IndexProblem => ({ kind: 'run', id: r.id, text });
      if (!newSessions.has(r.sessionId) && !this.sessions.has(r.sessionId)) {
        return problem(`belongs to session ${r.sessionId}, which does not exist`);
      }
      const old = this.runs.entry(r.id);
      if (old && (old.sessionId !== r.sessionId || old.seq !== r.seq)) {
        return problem(`would move from session ${old.sessionId} #${old.seq} to ${r.sessionId} #${r.seq}; a run's place is fixed`);
      }
      const slot = `${r.sessionId}\u0000${r.seq}`;
      const slotOwner = slots.get(slot) ?? this.#atSeq(r.sessionId, r.seq)?.id;
      if (slotOwner !== undefined && slotOwner !== r.id) {
        return problem(`has position ${r.seq} in session ${r.sessionId}, already taken by run ${slotOwner}`);
      }
      slots.set(slot, r.id);
      if (r.requestKey !== null) {
        const inChange = keys.get(r.requestKey);
        const stored = this.#byKey.get(r.requestKey);
        // A stored holder that is itself being changed is checked under its new key instead.
        const holder = inChange ?? (stored && !newRuns.has(stored.id) ? stored.id : undefined);
        if (holder !== undefined && holder !== r.id) {
          return problem(`uses request key ${JSON.stringify(r.requestKey)}, already used by run ${holder}`);
        }
        keys.set(r.requestKey, r.id);
      }
    }

    for (const s of sessions) {
      const problem = headProblem(s, newRuns.get(s.headRunId) ?? this.runs.entry(s.headRunId));
      if (problem) return problem;
    }
    return undefined;
  }

  /**
   * Applies a change already checked by `problemWith`. The records are frozen
   * in place and stored as given, so hand over copies the caller won't reuse.
   */
  apply(sessions: readonly SessionRecord[], runs: readonly RunRecord[]): void {
    for (const s of sessions) this.sessions.set(s.id, deepFreeze(s));
    for (const r of runs) {
      deepFreeze(r);
      const old = this.runs.entry(r.id);
      const e = this.runs.set(r);
      this.#place(e, old !== undefined);
      if (old?.requestKey != null && old.requestKey !== r.requestKey && this.#byKey.get(old.requestKey)?.id === r.id) {
        this.#byKey.delete(old.requestKey);
      }
      if (r.requestKey !== null) this.#byKey.set(r.requestKey, e);
    }
  }

  #atSeq(sessionId: string, seq: number): RunEntry | undefined {
    const list = this.#bySession.get(sessionId);
    if (!list) return undefined;
    const i = lowerBound(list, seq);
    return list[i]?.seq === seq ? list[i] : undefined;
  }

  #place(run: RunEntry, replace: boolean): void {
    let list = this.#bySession.get(run.sessionId);
    if (!list) {
      list = [];
      this.#bySession.set(run.sessionId, list);
    }
    // New runs almost always come last, so appending is the common O(1) path.
    const last = list[list.length - 1];
    if (!replace && (last === undefined || last.seq < run.seq)) {
      list.push(run);
      return;
    }
    const i = lowerBound(list, run.seq);
    if (replace) list[i] = run;
    else list.splice(i, 0, run);
  }
}

/** What is wrong with the session's head run (`head` being what its id names), if anything. */
function headProblem(s: SessionRecord, head: Pick<RunFacts, 'sessionId'> | undefined): IndexProblem | undefined {
  if (!head) return { kind: 'session', id: s.id, text: `has head run ${s.headRunId}, which does not exist` };
  if (head.sessionId !== s.id) {
    return { kind: 'session', id: s.id, text: `has head run ${s.headRunId}, which belongs to session ${head.sessionId}` };
  }
  return undefined;
}

/** First index whose run has `seq` ≥ the given one. */
function lowerBound(list: readonly RunFacts[], seq: number): number {
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (list[mid]!.seq < seq) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** Freezes a plain JSON value in place, so what the index holds cannot be mutated by accident. */
function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    for (const child of Object.values(value)) deepFreeze(child);
    Object.freeze(value);
  }
  return value;
}
