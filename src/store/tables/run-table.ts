/**
 * The runs the store holds, without holding every run record. A run read
 * from a snapshot whose run index (formats/run-index.ts) matched it is kept
 * as a stub (formats/run-entry.ts): the facts start-up and the bulk reads
 * need (identity, state, usage, whether it changed files, its preview when
 * it is the latest of its session) and where its line is in the snapshot.
 * Its full record is read back from that line the first time someone asks
 * for it, validated exactly as start-up validates records, checked against
 * the stub, and then kept.
 *
 * Reading back uses the snapshot file opened at start-up (or written by the
 * last compaction), kept open while stubs point into it
 * (formats/snapshot-source.ts): a rename over its name does not change what
 * the descriptor reads. Anything that changed the
 * file itself since it was verified is refused (`state_unreadable`), never
 * read as a record.
 *
 * The table is a ReadonlyMap of full records, so callers that want records
 * get them; the bulk paths (usage, find's summaries, crash recovery) iterate
 * `facts()` instead and read no record.
 */
import { isUtf8 } from 'node:buffer';
import { readSync } from 'node:fs';
import type { RecordInterner } from './record-interner.js';
import { isRunRecord } from '../formats/record-guard.js';
import type { RunRecord } from '../../shared/records.js';
import { describeIssue, runRecordSchema } from '../../shared/record-schemas.js';
import { recordOfLine } from '../formats/snapshot.js';
import { RunEntry, type RunFacts } from '../formats/run-entry.js';
import { checkUnchanged, unreadable, type SnapshotSource } from '../formats/snapshot-source.js';

/** The facts of a full record (what the run index stores for it). */
export function factsOf(r: RunRecord): RunFacts {
  return RunEntry.of(r);
}

const NEWLINE = 0x0a;

export class RunTable implements ReadonlyMap<string, RunRecord> {
  readonly #entries = new Map<string, RunEntry>();
  #source: SnapshotSource | undefined;
  #reads = 0;

  /** `pool` makes the kept copies of records read back. */
  constructor(private readonly pool: RecordInterner) {}

  get size(): number {
    return this.#entries.size;
  }

  /** Records read back from the snapshot so far: bulk reads must not add to it. */
  get reads(): number {
    return this.#reads;
  }

  /** The snapshot stubs read from, if any. */
  get source(): SnapshotSource | undefined {
    return this.#source;
  }

  has(id: string): boolean {
    return this.#entries.has(id);
  }

  entry(id: string): RunEntry | undefined {
    return this.#entries.get(id);
  }

  get(id: string): RunRecord | undefined {
    const e = this.#entries.get(id);
    return e === undefined ? undefined : this.recordOf(e);
  }

  /** Every run's facts, in table order (the snapshot's, then runs added since); reads no record. */
  facts(): IterableIterator<RunEntry> {
    return this.#entries.values();
  }

  /** The entry's record, read back from the snapshot the first time. */
  recordOf(e: RunEntry): RunRecord {
    return e.record ?? this.recordsOf([e])[0]!;
  }

  /** The entries' records, in order; the snapshot's state is checked once for all of them. */
  recordsOf(entries: readonly RunEntry[]): RunRecord[] {
    let checked = false;
    return entries.map((e) => {
      if (e.record !== undefined) return e.record;
      const source = this.#source;
      if (source === undefined || e.offset < 0) throw new Error(`internal: run ${e.id} has neither a record nor a snapshot line`);
      if (!checked) {
        checkUnchanged(source, e);
        checked = true;
      }
      e.record = this.#readBack(source, e);
      this.#reads++;
      return e.record;
    });
  }

  /** Adds or replaces a run (keeping its place, as a Map does); returns its entry. */
  set(record: RunRecord, offset = -1, length = 0): RunEntry {
    const e = RunEntry.of(record, offset, length);
    this.#entries.set(record.id, e);
    return e;
  }

  /** Adds a stub: the facts of a run whose record stays in the snapshot until asked for. */
  add(e: RunEntry): void {
    this.#entries.set(e.id, e);
  }

  clear(): void {
    this.#entries.clear();
  }

