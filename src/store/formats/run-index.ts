/**
 * The run index `state.index`: a cache beside the snapshot, written with
 * every snapshot, so start-up can keep runs as stubs (run-entry.ts) instead
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
 * Layout: line 1 `{"version":2,"endian":"LE","body":{"bytes":N,"strings":M,"sha256":"…"}}`
 * (padded to a multiple of 8 bytes), then the body: M bytes of one JSON line
 * with the snapshot's digest and the string columns, spaces up to a multiple
 * of 8, then the numeric columns in the order of `IndexBody` (Float64, Int32, Uint8).
 */
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { endianness } from 'node:os';
import { join } from 'node:path';
import { errCode } from '../../util/errno.js';
import { writeFileAtomic } from './atomic.js';
import { nodeStoreFs, type StoreFs } from './fs.js';
import type { RunState } from '../../shared/records.js';
import type { RunFacts } from './run-entry.js';

export const INDEX_FILE = 'state.index';
// 2: FLAG_USAGE_LIVE (an index without it would read every running figure as final).
const INDEX_VERSION = 2;

/**
 * Order of the `state` column's codes. Part of the file format, so kept apart
 * from the schema's enum (whose order may change): never reorder, only append;
 * test/unit/store/formats/store-index.test.ts checks it names every state exactly once.
 */
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
export const FLAG_USAGE_LIVE = 16;

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

/**
 * The index's columns, one item per run of the snapshot in its order (but
 * `usage` and `preview`). Strings travel as JSON; numbers as little-endian
 * binary columns, so reading 100k runs parses no number.
 */
export interface IndexBody {
  snapshot: SnapshotDigest;
  id: string[];
  key: Array<string | null>;
  /** Pairs: run position, preview text: each session's latest run with a preview. */
  preview: Array<number | string>;
  /** Date.parse(acceptedAt); NaN when it does not parse. */
  accepted: Float64Array;
  /** Six numbers (TokenUsage in field order; NaN: credits null) per run with FLAG_USAGE. */
  usage: Float64Array;
  /** Position of the run's session among the snapshot's sessions. */
  session: Int32Array;
  seq: Int32Array;
  /** Bytes of the run's line, without its newline. */
  length: Int32Array;
  /** Code in RUN_STATE_CODES. */
  state: Uint8Array;
  /** FLAG_* bits. */
  flags: Uint8Array;
}

/** A run to index: its facts and its line's length in the snapshot. */
export interface IndexedRun {
  facts: RunFacts;
  length: number;
}

