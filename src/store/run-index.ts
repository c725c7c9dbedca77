/**
 * The run index `state.index`: a cache beside the snapshot, written with
 * every snapshot, so start-up can keep runs as stubs (run-table.ts) instead
 * of parsing 100k run lines. It holds, per run of the snapshot in its order,
 * what start-up and the bulk reads need (id, session, seq, request key,
 * state, whether it started, acceptance time, usage, whether it changed
 * files, whether it has a preview) and its line's length, plus the preview
 * text of each session's latest run that has one.
 *
 * It binds itself to the snapshot it describes (seq, size and SHA-256 of its
 * bytes) and checks itself (SHA-256 of its body). Start-up uses it only when
 * both hold, having hashed the whole snapshot; otherwise it reads the whole
 * snapshot as before. It is never a reason to refuse start-up: a missing,
 * damaged, stale or foreign index only costs time.
 *
 * Layout: line 1 `{"version":1,"body":{"bytes":N,"sha256":"…"}}`, then the
 * body, one JSON document of columns (see `IndexBody`), and a newline.
 */
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { errCode } from '../util/errno.js';
import { writeFileAtomic } from './atomic.js';
import { nodeStoreFs, type StoreFs } from './fs.js';
import type { RunState } from './records.js';
import type { RunFacts } from './run-table.js';

export const INDEX_FILE = 'state.index';
export const INDEX_VERSION = 1;

/** Order of the `state` column's codes. */
export const RUN_STATE_CODES: readonly RunState[] = [
  'queued',
  'starting',
  'running',
  'cancelling',
  'succeeded',
  'interrupted',
  'failed',
  'timed_out',
  'cancelled',
  'unknown',
];

export const FLAG_STARTED = 1;
export const FLAG_CHANGES = 2;
export const FLAG_PREVIEW = 4;
export const FLAG_USAGE = 8;

/** The snapshot an index describes. */
export interface SnapshotDigest {
  /** Its header's seq, session and run counts. */
  seq: number;
  sessions: number;
  runs: number;
  /** Its size, and the SHA-256 (hex) of all its bytes. */
  bytes: number;
  sha256: string;
  /** Byte offset of its first run line (its size when it has none). */
  runsAt: number;
}

/** The index's columns; each has one item per run of the snapshot, in its order, except `usage` and `preview`. */
export interface IndexBody {
  snapshot: SnapshotDigest;
  id: string[];
  /** Position of the run's session among the snapshot's sessions. */
  session: number[];
  seq: number[];
  key: Array<string | null>;
  /** Code in RUN_STATE_CODES. */
  state: number[];
  /** FLAG_* bits. */
  flags: number[];
  /** Date.parse(acceptedAt); null when it does not parse. */
  accepted: Array<number | null>;
  /** Bytes of the run's line, without its newline. */
  length: number[];
  /** Six numbers (TokenUsage in field order; credits may be null) per run with FLAG_USAGE. */
  usage: Array<number | null>;
  /** Pairs: run position, preview text: each session's latest run with a preview. */
  preview: Array<number | string>;
}

/** A run to index: its facts and its line's length in the snapshot. */
export interface IndexedRun {
  facts: RunFacts;
  length: number;
}

/**
 * Writes the index of a snapshot durably (temp file, fsync, rename, directory
 * fsync, through `fs`). `previewOf` gives the preview text of a run whose
 * facts do not hold it; it is asked only for a session's latest run with one.
 */