  /**
   * Makes `source` the snapshot lines are read from; `layout` gives each
   * entry's line in it, in table order (the first at `runsAt`, each line
   * followed by a newline). Returns the previous source, for the caller to close.
   */
  repoint(source: SnapshotSource, layout?: { runsAt: number; lengths: ArrayLike<number> }): SnapshotSource | undefined {
    const old = this.#source;
    if (layout !== undefined) {
      if (layout.lengths.length !== this.#entries.size) throw new Error(`internal: ${layout.lengths.length} line lengths for ${this.#entries.size} runs`);
      let at = layout.runsAt;
      let i = 0;
      for (const e of this.#entries.values()) {
        const length = layout.lengths[i++]!;
        e.offset = at;
        e.length = length;
        at += length + 1;
      }
    }
    this.#source = source;
    return old;
  }

  /** Closes the snapshot file; stubs can no longer be read after this. */
  async close(): Promise<void> {
    const source = this.#source;
    this.#source = undefined;
    await source?.handle.close();
  }

  // ---- ReadonlyMap of records: each of these reads every record not read yet ----

  forEach(visit: (value: RunRecord, key: string, map: ReadonlyMap<string, RunRecord>) => void): void {
    for (const [id, r] of this.entries()) visit(r, id, this);
  }

  keys(): MapIterator<string> {
    return this.#entries.keys();
  }

  *values(): MapIterator<RunRecord> {
    for (const e of this.#entries.values()) yield this.recordOf(e);
  }

  *entries(): MapIterator<[string, RunRecord]> {
    for (const e of this.#entries.values()) yield [e.id, this.recordOf(e)];
  }

  [Symbol.iterator](): MapIterator<[string, RunRecord]> {
    return this.entries();
  }

  #readBack(source: SnapshotSource, e: RunEntry): RunRecord {
    const bytes = Buffer.allocUnsafe(e.length + 1);
    let read = 0;
    try {
      while (read < bytes.length) {
        const n = readSync(source.handle.fd, bytes, read, bytes.length - read, e.offset + read);
        if (n === 0) break;
        read += n;
      }
    } catch (err) {
      throw unreadable(source, e, `reading it failed (${err instanceof Error ? err.message : String(err)})`);
    }
    if (read !== bytes.length || bytes[e.length] !== NEWLINE) throw unreadable(source, e, 'the line is not where the run index put it');
    const line = bytes.subarray(0, e.length);
    if (!isUtf8(line)) throw unreadable(source, e, 'the line is not valid UTF-8');
    let value: unknown;
    try {
      value = JSON.parse(line.toString('utf8'));
    } catch (err) {
      throw unreadable(source, e, `the line is not valid JSON (${err instanceof Error ? err.message : String(err)})`);
    }
    const candidate = recordOfLine(value, 'run');
    let valid: RunRecord;
    if (isRunRecord(candidate)) valid = candidate;
    else {
      const parsed = runRecordSchema.safeParse(candidate);
      if (!parsed.success) throw unreadable(source, e, `the line is not a valid run record (${describeIssue(parsed.error)})`);
      valid = parsed.data;
    }
    const record = this.pool.run(valid);
    const differs = differingFact(RunEntry.of(record), e);
    if (differs !== undefined) throw unreadable(source, e, `its ${differs} differs from the run index`);
    return record;
  }
}

/** The first fact in which `a` and `b` differ (a held preview only when both hold one). */
export function differingFact(a: RunFacts, b: RunFacts): string | undefined {
  if (a.id !== b.id) return 'id';
  if (a.sessionId !== b.sessionId) return 'sessionId';
  if (a.seq !== b.seq) return 'seq';
  if (a.requestKey !== b.requestKey) return 'requestKey';
  if (a.state !== b.state) return 'state';
  if (a.started !== b.started) return 'startedAt';
  if (!Object.is(a.acceptedMs, b.acceptedMs)) return 'acceptedAt';
  if (a.hasChanges !== b.hasChanges) return 'changes';
  if (a.usageLive !== b.usageLive) return 'usageLive';
  if ((a.preview === '') !== (b.preview === '')) return 'preview';
  if (a.preview !== undefined && b.preview !== undefined && a.preview !== b.preview) return 'preview';
  const u = a.usage;
  const v = b.usage;
  if (u === null || v === null) return u === v ? undefined : 'usage';
  const same =
    u.inputTokens === v.inputTokens &&
    u.outputTokens === v.outputTokens &&
    u.cacheCreationTokens === v.cacheCreationTokens &&
    u.cacheReadTokens === v.cacheReadTokens &&
    u.thinkingTokens === v.thinkingTokens &&
    u.factoryCredits === v.factoryCredits;
  return same ? undefined : 'usage';
}
