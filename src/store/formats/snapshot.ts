/**
 * The snapshot file `state.jsonl`, in JSON Lines:
 *
 *   {"version":1,"seq":N,"sessions":S,"runs":R}   header: state version, last commit folded in, record counts
 *   {"session":{…}}                               S lines, one SessionRecord each
 *   {"run":{…}}                                   R lines, one RunRecord each
 *
 * One record per line lets the snapshot be written and read a line at a
 * time, so neither ever holds the whole state as one string or one parsed
 * document. The counts make a truncated file detectable even when it was cut
 * exactly at a line end. The file is replaced atomically, like every file of
 * the store.
 */
import { createHash } from 'node:crypto';
import { readSync } from 'node:fs';
import { join } from 'node:path';
import { writeChunksAtomic } from './atomic.js';
import { nodeStoreFs, type StoreFs } from './fs.js';
import { STATE_VERSION, type RunRecord, type SessionRecord } from '../../shared/records.js';
import { INDEX_FILE, writeRunIndex, type SnapshotDigest } from './run-index.js';
import type { Log } from '../../util/logger.js';
import { RunEntry } from './run-entry.js';
import { checkUnchanged, type SnapshotSource } from './snapshot-source.js';

export const STATE_FILE = 'state.jsonl';
/** The single-document snapshot of pre-release builds; refused, never read. */
export const LEGACY_STATE_FILE = 'state.json';
/** A header is well under this; a longer first line is refused without reading it whole. */
export const HEADER_MAX_BYTES = 4096;

export type RecordKind = 'session' | 'run';

/** What a snapshot is written from: a Map of records, or anything that counts and lists them alike. */
export interface RecordSet<T> {
  readonly size: number;
  values(): Iterable<T>;
}

/** A snapshot as written: what binds an index to it, and where each run's line is. */
export interface SnapshotWritten {
  digest: SnapshotDigest;
  /** Bytes of each run's line (without its newline), in order; the first starts at `digest.runsAt`. */
  lengths: number[];
}

/** Bytes gathered before one write to disk. */
const CHUNK_BYTES = 1 << 20;

/**
 * Atomically replaces the snapshot in `dir`, then writes its run index
 * (run-index.ts); streamed, so its size costs no memory. The store writes
 * the two separately (`writeSnapshotFile`, `writeSnapshotIndex`), because
 * for it a failed index is only logged.
 */
export async function writeSnapshot(
  dir: string,
  seq: number,
  sessions: RecordSet<SessionRecord>,
  runs: RecordSet<RunRecord> | RunList,
  fs: StoreFs = nodeStoreFs,
): Promise<SnapshotWritten> {
  const entries = isRunList(runs) ? runs : entriesOf(runs);
  const written = await writeSnapshotFile(dir, seq, sessions, entries, fs);
  await writeSnapshotIndex(dir, written, sessions, entries, fs);
  return written;
}

/**
 * Atomically replaces the snapshot in `dir`. The lines of runs still in the
 * table's snapshot (unchanged since it was written) are copied byte for byte
 * from it, without parsing them; every other run is written from its record.
 */
export async function writeSnapshotFile(
  dir: string,
  seq: number,
  sessions: RecordSet<SessionRecord>,
  runs: RunList,
  fs: StoreFs = nodeStoreFs,
): Promise<SnapshotWritten> {
  const out: SnapshotWritten = { digest: { seq, sessions: sessions.size, runs: runs.size, bytes: 0, sha256: '', runsAt: 0 }, lengths: [] };
  const hash = createHash('sha256');
  const chunks = function* (): Generator<Buffer> {
    for (const chunk of snapshotChunks(seq, sessions, runs, out)) {
      hash.update(chunk);
      out.digest.bytes += chunk.length;
      yield chunk;
    }
  };
  await writeChunksAtomic(join(dir, STATE_FILE), chunks(), fs);
  out.digest.sha256 = hash.digest('hex');
  return out;
}

/** Writes the run index of the snapshot just written from `sessions` and `runs`. */
async function writeSnapshotIndex(
  dir: string,
  written: SnapshotWritten,
  sessions: RecordSet<SessionRecord>,
  runs: RunList,
  fs: StoreFs = nodeStoreFs,
): Promise<void> {
  const position = new Map<string, number>();
  for (const s of sessions.values()) position.set(s.id, position.size);
  const lengths = written.lengths;
  const indexed = function* (): Generator<{ facts: RunEntry; length: number }> {
    let i = 0;
    for (const facts of runs.facts()) yield { facts, length: lengths[i++]! };
  };
  await writeRunIndex(
    dir,
    written.digest,
    indexed(),
    (id) => position.get(id) ?? -1,
    (facts) => (runs.recordOf !== undefined ? runs.recordOf(facts as RunEntry).preview : ''),
    fs,
  );
}

/**
 * `writeSnapshotIndex`, for the store: the index is a cache, so a failure is
 * logged, never thrown (the next start-up reads the whole snapshot and
 * writes the index again).
 */
