/**
 * The controller's durable state. Layout of the state directory:
 *
 *   state.jsonl        snapshot in JSON Lines: a header {version, seq, sessions, runs}
 *                      (the last two are record counts), then one line per
 *                      record, {"session": …} lines first, then {"run": …} lines
 *                      (see formats/snapshot.ts)
 *   state.index        the snapshot's run index, a cache (formats/run-index.ts)
 *   journal.jsonl      one line per commit since the snapshot: {seq, sessions, runs}
 *                      holding the full new version of each changed record
 *                      (formats/journal.ts)
 *   results/<run>.json one result file per finished run
 *   owner.json, owner.lock   see owner-lock.ts
 *   journal.torn-<time>      bytes of an incomplete last journal line dropped at
 *                      start-up (see formats/torn-tail.ts); kept for inspection only
 *
 * A commit appends one journal line and fsyncs it, so its cost does not grow
 * with the history kept. The journal is folded into a new snapshot at open and
 * whenever it outgrows both COMPACT_MIN_LINES and the record count, which keeps
 * the amortized cost per commit constant.
 *
 * Both files are written and read a line at a time, and records are held in
 * a lean, frozen form (tables/record-interner.ts), so memory follows the
 * records kept, not the size of the files.
 *
 * This is the façade the controller and the CLI use (with errors.ts).
 * Start-up up to the first commit is startup.ts (owner-lock.ts, load.ts); the
 * in-memory view and its invariants are tables/; the files' formats are
 * formats/, which import nothing from the tables or from here.
 */
import { open } from 'node:fs/promises';
import { join } from 'node:path';
import type { z } from 'zod';
import { writeFileAtomic } from './formats/atomic.js';
import { StoreError, writeFailure } from './errors.js';
import { nodeStoreFs, type StoreFileHandle, type StoreFs } from './formats/fs.js';
import type { StateTables, StoreChange } from './tables/state-tables.js';
import { RESULTS_DIR } from './load.js';
import { JOURNAL_FILE, JournalAppender } from './formats/journal.js';
import { createLogger, type Log } from '../util/logger.js';
import type { OwnerRecord, Ownership } from './owner-lock.js';
import { RecordInterner } from './tables/record-interner.js';
import { LIVE_STATES, type RunRecord, type RunResultFile, type SessionRecord } from '../shared/records.js';
import { planCrashRecovery, type RecoverySummary } from './recovery.js';
import { readJsonFile } from './formats/json-file.js';
import { describeIssue, runRecordSchema, runResultFileSchema, sessionRecordSchema } from '../shared/record-schemas.js';
import { STATE_FILE, writeIndexOrWarn, writeSnapshotFile, type SnapshotWritten } from './formats/snapshot.js';
import type { RunFacts } from './formats/run-entry.js';
import { closeOpened, openStateDir, removeTempFiles } from './startup.js';

export type { StoreChange } from './tables/state-tables.js';
export type { RecoverySummary } from './recovery.js';
export type { StoreFileHandle, StoreFs } from './formats/fs.js';
export type { RunFacts } from './formats/run-entry.js';

/** Below this many journal lines compaction is never worth its full rewrite. */
export const COMPACT_MIN_LINES = 1000;

/** What the commit pool remembers for the store's life: enough to share models, states, times and settings. */
const COMMIT_POOL = { maxStrings: 1024, maxObjects: 256 };

/** Run ids become file names: keep them to a safe alphabet. */
const SAFE_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$/;

export interface StoreOptions {
  now?: () => Date;
  logger?: Log;
  /** Every write, sync, rename and removal goes through this; node:fs unless a test records or fails them. */
  fs?: StoreFs;
  /** Journal lines below which compaction never runs (COMPACT_MIN_LINES); lower only to test compaction. */
  compactMinLines?: number;
}

/**
 * Single-owner durable store. Stored records are deep-frozen: read them
 * freely, and commit changed copies (`{ ...run, state }`) rather than
 * mutating what the maps hold.
 */
