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
import { join } from 'node:path';
import { writeLinesAtomic } from './atomic.js';
import { nodeStoreFs, type StoreFs } from './fs.js';
import { STATE_VERSION, type RunRecord, type SessionRecord } from './records.js';

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

/** Atomically replaces the snapshot in `dir`; streamed, so its size costs no memory. */
export async function writeSnapshot(
  dir: string,
  seq: number,
  sessions: RecordSet<SessionRecord>,
  runs: RecordSet<RunRecord>,
  fs: StoreFs = nodeStoreFs,
): Promise<void> {
  await writeLinesAtomic(join(dir, STATE_FILE), snapshotLines(seq, sessions, runs), fs);
}

function* snapshotLines(seq: number, sessions: RecordSet<SessionRecord>, runs: RecordSet<RunRecord>): Generator<string> {
  yield JSON.stringify({ version: STATE_VERSION, seq, sessions: sessions.size, runs: runs.size });
  yield* recordLines('session', sessions);
  yield* recordLines('run', runs);
}

function* recordLines(kind: RecordKind, records: RecordSet<SessionRecord | RunRecord>): Generator<string> {
  let count = 0;
  for (const record of records.values()) {
    count++;
    yield JSON.stringify({ [kind]: record });
  }
  // Throwing here abandons the temp file: a header that miscounts would make the snapshot unreadable.
  if (count !== records.size) throw new Error(`snapshot announced ${records.size} ${kind} records but listed ${count}`);
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