const INT32_MAX = 0x7fffffff;

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
  const n = snapshot.runs;
  const id: string[] = [];
  const key: Array<string | null> = [];
  const accepted = new Float64Array(n);
  const usage: number[] = [];
  const session = new Int32Array(n);
  const seq = new Int32Array(n);
  const length = new Int32Array(n);
  const state = new Uint8Array(n);
  const flags = new Uint8Array(n);
  const stateCode = new Map(RUN_STATE_CODES.map((s, i) => [s, i]));
  /** Per session: position and facts of its latest run with a preview. */
  const latest = new Map<string, { at: number; facts: RunFacts }>();
  let at = 0;
  for (const { facts: f, length: bytes } of runs) {
    if (at >= n) throw new Error(`run index listed more runs than the snapshot's ${n}`);
    const u = f.usage;
    const position = sessionPosition(f.sessionId);
    if (position < 0 || f.seq > INT32_MAX || bytes > INT32_MAX) throw new Error(`run ${f.id} cannot be indexed`);
    id.push(f.id);
    key.push(f.requestKey);
    accepted[at] = f.acceptedMs;
    if (u !== null) usage.push(u.inputTokens, u.outputTokens, u.cacheCreationTokens, u.cacheReadTokens, u.thinkingTokens, u.factoryCredits ?? NaN);
    session[at] = position;
    seq[at] = f.seq;
    length[at] = bytes;
    state[at] = stateCode.get(f.state)!;
    flags[at] =
      (f.started ? FLAG_STARTED : 0) |
      (f.hasChanges ? FLAG_CHANGES : 0) |
      (f.preview !== '' ? FLAG_PREVIEW : 0) |
      (u !== null ? FLAG_USAGE : 0) |
      (f.usageLive ? FLAG_USAGE_LIVE : 0);
    if (f.preview !== '') {
      const seen = latest.get(f.sessionId);
      if (seen === undefined || seen.facts.seq < f.seq) latest.set(f.sessionId, { at, facts: f });
    }
    at++;
  }
  if (at !== n) throw new Error(`run index listed ${at} runs for a snapshot of ${n}`);
  const preview: Array<number | string> = [];
  for (const { at: position, facts } of latest.values()) preview.push(position, facts.preview ?? previewOf(facts));
  const strings = Buffer.from(JSON.stringify({ snapshot, id, key, preview }) + '\n', 'utf8');
  const pad = Buffer.alloc((8 - (strings.length % 8)) % 8, 0x20);
  const columns = [accepted, new Float64Array(usage), session, seq, length, state, flags].map((c) => Buffer.from(c.buffer, c.byteOffset, c.byteLength));
  const body = Buffer.concat([strings, pad, ...columns]);
  const header = JSON.stringify({
    version: INDEX_VERSION,
    endian: 'LE',
    body: { bytes: body.length, strings: strings.length, sha256: createHash('sha256').update(body).digest('hex') },
  });
  // The header line is padded so the body, and with it every Float64 column, starts 8-aligned.
  const head = Buffer.from(header.padEnd(header.length + ((7 - (header.length % 8)) % 8)) + '\n', 'utf8');
  await writeFileAtomic(join(dir, INDEX_FILE), Buffer.concat([head, body]), fs);
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
  const h = header as { version?: unknown; endian?: unknown; body?: { bytes?: unknown; strings?: unknown; sha256?: unknown } } | null;
  if (typeof h !== 'object' || h === null) return bad('has a header that is not an object');
  if (h.version !== INDEX_VERSION) return bad(`has version ${JSON.stringify(h.version)}, not ${INDEX_VERSION}`);
  if (h.endian !== 'LE' || endianness() !== 'LE') return bad('has numbers in another byte order');
  let body = bytes.subarray(newline + 1);
  if (h.body?.bytes !== body.length)
    return bad(`is truncated or extended (its body has ${body.length} bytes, its header says ${JSON.stringify(h.body?.bytes)})`);
  if (h.body.sha256 !== createHash('sha256').update(body).digest('hex')) return bad('does not match its own checksum');
  const stringBytes = h.body.strings;
  if (!Number.isSafeInteger(stringBytes) || (stringBytes as number) > body.length) return bad('has a malformed header');
  let strings: unknown;
  try {
    strings = JSON.parse(body.subarray(0, stringBytes as number).toString('utf8'));
  } catch {
    return bad('has strings that are not JSON');
  }
  const problem = shapeProblem(strings);
  if (problem !== undefined) return bad(`has an unexpected shape (${problem})`);
  const { snapshot, id, key, preview } = strings as Pick<IndexBody, 'snapshot' | 'id' | 'key' | 'preview'>;
  // Typed arrays need aligned offsets; a copy costs little next to parsing.
  if (body.byteOffset % 8 !== 0) body = Buffer.from(body);
  const n = snapshot.runs;
  let at = (stringBytes as number) + ((8 - ((stringBytes as number) % 8)) % 8);
  const take = <T>(make: (buffer: ArrayBuffer, offset: number, length: number) => T, count: number, size: number): T | undefined => {
    if (at + count * size > body.length) return undefined;
    const column = make(body.buffer as ArrayBuffer, body.byteOffset + at, count);
    at += count * size;
    return column;
  };
  const f64 = (b: ArrayBuffer, o: number, l: number) => new Float64Array(b, o, l);
  const i32 = (b: ArrayBuffer, o: number, l: number) => new Int32Array(b, o, l);
  const u8 = (b: ArrayBuffer, o: number, l: number) => new Uint8Array(b, o, l);
  const accepted = take(f64, n, 8);
  const flagsAt = body.length - n;
  const flags = flagsAt >= 0 ? new Uint8Array(body.buffer as ArrayBuffer, body.byteOffset + flagsAt, n) : undefined;
  let withUsage = 0;
  if (flags !== undefined) for (let i = 0; i < n; i++) if ((flags[i]! & FLAG_USAGE) !== 0) withUsage++;
  const usage = take(f64, withUsage * 6, 8);
  const session = take(i32, n, 4);
  const seq = take(i32, n, 4);
  const length = take(i32, n, 4);
  const state = take(u8, n, 1);
  if (flags === undefined || !accepted || !usage || !session || !seq || !length || !state || at !== flagsAt) return bad('has columns of the wrong size');
  return { body: { snapshot, id, key, preview, accepted, usage, session, seq, length, state, flags } };
}

/** What is wrong with the strings' shape, if anything; the values are checked as they are used. */
function shapeProblem(v: unknown): string | undefined {
  if (typeof v !== 'object' || v === null) return 'not an object';
  const b = v as Record<string, unknown>;
  const s = b['snapshot'] as Record<string, unknown> | null | undefined;
  if (typeof s !== 'object' || s === null) return 'no snapshot';
  for (const k of ['seq', 'sessions', 'runs', 'bytes', 'runsAt']) if (!Number.isSafeInteger(s[k]) || (s[k] as number) < 0) return `snapshot.${k}`;
  if (typeof s['sha256'] !== 'string') return 'snapshot.sha256';
  const runs = s['runs'] as number;
  for (const k of ['id', 'key']) if (!Array.isArray(b[k]) || (b[k] as unknown[]).length !== runs) return `column ${k}`;
  if (!Array.isArray(b['preview'])) return 'preview';
  return undefined;
}