export class StateStore {
  readonly #index: StateTables;
  #seq: number;
  readonly #journal: JournalAppender;
  #chain: Promise<void> = Promise.resolve();
  #closed = false;
  #broken: StoreError | undefined;
  #compactionQueued = false;
  /** Result files being written (outside the write queue); close waits for them. */
  readonly #resultWrites = new Set<Promise<void>>();
  #recovery: RecoverySummary = { unknown: 0, queueLost: 0 };
  #startup: { via: 'index' | 'whole'; why?: string } = { via: 'whole' };
  /** Makes the stored copies of committed records; a run shares its session's id string. */
  readonly #pool = new RecordInterner({ ...COMMIT_POOL, sessionId: (id) => this.#index.sessions.get(id)?.id });

  private constructor(
    readonly dir: string,
    private readonly owner: Ownership,
    journal: StoreFileHandle,
    loaded: { seq: number; index: StateTables; journalLines: number; journalBytes: number },
    private readonly now: () => Date,
    private readonly logger: Log,
    private readonly fs: StoreFs,
    private readonly compactMinLines: number,
  ) {
    this.#index = loaded.index;
    this.#seq = loaded.seq;
    this.#journal = new JournalAppender(journal, loaded.journalLines, loaded.journalBytes);
  }

  /**
   * Opens (or creates) the state in `dir`: checks privacy, takes ownership,
   * validates everything, then compacts and recovers from an unclean stop.
   * Any refusal happens before the first write and leaves `dir` as it was.
   */
  static async open(dir: string, opts: StoreOptions = {}): Promise<StateStore> {
    const now = opts.now ?? (() => new Date());
    const logger = opts.logger ?? createLogger('droid-mcp.store');
    const fs = opts.fs ?? nodeStoreFs;
    const opened = await openStateDir(dir, { now, logger, fs });
    const { owner, journal, loaded } = opened;
    try {
      const store = new StateStore(dir, owner, journal, loaded, now, logger, fs, opts.compactMinLines ?? COMPACT_MIN_LINES);
      store.#startup = { via: loaded.snapshot.via, ...(loaded.snapshot.why !== undefined && { why: loaded.snapshot.why }) };
      if (loaded.journalLines > 0) await store.#enqueue(() => store.#compact());
      await removeTempFiles(dir, fs);
      // Read whole because its index did not serve, and not compacted: index it for the next start.
      // In the write queue, so open need not wait for it (a cache; writes after it wait for it); before
      // recovery's commit, which changes runs the index must show as the snapshot holds them; after
      // the temp files are removed, as it makes one.
      const reindex = loaded.journalLines === 0 ? loaded.snapshot.digest : undefined;
      if (reindex !== undefined) {
        const lengths = Array.from(loaded.index.runs.facts(), (e) => e.length);
        void store.#enqueue(() => writeIndexOrWarn(dir, { digest: reindex, lengths }, loaded.index, fs, logger));
      }
      store.#recovery = await store.#recoverAfterCrash();
      return store;
    } catch (err) {
      await closeOpened(opened);
      throw err;
    }
  }