export async function writeRunIndex(
  dir: string,
  snapshot: SnapshotDigest,
  runs: Iterable<IndexedRun>,
  sessionPosition: (sessionId: string) => number,
  previewOf: (facts: RunFacts) => string,
  fs: StoreFs = nodeStoreFs,
): Promise<void> {
  const body: IndexBody = { snapshot, id: [], session: [], seq: [], key: [], state: [], flags: [], accepted: [], length: [], usage: [], preview: [] };
  const stateCode = new Map(RUN_STATE_CODES.map((s, i) => [s, i]));
  /** Per session: position and facts of its latest run with a preview. */
  const latest = new Map<string, { at: number; facts: RunFacts }>();
  let at = 0;
  for (const { facts: f, length } of runs) {
    const u = f.usage;
    const flags = (f.started ? FLAG_STARTED : 0) | (f.hasChanges ? FLAG_CHANGES : 0) | (f.preview !== '' ? FLAG_PREVIEW : 0) | (u !== null ? FLAG_USAGE : 0);
    body.id.push(f.id);
    body.session.push(sessionPosition(f.sessionId));
    body.seq.push(f.seq);
    body.key.push(f.requestKey);
    body.state.push(stateCode.get(f.state)!);
    body.flags.push(flags);
    body.accepted.push(Number.isNaN(f.acceptedMs) ? null : f.acceptedMs);
    body.length.push(length);
    if (u !== null) body.usage.push(u.inputTokens, u.outputTokens, u.cacheCreationTokens, u.cacheReadTokens, u.thinkingTokens, u.factoryCredits);
    if (f.preview !== '') {
      const seen = latest.get(f.sessionId);
      if (seen === undefined || seen.facts.seq < f.seq) latest.set(f.sessionId, { at, facts: f });
    }
    at++;
  }
  if (at !== snapshot.runs) throw new Error(`run index listed ${at} runs for a snapshot of ${snapshot.runs}`);
  for (const { at: position, facts } of latest.values()) body.preview.push(position, facts.preview ?? previewOf(facts));
  const text = Buffer.from(JSON.stringify(body) + '\n', 'utf8');
  const header = JSON.stringify({ version: INDEX_VERSION, body: { bytes: text.length, sha256: createHash('sha256').update(text).digest('hex') } });
  await writeFileAtomic(join(dir, INDEX_FILE), Buffer.concat([Buffer.from(header + '\n', 'utf8'), text]), fs);
}

/** The index in `dir`, or why there is none to use (`missing`: no file at all). */
export async function readRunIndex(dir: string): Promise<{ body: IndexBody } | { why: string; missing: boolean }> {
  const path = join(dir, INDEX_FILE);
  let bytes: Buffer;
  try {
    bytes = await readFile(path);
  } catch (err) {
    if (errCode(err) === 'ENOENT') return { why: `${path} does not exist`, missing: true };
    return { why: `${path} cannot be read (${err instanceof Error ? err.message : String(err)})`, missing: false };
  }
  const bad = (what: string): { why: string; missing: boolean } => ({ why: `${path} ${what}`, missing: false });
  const newline = bytes.indexOf(0x0a);
  if (newline === -1 || newline > 1024) return bad('has no header line');
  let header: unknown;
  try {
    header = JSON.parse(bytes.subarray(0, newline).toString('utf8'));
  } catch {
    return bad('has a header that is not JSON');
  }
  const h = header as { version?: unknown; body?: { bytes?: unknown; sha256?: unknown } } | null;
  if (typeof h !== 'object' || h === null) return bad('has a header that is not an object');
  if (h.version !== INDEX_VERSION) return bad(`has version ${JSON.stringify(h.version)}, not ${INDEX_VERSION}`);
  const body = bytes.subarray(newline + 1);
  if (h.body?.bytes !== body.length) return bad(`is truncated or extended (its body has ${body.length} bytes, its header says ${JSON.stringify(h.body?.bytes)})`);
  if (h.body.sha256 !== createHash('sha256').update(body).digest('hex')) return bad('does not match its own checksum');
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    return bad('has a body that is not JSON');
  }
  const problem = shapeProblem(parsed);
  return problem === undefined ? { body: parsed as IndexBody } : bad(`has an unexpected shape (${problem})`);
}

/** What is wrong with the body's shape, if anything; the values are checked as they are used. */
function shapeProblem(v: unknown): string | undefined {
  if (typeof v !== 'object' || v === null) return 'not an object';
  const b = v as Record<string, unknown>;
  const s = b['snapshot'] as Record<string, unknown> | null | undefined;
  if (typeof s !== 'object' || s === null) return 'no snapshot';
  for (const k of ['seq', 'sessions', 'runs', 'bytes', 'runsAt']) if (!Number.isSafeInteger(s[k]) || (s[k] as number) < 0) return `snapshot.${k}`;
  if (typeof s['sha256'] !== 'string') return 'snapshot.sha256';
  const runs = s['runs'] as number;
  for (const k of ['id', 'session', 'seq', 'key', 'state', 'flags', 'accepted', 'length']) {
    if (!Array.isArray(b[k]) || (b[k] as unknown[]).length !== runs) return `column ${k}`;
  }
  if (!Array.isArray(b['usage']) || !Array.isArray(b['preview'])) return 'usage or preview';
  return undefined;
}