export async function writeIndexOrWarn(
  dir: string,
  written: SnapshotWritten,
  index: { sessions: RecordSet<SessionRecord>; runs: RunList },
  fs: StoreFs,
  logger: Log,
): Promise<void> {
  try {
    await writeSnapshotIndex(dir, written, index.sessions, index.runs, fs);
  } catch (err) {
    logger.warn({ dir, err }, `${join(dir, INDEX_FILE)} not written (a cache: the next start-up reads the whole snapshot instead)`);
  }
}

/**
 * The runs a snapshot is written from, in order: the run table
 * (tables/run-table.ts), or plain records as entries holding them.
 */
export interface RunList {
  readonly size: number;
  facts(): Iterable<RunEntry>;
  /** The snapshot the entries' offsets point into, if any. */
  readonly source: SnapshotSource | undefined;
  /** The record of an entry, read back if need be (the table's); absent: a run whose facts hold no preview is indexed with ''. */
  recordOf?(e: RunEntry): RunRecord;
}

function isRunList(runs: RecordSet<RunRecord> | RunList): runs is RunList {
  return typeof (runs as Partial<RunList>).facts === 'function';
}

function entriesOf(runs: RecordSet<RunRecord>): RunList {
  const list = [...runs.values()].map((r) => RunEntry.of(r));
  return { size: runs.size, facts: () => list, source: undefined };
}

function* snapshotChunks(seq: number, sessions: RecordSet<SessionRecord>, runs: RunList, out: SnapshotWritten): Generator<Buffer> {
  let pending: string[] = [];
  let pendingBytes = 0;
  let written = 0;
  const take = (): Buffer => {
    const bytes = Buffer.from(pending.join(''), 'utf8');
    pending = [];
    pendingBytes = 0;
    written += bytes.length;
    return bytes;
  };
  const line = (text: string): number => {
    const bytes = Buffer.byteLength(text, 'utf8');
    pending.push(text, '\n');
    pendingBytes += bytes + 1;
    return bytes;
  };

  line(JSON.stringify({ version: STATE_VERSION, seq, sessions: sessions.size, runs: runs.size }));
  let count = 0;
  for (const s of sessions.values()) {
    count++;
    line(JSON.stringify({ session: s }));
    if (pendingBytes >= CHUNK_BYTES) yield take();
  }
  // Throwing here abandons the temp file: a header that miscounts would make the snapshot unreadable.
  if (count !== sessions.size) throw new Error(`snapshot announced ${sessions.size} session records but listed ${count}`);
  out.digest.runsAt = written + pendingBytes;

  const source = runs.source;
  if (source !== undefined) checkUnchanged(source);
  /** A range of the source's bytes still to copy: whole run lines, newlines included. */
  let rawFrom = 0;
  let rawTo = 0;
  const copy = (): Buffer => {
    const bytes = readRange(source!, rawFrom, rawTo);
    written += bytes.length;
    rawFrom = rawTo = 0;
    return bytes;
  };
  count = 0;
  for (const e of runs.facts()) {
    count++;
    if (e.offset >= 0) {
      if (source === undefined) throw new Error(`internal: run ${e.id} points into a snapshot the table does not have`);
      out.lengths.push(e.length);
      if (rawTo > rawFrom && rawTo === e.offset && rawTo - rawFrom < CHUNK_BYTES) {
        rawTo = e.offset + e.length + 1;
        continue;
      }
      if (rawTo > rawFrom) yield copy();
      if (pendingBytes > 0) yield take();
      rawFrom = e.offset;
      rawTo = e.offset + e.length + 1;
      continue;
    }
    if (e.record === undefined) throw new Error(`internal: run ${e.id} has neither a record nor a snapshot line`);
    if (rawTo > rawFrom) yield copy();
    out.lengths.push(line(JSON.stringify({ run: e.record })));
    if (pendingBytes >= CHUNK_BYTES) yield take();
  }
  if (rawTo > rawFrom) yield copy();
  if (count !== runs.size) throw new Error(`snapshot announced ${runs.size} run records but listed ${count}`);
  // The copied bytes are what start-up verified only if nothing wrote to the file meanwhile.
  if (source !== undefined) checkUnchanged(source);
  if (pendingBytes > 0) yield take();
}

/** Bytes [from, to) of the source, which must end with a newline. */
function readRange(source: SnapshotSource, from: number, to: number): Buffer {
  const bytes = Buffer.allocUnsafe(to - from);
  let read = 0;
  while (read < bytes.length) {
    const n = readSync(source.handle.fd, bytes, read, bytes.length - read, from + read);
    if (n === 0) throw new Error(`${source.path} ended at byte ${from + read}, before the run lines it should hold`);
    read += n;
  }
  if (bytes[bytes.length - 1] !== 0x0a) throw new Error(`${source.path}: the run lines at bytes ${from}..${to} do not end a line`);
  return bytes;
}

/** The record a snapshot line of `kind` holds, or undefined if the line is not `{"<kind>": …}`. */
export function recordOfLine(value: unknown, kind: RecordKind): unknown {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  let record: unknown;
  let keys = 0;
  for (const key in value) {
    if (!Object.hasOwn(value, key)) continue;
    if (++keys > 1 || key !== kind) return undefined;
    record = (value as Record<string, unknown>)[key];
  }
  return record;
}