  /** How start-up read the snapshot: through its run index, or whole (and why). */
  get startup(): { via: 'index' | 'whole'; why?: string } {
    return { ...this.#startup };
  }

  get sessions(): ReadonlyMap<string, SessionRecord> {
    return this.#index.sessions;
  }

  get runs(): ReadonlyMap<string, RunRecord> {
    return this.#index.runs;
  }

  /** This controller's owner record, and the one it took over from a dead or hung owner (null: none, or a clean stop). */
  get owners(): { current: OwnerRecord; previous: OwnerRecord | null } {
    return { current: this.owner.record, previous: this.owner.previous };
  }

  /** What open found after an unclean stop (zero after a clean one). */
  get recovery(): RecoverySummary {
    return { ...this.#recovery };
  }

  /** The session's runs in `seq` order (a new array). */
  runsBySession(sessionId: string): RunRecord[] {
    return this.#index.runsBySession(sessionId);
  }

  runByRequestKey(key: string): RunRecord | undefined {
    return this.#index.runByRequestKey(key);
  }

  /** What bulk reads need of every run, without reading any record back. */
  runFacts(): Iterable<RunFacts> {
    return this.#index.runs.facts();
  }

  /** The same for one session's runs, in `seq` order (a new array). */
  runFactsBySession(sessionId: string): RunFacts[] {
    return this.#index.runFactsBySession(sessionId);
  }

  /** Run records read back from the snapshot since start-up (bulk reads read none). */
  get runReads(): number {
    return this.#index.runs.reads;
  }

  /**
   * Stores the new versions of the given records. Resolves once they are on
   * disk (fsynced) and visible in the maps; commits apply in call order.
   */
  async commit(change: StoreChange): Promise<void> {
    this.#assertOpen();
    // Copies now (deep, frozen), so a caller changing its objects after the call changes nothing.
    const sessions = (change.sessions ?? []).map((s) => this.#pool.session(checked(sessionRecordSchema, s, 'session')));
    const runs = (change.runs ?? []).map((r) => this.#pool.run(checked(runRecordSchema, r, 'run')));
    await this.#enqueue(() => this.#append(sessions, runs));
  }

  /**
   * Durably writes the result file of an existing run (replacing any earlier
   * one). It follows the commits queued before it (its run's record), but is
   * not itself in the write queue: it is a file of its own, and commits
   * queued after it do not wait for its fsyncs (issue 38).
   */
  async writeResult(result: RunResultFile): Promise<void> {
    this.#assertOpen();
    const copy = checked(runResultFileSchema, structuredClone(result), 'result');
    if (!SAFE_ID.test(copy.runId)) {
      throw new StoreError('invalid_change', `run id ${JSON.stringify(copy.runId)} cannot name a result file`, 'Use ids of letters, digits, ".", "_" and "-"');
    }
    const write = this.#chain.then(async () => {
      this.#assertWritable();
      if (!this.#index.runs.has(copy.runId)) {
        throw new StoreError('invalid_change', `result for run ${copy.runId}, which does not exist`, 'Commit the run before its result');
      }
      await writeFileAtomic(this.#resultPath(copy.runId), JSON.stringify(copy), this.fs);
    });
    const settled = write.then(
      () => undefined,
      () => undefined,
    );
    this.#resultWrites.add(settled);
    void settled.then(() => this.#resultWrites.delete(settled));
    await write;
  }

  /** The run's result file, or undefined if none was written. */
  async readResult(runId: string): Promise<RunResultFile | undefined> {
    if (!SAFE_ID.test(runId)) return undefined;
    return readJsonFile(this.#resultPath(runId), {
      schema: runResultFileSchema,
      problemWith: (result) => (result.runId === runId ? undefined : `it names run ${result.runId}`),
      what: 'result file',
      action: "Restore it from a backup; the run's record is unaffected",
    });
  }

  /** Waits for pending writes, then gives up ownership. Idempotent. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#chain;
    await Promise.all(this.#resultWrites);
    try {
      await this.#journal.close();
      await this.#index.runs.close();
    } finally {
      await this.owner.release();
    }
  }

  // ---- internals ----

  /** Serializes the journal, snapshot and index writes, so journal lines never interleave and seq stays gapless. */
  #enqueue<T>(job: () => Promise<T>): Promise<T> {
    const result = this.#chain.then(job);
    this.#chain = result.then(
      () => undefined,
      () => undefined,
    );
    return result;
  }

  async #append(sessions: SessionRecord[], runs: RunRecord[]): Promise<void> {
    this.#assertWritable();
    if (sessions.length === 0 && runs.length === 0) return;
    const problem = this.#index.problemWith(sessions, runs);
    if (problem) {
      throw new StoreError('invalid_change', `${problem.kind} ${problem.id} ${problem.text}`, 'Nothing was written; fix the change and commit again');
    }
    const seq = this.#seq + 1;
    const line = JSON.stringify({ seq, sessions, runs }) + '\n';
    try {
      await this.#journal.append(line);
    } catch (err) {
      const what = `appending commit ${seq} to ${this.#journalPath}`;
      const undo = await this.#journal.undoAppend();
      if (undo === undefined) throw writeFailure(err, what, this.dir, 'unchanged');
      this.#broken = new StoreError(
        'state_write_failed',
        `the store stopped writing: ${what} failed (${messageOf(err)}) and cutting the journal back to its last commit failed too (${messageOf(undo)})`,
        `Restart the controller once the disk is fixed: start-up drops an incomplete last journal line and refuses anything else it cannot read`,
        { cause: err },
      );
      this.logger.error({ dir: this.dir, err, undo }, 'journal could not be restored after a failed write; the store refuses further writes');
      throw new StoreError('state_write_failed', `${what} failed: ${messageOf(err)}`, `The commit may or may not be on disk. ${this.#broken.action}`, {
        cause: err,
      });
    }
    this.#seq = seq;
    this.#index.apply(sessions, runs);
    this.#maybeCompact();
  }

  #maybeCompact(): void {
    const records = this.#index.sessions.size + this.#index.runs.size;
    if (this.#compactionQueued || this.#journal.lines <= this.compactMinLines || this.#journal.lines <= records) return;
    this.#compactionQueued = true;
    // Runs after the commit that triggered it has resolved; a failure keeps the (valid) journal.
    this.#enqueue(() => this.#compact()).catch((err: unknown) => this.logger.warn({ dir: this.dir, err }, 'state compaction failed; will retry later'));
  }

  /**
   * Snapshot first, then truncate: a crash between leaves lines the next load
   * skips by seq. writeSnapshot returns only once the new snapshot is durable
   * (file and directory synced), so once the journal is cut, every line it
   * held is in a snapshot that survives a crash. A failure at any step leaves
   * a consistent pair: the old or the new snapshot, with the whole journal,
   * or the new snapshot with the journal emptied (durably or not).
   */
  async #compact(): Promise<void> {
    this.#compactionQueued = false;
    this.#assertWritable();
    // Streamed from the maps: no commit can change them meanwhile, as this runs in the write queue.
    const written = await writeSnapshotFile(this.dir, this.#seq, this.#index.sessions, this.#index.runs, this.fs);
    await this.#readFrom(written);
    try {
      await this.#journal.empty();
    } catch (err) {
      throw writeFailure(err, `emptying ${this.#journalPath} after writing the snapshot`, this.dir, 'unchanged');
    }
    await writeIndexOrWarn(this.dir, written, this.#index, this.fs, this.logger);
  }

  /**
   * Points the runs at the snapshot just written, where every run now has a
   * line, and closes the one they read from before. If it cannot be opened,
   * they keep reading the old one, which stays valid while it is open.
   */
  async #readFrom(written: SnapshotWritten): Promise<void> {
    const path = join(this.dir, STATE_FILE);
    let handle;
    try {
      handle = await open(path, 'r');
      const stat = await handle.stat({ bigint: true });
      if (stat.size !== BigInt(written.digest.bytes)) throw new Error(`${path} has ${stat.size} bytes, ${written.digest.bytes} were written`);
      const old = this.#index.runs.repoint({ path, handle, stat }, { runsAt: written.digest.runsAt, lengths: written.lengths });
      await old?.handle.close().catch(() => undefined);
    } catch (err) {
      await handle?.close().catch(() => undefined);
      this.logger.warn({ dir: this.dir, err }, 'could not open the new snapshot to read runs from; they are read from the previous one');
    }
  }

  async #recoverAfterCrash(): Promise<RecoverySummary> {
    // Only runs left in flight are read back: facts say which.
    const table = this.#index.runs;
    const inFlight = [...table.facts()].filter((f) => f.state === 'queued' || LIVE_STATES.includes(f.state)).map((f) => table.recordOf(f));
    const plan = planCrashRecovery(inFlight, this.now());
    if (plan.runs.length > 0) {
      await this.commit({ runs: plan.runs });
      this.logger.warn({ dir: this.dir, ...plan.summary }, 'recovered runs left in flight by an unclean stop');
    }
    return plan.summary;
  }

  get #journalPath(): string {
    return join(this.dir, JOURNAL_FILE);
  }

  #resultPath(runId: string): string {
    return join(this.dir, RESULTS_DIR, `${runId}.json`);
  }

  #assertOpen(): void {
    if (this.#closed) throw new StoreError('store_closed', `the store for ${this.dir} is closed`, 'Open it again');
  }

  #assertWritable(): void {
    if (this.#broken) throw this.#broken;
    if (this.owner.compromised) {
      throw new StoreError(
        'state_lock_lost',
        `this controller lost its lock on ${this.dir}; another process may own it now`,
        'Stop this controller and start it again: start-up checks who owns the directory',
      );
    }
  }
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** The schema's copy of `value` if it is a valid record. */
function checked<T>(schema: z.ZodType<T>, value: T, what: string): T {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const id = typeof value === 'object' && value !== null && 'id' in value ? ` ${String(value.id)}` : '';
  throw new StoreError(
    'invalid_change',
    `${what}${id} is not a valid record: ${describeIssue(parsed.error)}`,
    'Nothing was written; fix the record and commit again',
  );
}
