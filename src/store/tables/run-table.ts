/**
 * The runs the store holds, without holding every run record. A run read
 * from a snapshot whose run index (run-index.ts) matched it is kept as a
 * stub: the facts start-up and the bulk reads need (identity, state, usage,
 * whether it changed files, its preview when it is the latest of its
 * session) and where its line is in the snapshot. Its full record is read
 * back from that line the first time someone asks for it, validated exactly
 * as start-up validates records, checked against the stub, and then kept.
 *
 * Reading back uses the snapshot file opened at start-up (or written by the
 * last compaction), kept open while stubs point into it: a rename over its
 * name does not change what the descriptor reads. Anything that changed the
 * file itself since it was verified is refused (`state_unreadable`), never
 * read as a record.
 *
 * The table is a ReadonlyMap of full records, so callers that want records
 * get them; the bulk paths (usage, find's summaries, crash recovery) iterate
 * `facts()` instead and read no record.
 */
import { isUtf8 } from 'node:buffer';
import { fstatSync, readSync, type BigIntStats } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import type { TokenUsage } from '../../shared/records.js';
import { hasChanges } from '../../shared/evidence-types.js';
import { StoreError } from '../errors.js';
import type { RecordInterner } from './record-interner.js';
import { isRunRecord } from '../formats/record-guard.js';
import type { RunRecord, RunState } from '../../shared/records.js';
import { describeIssue, runRecordSchema } from '../../shared/record-schemas.js';
import { recordOfLine } from '../formats/snapshot.js';

/** What bulk reads need of a run, known for every run without its record. */
export interface RunFacts {
  readonly id: string;
  readonly sessionId: string;
  readonly seq: number;
  readonly requestKey: string | null;
  readonly state: RunState;
  /** `startedAt !== null`. */
  readonly started: boolean;
  /** `Date.parse(acceptedAt)`: NaN when it does not parse. */
  readonly acceptedMs: number;
  readonly usage: TokenUsage | null;
  /** Its `changes` are recorded and not empty. */
  readonly hasChanges: boolean;
  /** '' when the run has no preview; the text when held; undefined when it has one that is not held (read the record). */
  readonly preview: string | undefined;
}

/** One run of the table: its facts, where its line is in the snapshot, and its record once read. */
export class RunEntry implements RunFacts {
  constructor(
    readonly id: string,
    readonly sessionId: string,
    readonly seq: number,
    readonly requestKey: string | null,
    readonly state: RunState,
    readonly started: boolean,
    readonly acceptedMs: number,
    /** The usage, or a column of six numbers per run (NaN credits: null) it is made from when asked for, at `usageAt`. */
    private readonly usageData: TokenUsage | null | Float64Array,
    private readonly usageAt: number,
    readonly hasChanges: boolean,
    readonly preview: string | undefined,
    /** Byte offset of the run's line in the snapshot the table reads, or -1: not there (changed or added since). */
    public offset: number,
    /** Bytes of that line, without its newline. */
    public length: number,
    /** The full record, once read (always, for a run not in the snapshot). */
    public record: RunRecord | undefined,
  ) {}

  /** Made on each call for a stub (a 100k-run start-up then allocates no usage objects). */
  get usage(): TokenUsage | null {
    const d = this.usageData;
    if (!(d instanceof Float64Array)) return d;
    const at = this.usageAt;
    const credits = d[at + 5]!;
    return Object.freeze<TokenUsage>({
      inputTokens: d[at]!,
      outputTokens: d[at + 1]!,
      cacheCreationTokens: d[at + 2]!,
      cacheReadTokens: d[at + 3]!,
      thinkingTokens: d[at + 4]!,
      factoryCredits: Number.isNaN(credits) ? null : credits,
    });
  }

  /** The entry of a full record; `offset`/`length` where its line is in the snapshot, if it is. */
  static of(r: RunRecord, offset = -1, length = 0): RunEntry {
    return new RunEntry(
      r.id,
      r.sessionId,
      r.seq,
      r.requestKey,
      r.state,
      r.startedAt !== null,
      Date.parse(r.acceptedAt),
      r.usage,
      0,
      !!r.changes && hasChanges(r.changes),
      r.preview,
      offset,
      length,
      r,
    );
  }
}

/** The facts of a full record (what the run index stores for it). */
export function factsOf(r: RunRecord): RunFacts {
  return RunEntry.of(r);
}

/** The snapshot file stubs point into, and what it was when it was verified. */
export interface SnapshotSource {
  path: string;
  handle: FileHandle;
  /** fstat right after verification: any write to the file since changes its size, mtime or ctime. */
  stat: BigIntStats;
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

/** Refuses to read from a snapshot that was written to since it was verified. */
export function checkUnchanged(source: SnapshotSource, e?: RunEntry): void {
  let now: BigIntStats;
  try {
    now = fstatSync(source.handle.fd, { bigint: true });
  } catch (err) {
    throw unreadable(source, e, `it cannot be checked (${err instanceof Error ? err.message : String(err)})`);
  }
  const was = source.stat;
  if (now.size !== was.size || now.mtimeNs !== was.mtimeNs || now.ctimeNs !== was.ctimeNs || now.ino !== was.ino) {
    throw unreadable(source, e, 'the file was written to after start-up checked it');
  }
}

function unreadable(source: SnapshotSource, e: RunEntry | undefined, why: string): StoreError {
  const what = e === undefined ? `${source.path}` : `${source.path}: run ${e.id} (its line at byte ${e.offset})`;
  return new StoreError(
    'state_unreadable',
    `${what} cannot be read back: ${why}`,
    'Nothing was changed and no record was guessed. Stop every other process writing to the state directory, then restart the controller: start-up checks the whole snapshot and refuses damaged state',
  );
}
