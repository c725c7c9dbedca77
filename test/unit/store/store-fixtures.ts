/**
 * Fixtures shared by the store's durability and fault tests: private temp
 * folders, records, and opening what a crash would leave (see store-crash-fs.ts).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'vitest';
import { StoreError } from '../../../src/store/errors.js';
import type { RunRecord, RunResultFile, SessionRecord } from '../../../src/shared/records.js';
import { StateStore, type StoreOptions } from '../../../src/store/store.js';
import type { Log } from '../../../src/util/logger.js';
import { runRecord, sessionRecord } from '../../support/records.js';
import { unsyncedFs, type CrashFs, type ImageKind } from './store-crash-fs.js';

export const T0 = '2030-01-01T00:00:00.000Z';
const silent: Log = { info() {}, warn() {}, error() {} };
export const IMAGE_KINDS: ImageKind[] = ['synced', 'metadata-first'];
/** The errors a disk gives: full, failing, and permissions taken away. */
export const ERRNOS = ['ENOSPC', 'EIO', 'EACCES'] as const;

const bases: string[] = [];

/** A new private temp folder, removed by `removeTemps`. */
export async function tempBase(): Promise<string> {
  const base = await mkdtemp(join(tmpdir(), 'droid-mcp-store-'));
  bases.push(base);
  return base;
}

export async function removeTemps(): Promise<void> {
  for (const base of bases.splice(0)) await rm(base, { recursive: true, force: true });
}

function session(id: string, headRunId: string, over: Partial<SessionRecord> = {}): SessionRecord {
  return sessionRecord({ id, createdAt: T0, updatedAt: T0, workspace: '/work/space', headRunId, ...over });
}

/** A finished run: crash recovery leaves it alone, so a state reopened from an image is comparable. */
export function run(id: string, sessionId: string, seq: number, over: Partial<RunRecord> = {}): RunRecord {
  return runRecord({ id, sessionId, seq, requestKey: null, acceptedAt: T0, ...over });
}

/** The change that makes run `r<n>` the head of session s1. */
export function step(n: number, over: Partial<RunRecord> = {}): { sessions: SessionRecord[]; runs: RunRecord[] } {
  return { sessions: [session('s1', `r${n}`)], runs: [run(`r${n}`, 's1', n, over)] };
}

export function result(runId: string, finalText: string): RunResultFile {
  return { runId, finalText, transcript: [{ kind: 'assistant', text: finalText }], permissionsApproved: [], diagnostics: [], stderrTail: '' };
}

export interface Contents {
  sessions: SessionRecord[];
  runs: RunRecord[];
}

export function contents(store: StateStore): Contents {
  return { sessions: [...store.sessions.values()], runs: [...store.runs.values()] };
}

export function openStore(dir: string, opts: StoreOptions = {}): Promise<StateStore> {
  return StateStore.open(dir, { now: () => new Date(T0), logger: silent, ...opts });
}

export interface Logged {
  level: 'warn' | 'error';
  msg: string;
  obj: Record<string, unknown>;
}

/** A logger that keeps warnings and errors. */
export function capture(): { log: Log; logged: Logged[] } {
  const logged: Logged[] = [];
  const keep =
    (level: Logged['level']) =>
    (obj: object, msg: string): void => {
      logged.push({ level, msg, obj: obj as Record<string, unknown> });
    };
  return { logged, log: { info() {}, warn: keep('warn'), error: keep('error') } };
}

/**
 * Writes the crash image of `fs` into a new temp folder and opens the state
 * directory at `rel` (relative to the modelled root) in it with node:fs;
 * `look` reads what it needs before the store is closed again.
 */
export async function inImage<T>(fs: CrashFs, kind: ImageKind, look: (store: StateStore, dir: string) => Promise<T>, rel = 'state'): Promise<T> {
  const into = await tempBase();
  await fs.image(into, kind);
  const dir = join(into, rel);
  const store = await openStore(dir, { fs: unsyncedFs });
  try {
    return await look(store, dir);
  } finally {
    await store.close();
  }
}

/** The contents of the image, or a failure naming the image kind and what refused it. */
export async function imageContents(fs: CrashFs, kind: ImageKind): Promise<Contents> {
  try {
    return await inImage(fs, kind, async (store) => contents(store));
  } catch (err) {
    throw new Error(`the ${kind} crash image does not load: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  }
}

/**
 * Runs `op` with a crash image of each kind taken after every seam call it
 * makes, and after it settles; `check` is applied to every one of them.
 */
export async function atEveryCrashPoint(
  fs: CrashFs,
  op: () => Promise<unknown>,
  check: (image: { kind: ImageKind; dir: string; settled: boolean; after: string }) => Promise<void>,
): Promise<void> {
  const images: Array<{ kind: ImageKind; dir: string; settled: boolean; after: string }> = [];
  const take = async (settled: boolean, after: string): Promise<void> => {
    for (const kind of IMAGE_KINDS) {
      const dir = await tempBase();
      await fs.image(dir, kind);
      images.push({ kind, dir, settled, after });
    }
  };
  fs.afterCall = (call) => take(false, `${call.op} ${call.path}`);
  try {
    await op();
  } finally {
    fs.afterCall = undefined;
  }
  await take(true, 'the operation settled');
  expect(images.length).toBeGreaterThan(2);
  for (const image of images) await check(image);
}

/** Opens an image written by `atEveryCrashPoint`. */
export async function openImage<T>(image: { dir: string }, look: (store: StateStore, dir: string) => Promise<T>, rel = 'state'): Promise<T> {
  const dir = join(image.dir, rel);
  const store = await openStore(dir, { fs: unsyncedFs });
  try {
    return await look(store, dir);
  } finally {
    await store.close();
  }
}

/** Asserts `err` is a state_write_failed StoreError naming `errno`, and returns it. */
export function expectWriteFailed(err: unknown, errno: string): StoreError {
  expect(err).toBeInstanceOf(StoreError);
  const e = err as StoreError;
  expect(e.code).toBe('state_write_failed');
  expect(e.message).toContain(errno);
  expect(e.action.length).toBeGreaterThan(20);
  return e;
}

/** The rejection of `promise`; fails the test if it resolves. */
export async function rejectionOf(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (err) {
    return err;
  }
  throw new Error('expected a rejection');
}
