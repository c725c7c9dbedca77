/**
 * The snapshot half of loading (load.ts): `state.jsonl` read into the
 * loader's maps, through its run index when one matches it (runs kept as
 * stubs, read back later by the run table), else whole. Validates as load.ts
 * says, writes nothing.
 */
import { createHash, type Hash } from 'node:crypto';
import type { BigIntStats } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import type { z } from 'zod';
import { StoreError } from './errors.js';
import { forEachLine } from './formats/lines.js';
import { isRunRecord, isSessionRecord } from './formats/record-guard.js';
import { parseJson, validate, type Refuse } from './formats/refusal.js';
import { RunEntry } from './formats/run-entry.js';
import {
  FLAG_CHANGES,
  FLAG_PREVIEW,
  FLAG_STARTED,
  FLAG_USAGE,
  FLAG_USAGE_LIVE,
  INDEX_FILE,
  readRunIndex,
  RUN_STATE_CODES,
  type IndexBody,
  type SnapshotDigest,
} from './formats/run-index.js';
import { HEADER_MAX_BYTES, recordOfLine, STATE_FILE, type RecordKind } from './formats/snapshot.js';
import { sameFile } from './formats/snapshot-source.js';
import type { RecordInterner } from './tables/record-interner.js';
import type { RunTable } from './tables/run-table.js';
import { STATE_VERSION, type SessionRecord } from '../shared/records.js';
import { describeIssue, runRecordSchema, sessionRecordSchema, snapshotHeaderSchema } from '../shared/record-schemas.js';

/** Where loading reports why a run index did not serve (a cache: never a refusal). */
export interface LoadLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

/**
 * How the snapshot was read: through its run index (runs kept as stubs), or
 * whole; `why` the index did not serve. `digest` is set when the snapshot
 * was read whole and its index should be written anew.
 */
export interface SnapshotRead {
  via: 'index' | 'whole';
  why?: string;
  digest?: SnapshotDigest;
}

/** The maps loading fills (the journal is applied to them next), the pool their records are copied with, and how it refuses. */
export interface LoadTarget {
  sessions: Map<string, SessionRecord>;
  runs: RunTable;
  pool: RecordInterner;
  refuse: Refuse;
}

/**
 * Reads the snapshot open as `snapshotFile` (closed here, or kept open by
 * `runs` to read records back), through its index unless `useIndex` is false.
 */
export async function loadSnapshot(
  dir: string,
  snapshotFile: FileHandle,
  target: LoadTarget,
  log: LoadLog | undefined,
  useIndex: boolean,
): Promise<{ header: z.infer<typeof snapshotHeaderSchema>; via: SnapshotRead }> {
  const { sessions, runs } = target;
  const statePath = join(dir, STATE_FILE);
  let header: z.infer<typeof snapshotHeaderSchema>;
  let via: SnapshotRead;
  let file: FileHandle | undefined = snapshotFile;
  try {
    const indexed = !useIndex
      ? { why: 'not used: the state read through it breaks an invariant (the whole read decides)', missing: false }
      : await readIndexed(dir, file, statePath, target);
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
      const whole = await readSnapshot(file, statePath, target, hash);
      header = whole.header;
      via = {
        via: 'whole',
        why: indexed.why,
        digest: { seq: header.seq, sessions: header.sessions, runs: header.runs, bytes: whole.bytes, sha256: hash.digest('hex'), runsAt: whole.runsAt },
      };
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
  return { header, via };
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
  { sessions, runs, pool, refuse }: LoadTarget,
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
    if (typeof runId !== 'string' || owner === undefined || s === undefined || (k !== null && typeof k !== 'string') || q < 1 || n < 0)
      return `run ${i} is malformed`;
    const usageAt = ui;
    if ((f & FLAG_USAGE) !== 0) ui += 6;
    const text = (f & FLAG_PREVIEW) === 0 ? '' : previews.get(i);
    const usage = (f & FLAG_USAGE) !== 0 ? usageColumn : null;
    runs.add(
      new RunEntry(
        runId,
        owner.id,
        q,
        k ?? null,
        s,
        (f & FLAG_STARTED) !== 0,
        accepted[i]!,
        usage,
        usageAt,
        (f & FLAG_USAGE_LIVE) !== 0,
        (f & FLAG_CHANGES) !== 0,
        text,
        at,
        n,
        undefined,
      ),
    );
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
  { sessions, runs, pool, refuse }: LoadTarget,
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
      `Nothing was changed. Run the controller release that wrote this state, or restore a backup made by this release. ` + `There are no automatic migrations`,
    );
  }
  const header = snapshotHeaderSchema.safeParse(value);
  if (!header.success) throw refuse(`${path} line 1 is not a snapshot header (${describeIssue(header.error)})`);
  return header.data;
}
