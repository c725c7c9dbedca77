/**
 * The journal `journal.jsonl`: one line per commit since the snapshot,
 * `{"seq":N,"sessions":[…],"runs":[…]}`, holding the full new version of
 * each changed record. The store (store.ts) appends through a
 * `JournalAppender`, which fdatasyncs each line before the commit is
 * acknowledged; loading (load.ts) reads it back with `readJournal`, a line
 * at a time; torn-tail.ts drops a torn last line.
 */
import type { FileHandle } from 'node:fs/promises';
import type { RunRecord, SessionRecord } from '../../shared/records.js';
import { describeIssue, journalEntrySchema, runRecordSchema, sessionRecordSchema } from '../../shared/record-schemas.js';
import { appendDurable } from './atomic.js';
import type { StoreFileHandle } from './fs.js';
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
interface JournalCommit {
  seq: number;
  sessions: SessionRecord[];
  runs: RunRecord[];
}

interface JournalRead {
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
export async function readJournal(
  file: FileHandle,
  path: string,
  snapshotSeq: number,
  refuse: Refuse,
  apply: (commit: JournalCommit, line: number) => void,
): Promise<JournalRead> {
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

/** The journal open for appending ('a'), with its complete lines and its size after the last good commit. */
export class JournalAppender {
  #lines: number;
  /** A failed append is cut back to this. */
  #bytes: number;

  constructor(
    private readonly handle: StoreFileHandle,
    lines: number,
    bytes: number,
  ) {
    this.#lines = lines;
    this.#bytes = bytes;
  }

  get lines(): number {
    return this.#lines;
  }

  /** Appends one commit's line; resolves once it is fdatasynced, so the commit may be acknowledged. */
  async append(line: string): Promise<void> {
    await appendDurable(this.handle, line);
    this.#lines++;
    this.#bytes += Buffer.byteLength(line);
  }

  /**
   * After a failed append: cuts whatever part of the line reached the file
   * back off and syncs that, so the failed commit is durably absent and the
   * next line does not follow garbage. The store then keeps serving: every
   * earlier commit was synced before it was acknowledged. Returns the error
   * if that fails; the store must then refuse further writes, because the
   * journal may end in a partial or unacknowledged line and the next commit
   * would reuse its seq.
   */
  async undoAppend(): Promise<unknown> {
    try {
      await this.handle.truncate(this.#bytes);
      await this.handle.datasync();
      return undefined;
    } catch (err) {
      return err;
    }
  }

  /** Empties the journal once a durable snapshot holds every line of it. */
  async empty(): Promise<void> {
    await this.handle.truncate(0);
    // The file is now empty, whether or not the sync below succeeds; a later undo must cut back to 0.
    this.#lines = 0;
    this.#bytes = 0;
    // Not needed for consistency (the durable snapshot covers every line the journal held,
    // and the next commit's fdatasync covers the new size too); it just settles the size now.
    await this.handle.datasync();
  }

  close(): Promise<void> {
    return this.handle.close();
  }
}
