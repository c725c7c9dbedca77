/**
 * The journal `journal.jsonl`: one line per commit since the snapshot,
 * `{"seq":N,"sessions":[…],"runs":[…]}`, holding the full new version of
 * each changed record. The store appends a line and fdatasyncs it before the
 * commit is acknowledged (atomic.ts `appendDurable`); loading (load.ts) reads
 * it back here, a line at a time; torn-tail.ts drops a torn last line.
 */
import type { FileHandle } from 'node:fs/promises';
import type { RunRecord, SessionRecord } from '../../shared/records.js';
import { describeIssue, journalEntrySchema, runRecordSchema, sessionRecordSchema } from '../../shared/record-schemas.js';
import { forEachLine } from './lines.js';
import { isRunRecord, isSessionRecord } from './record-guard.js';
import { parseJson, validate, type Refuse } from './refusal.js';
import { STATE_FILE } from './snapshot.js';

export const JOURNAL_FILE = 'journal.jsonl';

/**
 * The journal's last line, cut short: the bytes after the journal's last
 * newline, when it does not end with one. A commit is acknowledged only after
 * its whole line, newline included, was written and fdatasynced, so such a
 * line was never acknowledged (a crash or kill in the middle of its write)
 * and dropping it loses nothing anyone was told was stored. Anything else that
 * does not read back is corruption and refuses start-up, including a last line
 * that does end with a newline but does not parse: its write completed, so
 * something other than a cut-short append damaged it.
 */
export interface TornTail {
  /** Byte offset where the torn line starts (the journal's length after the last newline). */
  offset: number;
  /** Its length in bytes. */
  bytes: number;
  /** Its line number. */
  line: number;
}

/** One commit read back, its records validated. */
export interface JournalCommit {
  seq: number;
  sessions: SessionRecord[];
  runs: RunRecord[];
}

export interface JournalRead {
  /** Complete lines, applied or not. */
  lines: number;
  /** Bytes of those lines: where the next commit goes once a torn tail is dropped. */
  completeBytes: number;
  /** The journal ends in a torn line, which was not read. */
  tornTail: TornTail | undefined;
}

/**
 * Reads the journal open as `file` at `path`, refusing any line that is not
 * a journal entry of valid records, seqs that are not gapless, or a first seq
 * past `snapshotSeq + 1`. Hands each commit past the snapshot to `apply`,
 * with its line number, in order.
 */
export async function readJournal(file: FileHandle, path: string, snapshotSeq: number, refuse: Refuse, apply: (commit: JournalCommit, line: number) => void): Promise<JournalRead> {
  let firstSeq: number | undefined;
  const scan = await forEachLine(file, {
    refuse: (_line, problem) => refuse(`${path} ${problem}`),
    onLine(line, n) {
      const where = `${path} line ${n}`;
      const entry = journalEntrySchema.safeParse(parseJson(line, (problem) => refuse(`${where} is not valid JSON (${problem})`)));
      if (!entry.success) throw refuse(`${where} is not a journal entry (${describeIssue(entry.error)})`);
      firstSeq ??= entry.data.seq;
      if (entry.data.seq !== firstSeq + n - 1) {
        throw refuse(`${where} has seq ${entry.data.seq}, expected ${firstSeq + n - 1}: entries are missing or out of order`);
      }
      if (n === 1 && entry.data.seq > snapshotSeq + 1) {
        throw refuse(`${where} starts at seq ${entry.data.seq} but ${STATE_FILE} ends at seq ${snapshotSeq}: commits are missing`);
      }
      const sessions = entry.data.sessions.map((v, j) => validate(sessionRecordSchema, v, `${where} sessions[${j}]`, refuse, isSessionRecord));
      const runs = entry.data.runs.map((v, j) => validate(runRecordSchema, v, `${where} runs[${j}]`, refuse, isRunRecord));
      // Entries already folded into the snapshot (a crash between writing it and truncating us).
      if (entry.data.seq <= snapshotSeq) return;
      apply({ seq: entry.data.seq, sessions, runs }, n);
    },
  });
  // Left for the caller to drop once it owns the directory: loading writes nothing.
  const tornTail = scan.partial ? { offset: scan.completeBytes, bytes: scan.totalBytes - scan.completeBytes, line: scan.lines + 1 } : undefined;
  return { lines: scan.lines, completeBytes: scan.completeBytes, tornTail };
}
