/**
 * Reads and fully validates the state directory without writing anything, so
 * a refusal leaves the directory exactly as found. Anything unexpected refuses:
 * guessing at damaged state could lose or invent a user's work.
 * The one exception is a torn last journal line (see `TornTail`): it is
 * reported, not refused, and the store drops it once it owns the directory.
 *
 * Both files are streamed a line at a time, and each record is validated and
 * copied into its lean frozen form (see record-interner.ts) before the next
 * line is read, so loading needs little memory beyond the records it keeps.
 * The snapshot is read by load-snapshot.ts, the journal by formats/journal.ts;
 * the tables (tables/state-tables.ts) then check what holds across records.
 */
import { open, readdir, stat, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { errCode } from '../util/errno.js';
import { exists } from '../util/exists.js';
import { StoreError } from './errors.js';
import { StateTables } from './tables/state-tables.js';
import { RecordInterner } from './tables/record-interner.js';
import { RunTable } from './tables/run-table.js';
import { JOURNAL_FILE, readJournal, type TornTail } from './formats/journal.js';
import { refuser } from './formats/refusal.js';
import { LEGACY_STATE_FILE, STATE_FILE, type RecordKind } from './formats/snapshot.js';
import { loadSnapshot, type LoadLog, type LoadTarget, type SnapshotRead } from './load-snapshot.js';
import { STATE_VERSION, type SessionRecord } from '../shared/records.js';

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
  /** How the snapshot was read (see `SnapshotRead`). */
  snapshot: SnapshotRead;
}

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
  const into: LoadTarget = { sessions, runs, pool, refuse };

  // ---- snapshot: through its index if it has a matching one, else whole ----
  const { header, via } = await loadSnapshot(dir, snapshotFile, into, log, options.index !== false);

  // ---- journal ----
  const journal = await loadJournal(journalPath, header.seq, into);

  // ---- cross-record invariants ----
  const adopted = StateTables.adopt(sessions, runs);
  if ('problem' in adopted) {
    await runs.close();
    // Stubs come from the index: whatever it got wrong must not refuse start-up. The whole read
    // decides, and words a refusal exactly as without an index.
    if (via.via === 'index') return loadState(dir, log, { index: false });
    const { kind, id, text } = adopted.problem;
    const journalLine = journal.origin[kind].get(id);
    const where = journalLine !== undefined ? `${journalPath} line ${journalLine}` : `${statePath} line ${snapshotLine(kind, id, sessions, runs)}`;
    throw refuse(`${where}: ${kind} ${id} ${text}`);
  }
  const { seq, lines: journalLines, bytes: journalBytes, tornTail } = journal;
  return { seq, index: adopted.index, fresh: false, journalLines, journalBytes, tornTail, snapshot: via };
}

/**
 * Applies the journal's commits past the snapshot to the maps. Returns the
 * last commit's seq, the journal line that last set each record (records not
 * there come from the snapshot), and the journal's complete lines and bytes.
 */
async function loadJournal(
  journalPath: string,
  snapshotSeq: number,
  { sessions, runs, pool, refuse }: LoadTarget,
): Promise<{ seq: number; origin: Record<RecordKind, Map<string, number>>; lines: number; bytes: number; tornTail: TornTail | undefined }> {
  let seq = snapshotSeq;
  const origin = { session: new Map<string, number>(), run: new Map<string, number>() };
  const journalFile = await openIfExists(journalPath);
  if (journalFile === undefined) return { seq, origin, lines: 0, bytes: 0, tornTail: undefined };
  let read;
  try {
    read = await readJournal(journalFile, journalPath, snapshotSeq, refuse, (commit, n) => {
      for (const s of commit.sessions) {
        sessions.set(s.id, pool.session(s));
        origin.session.set(s.id, n);
      }
      for (const r of commit.runs) {
        runs.set(pool.run(r));
        origin.run.set(r.id, n);
      }
      seq = commit.seq;
    });
  } catch (err) {
    await runs.close();
    throw err;
  } finally {
    await journalFile.close();
  }
  return { seq, origin, lines: read.lines, bytes: read.completeBytes, tornTail: read.tornTail };
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
