/**
 * Reads and fully validates the state directory without writing anything, so
 * a refusal leaves the directory exactly as found. Anything unexpected refuses:
 * guessing at damaged state could lose or invent a user's work.
 */
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { z } from 'zod';
import { errCode } from './errno.js';
import { StoreError } from './errors.js';
import { StateIndex } from './indexes.js';
import { STATE_VERSION, type RunRecord, type SessionRecord } from './records.js';
import { describeIssue, journalEntrySchema, runRecordSchema, sessionRecordSchema, snapshotSchema } from './schemas.js';

export const STATE_FILE = 'state.json';
export const JOURNAL_FILE = 'journal.jsonl';
export const RESULTS_DIR = 'results';

export interface LoadedState {
  /** Sequence number of the last commit. */
  seq: number;
  /** Validated records. */
  index: StateIndex;
  /** No snapshot exists yet: a new state directory. */
  fresh: boolean;
  /** Lines currently in the journal, applied or not. */
  journalLines: number;
}

export async function loadState(dir: string): Promise<LoadedState> {
  const statePath = join(dir, STATE_FILE);
  const journalPath = join(dir, JOURNAL_FILE);
  const refuse = refuser(dir);

  const snapshotText = await readIfExists(statePath);
  const journalText = (await readIfExists(journalPath)) ?? '';
  if (snapshotText === undefined) {
    const results = await readdir(join(dir, RESULTS_DIR)).catch(() => []);
    if (journalText.length > 0 || results.length > 0) {
      throw refuse(`${statePath} is missing, but ${journalText.length > 0 ? journalPath : join(dir, RESULTS_DIR)} has content`);
    }
    return { seq: 0, index: new StateIndex(), fresh: true, journalLines: 0 };
  }

  // ---- snapshot ----
  const raw = parseJson(snapshotText, (problem) => refuse(`${statePath} is not valid JSON (${problem})`));
  if (typeof raw === 'object' && raw !== null && 'version' in raw && raw.version !== STATE_VERSION) {
    throw new StoreError(
      'state_version_unsupported',
      `${statePath} has state version ${JSON.stringify(raw.version)}; this controller reads only version ${STATE_VERSION}`,
      `Nothing was changed. Run the controller release that wrote this state, or restore a backup made by this release. ` +
        `There are no automatic migrations`,
    );
  }
  const snapshot = snapshotSchema.safeParse(raw);
  if (!snapshot.success) throw refuse(`${statePath} is not a state snapshot (${describeIssue(snapshot.error)})`);

  const sessions = new Map<string, SessionRecord>();
  const runs = new Map<string, RunRecord>();
  const origin = new Map<string, string>();
  const at = (kind: 'session' | 'run', id: string): string => origin.get(`${kind}:${id}`) ?? statePath;

  snapshot.data.sessions.forEach((value, i) => {
    const where = `${statePath} sessions[${i}]`;
    const record = validate(sessionRecordSchema, value, where, refuse);
    if (sessions.has(record.id)) throw refuse(`${where}: session ${record.id} appears twice`);
    sessions.set(record.id, record);
    origin.set(`session:${record.id}`, where);
  });
  snapshot.data.runs.forEach((value, i) => {
    const where = `${statePath} runs[${i}]`;
    const record = validate(runRecordSchema, value, where, refuse);
    if (runs.has(record.id)) throw refuse(`${where}: run ${record.id} appears twice`);
    runs.set(record.id, record);
    origin.set(`run:${record.id}`, where);
  });

  // ---- journal ----
  const snapshotSeq = snapshot.data.seq;
  let seq = snapshotSeq;
  const lines = journalText.split('\n');
  // A complete journal ends with a newline, leaving one empty string after split.
  const complete = lines.pop() === '';
  if (!complete) {
    throw new StoreError(
      'state_corrupt',
      `${journalPath} line ${lines.length + 1} is incomplete (the file does not end with a newline)`,
      `Nothing was changed. This is usually a crash in the middle of a write that was never acknowledged. ` +
        `Back up ${dir}, then delete that last partial line from ${JOURNAL_FILE}; or restore ${dir} from a backup`,
    );
  }
  let firstSeq: number | undefined;
  lines.forEach((line, i) => {
    const where = `${journalPath} line ${i + 1}`;
    const entry = journalEntrySchema.safeParse(parseJson(line, (problem) => refuse(`${where} is not valid JSON (${problem})`)));
    if (!entry.success) throw refuse(`${where} is not a journal entry (${describeIssue(entry.error)})`);
    firstSeq ??= entry.data.seq;
    if (entry.data.seq !== firstSeq + i) {
      throw refuse(`${where} has seq ${entry.data.seq}, expected ${firstSeq + i}: entries are missing or out of order`);
    }
    if (i === 0 && entry.data.seq > snapshotSeq + 1) {
      throw refuse(`${where} starts at seq ${entry.data.seq} but ${STATE_FILE} ends at seq ${snapshotSeq}: commits are missing`);
    }
    const lineSessions = entry.data.sessions.map((v, j) => validate(sessionRecordSchema, v, `${where} sessions[${j}]`, refuse));
    const lineRuns = entry.data.runs.map((v, j) => validate(runRecordSchema, v, `${where} runs[${j}]`, refuse));
    // Entries already folded into the snapshot (a crash between writing it and truncating us).
    if (entry.data.seq <= snapshotSeq) return;
    for (const s of lineSessions) {
      sessions.set(s.id, s);
      origin.set(`session:${s.id}`, where);
    }
    for (const r of lineRuns) {
      runs.set(r.id, r);
      origin.set(`run:${r.id}`, where);
    }
    seq = entry.data.seq;
  });

  // ---- cross-record invariants ----
  const index = new StateIndex();
  const allSessions = [...sessions.values()];
  const allRuns = [...runs.values()];
  const problem = index.problemWith(allSessions, allRuns);
  if (problem) throw refuse(`${at(problem.kind, problem.id)}: ${problem.kind} ${problem.id} ${problem.text}`);
  index.apply(allSessions, allRuns);
  return { seq, index, fresh: false, journalLines: lines.length };
}

function refuser(dir: string): (problem: string) => StoreError {
  return (problem) =>
    new StoreError(
      'state_corrupt',
      problem,
      `Nothing was changed. Restore ${dir} from a backup, or move it aside (mv ${dir} ${dir}.broken) ` +
        `and start with empty state; the old records stay readable there`,
    );
}

function validate<T>(schema: z.ZodType<T>, value: unknown, where: string, refuse: (problem: string) => StoreError): T {
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

async function readIfExists(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, 'utf8');
  } catch (err) {
    if (errCode(err) === 'ENOENT') return undefined;
    throw err;
  }
}

