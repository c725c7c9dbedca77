/**
 * Reads and fully validates the state directory without writing anything, so
 * a refusal leaves the directory exactly as found. Anything unexpected refuses:
 * guessing at damaged state could lose or invent a user's work.
 * The one exception is a torn last journal line (see `TornTail`): it is
 * reported, not refused, and the store drops it once it owns the directory.
 *
 * Both files are streamed a line at a time, and each record is validated and
 * copied into its lean frozen form (see pool.ts) before the next line is
 * read, so loading needs little memory beyond the records it keeps.
 */
import { createHash, type Hash } from 'node:crypto';
import type { BigIntStats } from 'node:fs';
import { open, readdir, stat, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import type { z } from 'zod';
import { errCode } from '../util/errno.js';
import { StoreError } from './errors.js';
import { StateTables } from './tables/state-tables.js';
import { forEachLine } from './formats/lines.js';
import { isRunRecord, isSessionRecord } from './formats/record-guard.js';
import { RecordInterner } from './tables/record-interner.js';
import { STATE_VERSION, type SessionRecord } from '../shared/records.js';
import { FLAG_CHANGES, FLAG_PREVIEW, FLAG_STARTED, FLAG_USAGE, INDEX_FILE, readRunIndex, RUN_STATE_CODES, type IndexBody, type SnapshotDigest } from './formats/run-index.js';
import { RunTable } from './tables/run-table.js';
import { RunEntry } from './formats/run-entry.js';
import { describeIssue, journalEntrySchema, runRecordSchema, sessionRecordSchema, snapshotHeaderSchema } from '../shared/record-schemas.js';
import { HEADER_MAX_BYTES, LEGACY_STATE_FILE, recordOfLine, STATE_FILE, type RecordKind } from './formats/snapshot.js';

export { STATE_FILE } from './formats/snapshot.js';
export const JOURNAL_FILE = 'journal.jsonl';
export const RESULTS_DIR = 'results';

/** What the loading pool remembers before starting over: bounds its memory, which is freed after loading. */
const LOAD_POOL = { maxStrings: 50_000, maxObjects: 4096 };
/** What the pool of records read back later remembers, for the store's life. */
const READ_POOL = { maxStrings: 1024, maxObjects: 256 };

export interface LoadedState {
  /** Sequence number of the last commit. */
  seq: number;
  /** Validated records. */
  index: StateTables;
  /** No snapshot exists yet: a new state directory. */
  fresh: boolean;
  /** Complete lines currently in the journal, applied or not. */
  journalLines: number;
  /** Bytes of those complete lines: where the next commit goes once a torn tail is dropped. */
  journalBytes: number;
  /** The journal ends in a torn line (see `TornTail`), left out of the state above. */
  tornTail: TornTail | undefined;
  /**
   * How the snapshot was read: through its run index (runs kept as stubs), or
   * whole; `why` the index did not serve. `digest` is set when the snapshot
   * was read whole and its index should be written anew.
   */
  snapshot: { via: 'index' | 'whole'; why?: string; digest?: SnapshotDigest };
}

/** Where loading reports why a run index did not serve (a cache: never a refusal). */
export interface LoadLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

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

type Refuse = (problem: string) => StoreError;

/**
 * Reads the state in `dir`. The runs of the result keep the snapshot file
 * open to read records back: close `index.runs` when done with it.
 */
export async function loadState(dir: string, log?: LoadLog, options: { index?: boolean } = {}): Promise<LoadedState> {
  const statePath = join(dir, STATE_FILE);
  const journalPath = join(dir, JOURNAL_FILE);
  const refuse = refuser(dir);

  const legacyPath = join(dir, LEGACY_STATE_FILE);
  if (await exists(legacyPath)) {
    throw new StoreError(
      'state_version_unsupported',
      `${legacyPath} is a snapshot in the single-document layout of a pre-release build; ` +
        `this controller reads only ${STATE_FILE} (state version ${STATE_VERSION}, JSON Lines)`,
      `Nothing was changed. There are no automatic migrations: run the build that wrote this state, ` +
        `or move the directory aside (mv ${dir} ${dir}.old) and start with empty state`,
    );
  }

  const snapshotFile = await openIfExists(statePath);
  if (snapshotFile === undefined) {
    const journalSize = (await sizeIfExists(journalPath)) ?? 0;
    const results = await readdir(join(dir, RESULTS_DIR)).catch(() => []);
    if (journalSize > 0 || results.length > 0) {
      throw refuse(`${statePath} is missing, but ${journalSize > 0 ? journalPath : join(dir, RESULTS_DIR)} has content`);
    }
    return { seq: 0, index: new StateTables(), fresh: true, journalLines: 0, journalBytes: 0, tornTail: undefined, snapshot: { via: 'whole' } };
  }

  const sessions = new Map<string, SessionRecord>();
  const pool = new RecordInterner({ ...LOAD_POOL, sessionId: (id) => sessions.get(id)?.id });
  const runs = new RunTable(new RecordInterner({ ...READ_POOL, sessionId: (id) => sessions.get(id)?.id }));

  // ---- snapshot: through its index if it has a matching one, else whole ----
  let header: z.infer<typeof snapshotHeaderSchema>;
  let via: LoadedState['snapshot'];
  let file: FileHandle | undefined = snapshotFile;
  try {
    const indexed = options.index === false ? { why: 'not used: the state read through it breaks an invariant (the whole read decides)', missing: false } : await readIndexed(dir, file, statePath, sessions, runs, pool, refuse);
    let verified: BigIntStats | undefined;
    if ('header' in indexed) {
      header = indexed.header;
      verified = indexed.stat;
      via = { via: 'index' };
    } else {
      if (indexed.missing) log?.info({ dir, why: indexed.why }, 'no run index: reading the whole snapshot');
      else log?.warn({ dir, why: indexed.why }, 'run index not used (a cache: nothing is lost): reading the whole snapshot');
      sessions.clear();
      runs.clear();
      await file.close();
      file = undefined;
      file = await open(statePath, 'r');
      const hash = createHash('sha256');
      const statBefore = await file.stat({ bigint: true });
      const whole = await readSnapshot(file, statePath, sessions, runs, pool, refuse, hash);
      header = whole.header;
      via = { via: 'whole', why: indexed.why, digest: { seq: header.seq, sessions: header.sessions, runs: header.runs, bytes: whole.bytes, sha256: hash.digest('hex'), runsAt: whole.runsAt } };
      if (sameFile(statBefore, await file.stat({ bigint: true }))) verified = statBefore;
      else {
        // Written to while it was read: the records stand as read, but no byte of it is copied or indexed.
        for (const e of runs.facts()) e.offset = -1;
        delete via.digest;
      }
    }
    if (verified !== undefined) runs.repoint({ path: statePath, handle: file, stat: verified });
    else {
      await file.close();
      file = undefined;
    }
  } catch (err) {
    await file?.close();
    throw err;
  }

  // ---- journal ----
  const snapshotSeq = header.seq;
  let seq = snapshotSeq;
  /** Journal line that last set each record; records not here come from the snapshot. */
  const journalOrigin = { session: new Map<string, number>(), run: new Map<string, number>() };
  let journalLines = 0;
  let journalBytes = 0;
  let tornTail: TornTail | undefined;
  const journalFile = await openIfExists(journalPath);
  if (journalFile !== undefined) {
    let firstSeq: number | undefined;
    let scan;
    try {
      scan = await forEachLine(journalFile, {
        refuse: (_line, problem) => refuse(`${journalPath} ${problem}`),
        onLine(line, n) {
          const where = `${journalPath} line ${n}`;
          const entry = journalEntrySchema.safeParse(parseJson(line, (problem) => refuse(`${where} is not valid JSON (${problem})`)));
          if (!entry.success) throw refuse(`${where} is not a journal entry (${describeIssue(entry.error)})`);
          firstSeq ??= entry.data.seq;
          if (entry.data.seq !== firstSeq + n - 1) {
            throw refuse(`${where} has seq ${entry.data.seq}, expected ${firstSeq + n - 1}: entries are missing or out of order`);
          }
          if (n === 1 && entry.data.seq > snapshotSeq + 1) {
            throw refuse(`${where} starts at seq ${entry.data.seq} but ${STATE_FILE} ends at seq ${snapshotSeq}: commits are missing`);
          }
          const lineSessions = entry.data.sessions.map((v, j) => validate(sessionRecordSchema, v, `${where} sessions[${j}]`, refuse, isSessionRecord));
          const lineRuns = entry.data.runs.map((v, j) => validate(runRecordSchema, v, `${where} runs[${j}]`, refuse, isRunRecord));
          // Entries already folded into the snapshot (a crash between writing it and truncating us).
          if (entry.data.seq <= snapshotSeq) return;
          for (const s of lineSessions) {
            sessions.set(s.id, pool.session(s));
            journalOrigin.session.set(s.id, n);
          }
          for (const r of lineRuns) {
            runs.set(pool.run(r));
            journalOrigin.run.set(r.id, n);
          }
          seq = entry.data.seq;
        },
      });
    } catch (err) {
      await runs.close();
      throw err;
    } finally {
      await journalFile.close();
    }
    // Left for the caller to drop once it owns the directory: loading writes nothing.
    if (scan.partial) tornTail = { offset: scan.completeBytes, bytes: scan.totalBytes - scan.completeBytes, line: scan.lines + 1 };
    journalLines = scan.lines;
    journalBytes = scan.completeBytes;
  }

  // ---- cross-record invariants ----
  const adopted = StateTables.adopt(sessions, runs);
  if ('problem' in adopted) {
    await runs.close();
    // Stubs come from the index: whatever it got wrong must not refuse start-up. The whole read
    // decides, and words a refusal exactly as without an index.
    if (via.via === 'index') return loadState(dir, log, { index: false });
    const { kind, id, text } = adopted.problem;
    const journalLine = journalOrigin[kind].get(id);
    const where = journalLine !== undefined ? `${journalPath} line ${journalLine}` : `${statePath} line ${snapshotLine(kind, id, sessions, runs)}`;
    throw refuse(`${where}: ${kind} ${id} ${text}`);
  }
  return { seq, index: adopted.index, fresh: false, journalLines, journalBytes, tornTail, snapshot: via };
}

/**
 * The snapshot read through its run index: the header and sessions parsed
 * and validated as `readSnapshot` does, every byte hashed, runs added to
 * `runs` as stubs; or why that could not be done, having read nothing into
 * the maps that the caller must keep (it clears them). Never a refusal:
 * anything wrong here is left for the whole read to find and word.
 */
async function readIndexed(
  dir: string,
  file: FileHandle,
  path: string,
  sessions: Map<string, SessionRecord>,
  runs: RunTable,
  pool: RecordInterner,
  refuse: Refuse,
): Promise<{ header: z.infer<typeof snapshotHeaderSchema>; stat: BigIntStats } | { why: string; missing: boolean }> {
  const read = await readRunIndex(dir);
  if ('why' in read) return read;
  const index = read.body;
  const d = index.snapshot;
  const stale = (what: string): { why: string; missing: boolean } => ({ why: `${join(dir, INDEX_FILE)} describes another snapshot (${what})`, missing: false });
  const before = await file.stat({ bigint: true });
  if (before.size !== BigInt(d.bytes)) return stale(`${d.bytes} bytes, ${STATE_FILE} has ${before.size}`);
  const hash = createHash('sha256');
  let header: z.infer<typeof snapshotHeaderSchema> | undefined;
  try {
    const scan = await forEachLine(file, {
      firstLineMaxBytes: HEADER_MAX_BYTES,
      hash,
      maxLines: 1 + d.sessions,
      refuse: (_n, problem) => new Error(problem),
      onLine(line) {
        const value = JSON.parse(line) as unknown;
        if (header === undefined) {
          header = parseHeader(value, path, refuse);
          if (header.seq !== d.seq || header.sessions !== d.sessions || header.runs !== d.runs) throw new Error('its header differs');
          return;
        }
        const s = pool.session(validate(sessionRecordSchema, recordOfLine(value, 'session'), '', refuse, isSessionRecord));
        if (sessions.has(s.id)) throw new Error(`session ${s.id} appears twice`);
        sessions.set(s.id, s);
      },
    });
    if (scan.lines !== 1 + d.sessions) return stale('fewer lines than it announces');
  } catch (err) {
    return stale(err instanceof Error ? err.message : String(err));
  }
  if (hash.digest('hex') !== d.sha256) return stale('its SHA-256 differs');
  if (!sameFile(before, await file.stat({ bigint: true }))) return stale(`${STATE_FILE} changed while it was read`);
  const problem = addStubs(index, [...sessions.values()], runs);
  return problem === undefined ? { header: header!, stat: before } : stale(problem);
}

/** No write reached the file between the two stats (a write changes its size, mtime or ctime). */
function sameFile(a: BigIntStats, b: BigIntStats): boolean {
  return a.size === b.size && a.mtimeNs === b.mtimeNs && a.ctimeNs === b.ctimeNs && a.ino === b.ino;
}

/** Adds the index's runs to `runs` as stubs; what is wrong with the index if it cannot. */
function addStubs(index: IndexBody, sessionList: SessionRecord[], runs: RunTable): string | undefined {
  const { id, session, seq, key, state, flags, accepted, length, usage: u, preview } = index;
  const previews = new Map<number, string>();
  for (let i = 0; i + 1 < preview.length; i += 2) {
    const at = preview[i];
    const text = preview[i + 1];
    if (typeof at !== 'number' || typeof text !== 'string') return 'a preview entry is malformed';
    previews.set(at, text);
  }
  let at = index.snapshot.runsAt;
  let ui = 0;
  // Its own copy: a view would keep the whole index file in memory.
  const usageColumn = u.slice();
  for (let i = 0; i < id.length; i++) {
    const runId = id[i];
    const owner = sessionList[session[i]!];
    const f = flags[i]!;
    const s = RUN_STATE_CODES[state[i]!];
    const k = key[i];
    const n = length[i]!;
    const q = seq[i]!;
    if (typeof runId !== 'string' || owner === undefined || s === undefined || (k !== null && typeof k !== 'string') || q < 1 || n < 0) return `run ${i} is malformed`;
    const usageAt = ui;
    if ((f & FLAG_USAGE) !== 0) ui += 6;
    const text = (f & FLAG_PREVIEW) === 0 ? '' : previews.get(i);
    const usage = (f & FLAG_USAGE) !== 0 ? usageColumn : null;
    runs.add(new RunEntry(runId, owner.id, q, k ?? null, s, (f & FLAG_STARTED) !== 0, accepted[i]!, usage, usageAt, (f & FLAG_CHANGES) !== 0, text, at, n, undefined));
    if (runs.size !== i + 1) return `run ${runId} appears twice`;
    at += n + 1;
  }
  if (ui !== u.length) return 'its usage column has a wrong length';
  if (at !== index.snapshot.bytes) return `its line lengths add up to ${at} bytes, not ${index.snapshot.bytes}`;
  return undefined;
}

/**
 * Reads the snapshot's header and records into the maps, hashing every byte
 * into `hash`; returns the header, the file's size and where its runs start.
 */
async function readSnapshot(
  file: FileHandle,
  path: string,
  sessions: Map<string, SessionRecord>,
  runs: RunTable,
  pool: RecordInterner,
  refuse: Refuse,
  hash: Hash,
): Promise<{ header: z.infer<typeof snapshotHeaderSchema>; bytes: number; runsAt: number }> {
  let header: z.infer<typeof snapshotHeaderSchema> | undefined;
  let runsAt: number | undefined;
  const scan = await forEachLine(file, {
    firstLineMaxBytes: HEADER_MAX_BYTES,
    hash,
    refuse: (n, problem) => refuse(n === 1 ? `${path} does not start with a snapshot header (${problem})` : `${path} ${problem}`),
    onLine(line, n, offset, bytes) {
      const where = `${path} line ${n}`;
      const value = parseJson(line, (problem) => refuse(`${where} is not valid JSON (${problem})`));
      if (header === undefined) {
        header = parseHeader(value, path, refuse);
        return;
      }
      const kind: RecordKind = n - 1 <= header.sessions ? 'session' : 'run';
      if (n - 1 > header.sessions + header.runs) {
        throw refuse(`${where} is past the last record: the header announces ${header.sessions} sessions and ${header.runs} runs`);
      }
      const record = recordOfLine(value, kind);
      if (record === undefined) throw refuse(`${where} is not a ${kind} line (expected {"${kind}": {…}}, sessions first, then runs)`);
      if (kind === 'session') {
        const s = pool.session(validate(sessionRecordSchema, record, where, refuse, isSessionRecord));
        if (sessions.has(s.id)) throw refuse(`${where}: session ${s.id} appears twice`);
        sessions.set(s.id, s);
      } else {
        const r = pool.run(validate(runRecordSchema, record, where, refuse, isRunRecord));
        if (runs.has(r.id)) throw refuse(`${where}: run ${r.id} appears twice`);
        runsAt ??= offset;
        runs.set(r, offset, bytes);
      }
    },
  });
  if (header === undefined) throw refuse(scan.partial ? `${path} is incomplete (its first line has no newline)` : `${path} is empty`);
  const records = scan.lines - 1;
  if (scan.partial || records < header.sessions + header.runs) {
    throw refuse(
      `${path} is truncated: its header announces ${header.sessions} sessions and ${header.runs} runs, ` +
        `but it ends after ${records} complete record lines${scan.partial ? ' and a partial one' : ''}`,
    );
  }
  return { header, bytes: scan.totalBytes, runsAt: runsAt ?? scan.totalBytes };
}

function parseHeader(value: unknown, path: string, refuse: Refuse): z.infer<typeof snapshotHeaderSchema> {
  if (typeof value === 'object' && value !== null && 'version' in value && value.version !== STATE_VERSION) {
    throw new StoreError(
      'state_version_unsupported',
      `${path} has state version ${JSON.stringify(value.version)}; this controller reads only version ${STATE_VERSION}`,
      `Nothing was changed. Run the controller release that wrote this state, or restore a backup made by this release. ` +
        `There are no automatic migrations`,
    );
  }
  const header = snapshotHeaderSchema.safeParse(value);
  if (!header.success) throw refuse(`${path} line 1 is not a snapshot header (${describeIssue(header.error)})`);
  return header.data;
}

/**
 * Line of a record that came from the snapshot. The loader's maps keep the
 * snapshot's order (a record replaced by the journal keeps its place), so the
 * position in the map is the position in the file. Only used to word a refusal.
 */
function snapshotLine(kind: RecordKind, id: string, sessions: ReadonlyMap<string, unknown>, runs: ReadonlyMap<string, unknown>): number {
  let i = 0;
  for (const key of (kind === 'session' ? sessions : runs).keys()) {
    if (key === id) break;
    i++;
  }
  return 2 + i + (kind === 'run' ? sessions.size : 0);
}

function refuser(dir: string): Refuse {
  return (problem) =>
    new StoreError(
      'state_corrupt',
      problem,
      `Nothing was changed. Restore ${dir} from a backup, or move it aside (mv ${dir} ${dir}.broken) ` +
        `and start with empty state; the old records stay readable there`,
    );
}

/**
 * `value` as a `T`, or a refusal worded from the schema. `fast` answers yes only
 * for values the schema accepts unchanged (see record-guard.ts); on no, the
 * schema decides.
 */
function validate<T>(schema: z.ZodType<T>, value: unknown, where: string, refuse: Refuse, fast?: (v: unknown) => v is T): T {
  if (fast?.(value)) return value;
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const id = typeof value === 'object' && value !== null && 'id' in value ? ` (id ${JSON.stringify(value.id)})` : '';
  throw refuse(`${where}${id} is not a valid record: ${describeIssue(parsed.error)}`);
}

function parseJson(text: string, refuse: (problem: string) => StoreError): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw refuse(err instanceof Error ? err.message : String(err));
  }
}

async function openIfExists(path: string): Promise<FileHandle | undefined> {
  try {
    return await open(path, 'r');
  } catch (err) {
    if (errCode(err) === 'ENOENT') return undefined;
    throw err;
  }
}

async function sizeIfExists(path: string): Promise<number | undefined> {
  try {
    return (await stat(path)).size;
  } catch (err) {
    if (errCode(err) === 'ENOENT') return undefined;
    throw err;
  }
}

async function exists(path: string): Promise<boolean> {
  return (await sizeIfExists(path)) !== undefined;
}
