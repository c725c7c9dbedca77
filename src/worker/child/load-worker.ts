/**
 * Loads the worker proper (worker.cjs, one CommonJS bundle: scripts/bundle.mjs)
 * with the V8 code cache the build wrote beside it, and writes that cache.
 * A cold worker loads it while its droid starts, on the same 2 cores: with
 * the cache, loading took ≈ 50 ms of CPU instead of ≈ 75 (most of the rest
 * is zod building its schemas). Without a usable cache the bundle is
 * compiled as usual: a stale, foreign or damaged cache costs the saving,
 * never the turn.
 *
 * V8 alone is not enough of a check: it compares only the source's length
 * (a same-length other source ran the old code) and, on Node 20, not the
 * data's checksum (damaged data aborted the process in its deserializer).
 * So the file starts with a header, and its data reaches V8 only when both
 * digests match: the code's (the exact text compiled, and the Node, V8 and
 * architecture that made it) and the data's own. V8 still rejects data
 * made under other flags (`rejected`).
 *
 * Only Node built-ins here: the entry (main.ts) imports this before droid runs.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { Script } from 'node:vm';

/** Whether V8 used the cache: `absent` (none usable: missing, made for other code, damaged) or `rejected` (by V8) mean the bundle was compiled from source. */
export type CodeCacheUse = 'accepted' | 'rejected' | 'absent';

const codeCacheOf = (file: string) => `${file}.cache`;

const DIGEST_BYTES = 32;
/** The header: the code's digest, then the data's. */
const HEADER_BYTES = 2 * DIGEST_BYTES;

/** node:crypto is required at the load, not by the entry's first lines: it took ≈ 2 ms, before droid is spawned. */
let createHash: typeof import('node:crypto').createHash | undefined;
function sha256(...parts: Array<string | Buffer>): Buffer {
  createHash ??= (createRequire(import.meta.url)('node:crypto') as typeof import('node:crypto')).createHash;
  const hash = createHash('sha256');
  for (const part of parts) hash.update(part);
  return hash.digest();
}

/** CommonJS's own module wrapper; the first line of the source stays line 1. */
const wrap = (source: string) => `(function (exports, require, module, __filename, __dirname) {${source}\n})`;

const codeDigest = (wrapped: string) => sha256(wrapped, '\0', process.version, '\0', process.versions.v8, '\0', process.arch);

function evaluate(script: Script, file: string): unknown {
  const module = { exports: {} as unknown };
  const body = script.runInThisContext() as (...args: unknown[]) => void;
  body.call(module.exports, module.exports, createRequire(file), module, file, dirname(file));
  return module.exports;
}

/** The V8 data of the file's cache when it was made for exactly this code and is whole; otherwise none. Never throws. */
function cacheFor(file: string, wrapped: string): Buffer | undefined {
  try {
    const cache = readFileSync(codeCacheOf(file));
    if (cache.length <= HEADER_BYTES) return undefined;
    const data = cache.subarray(HEADER_BYTES);
    const fits = cache.subarray(0, DIGEST_BYTES).equals(codeDigest(wrapped)) && cache.subarray(DIGEST_BYTES, HEADER_BYTES).equals(sha256(data));
    return fits ? data : undefined;
  } catch {
    return undefined;
  }
}

/** Evaluates a CommonJS file and returns its exports, compiled from its code cache when that fits and V8 accepts it. */
export function loadWithCodeCache(file: string): { exports: unknown; cache: CodeCacheUse } {
  const wrapped = wrap(readFileSync(file, 'utf8'));
  const cachedData = cacheFor(file, wrapped);
  const script = new Script(wrapped, { filename: file, ...(cachedData && { cachedData }) });
  const exports = evaluate(script, file);
  return { exports, cache: cachedData === undefined ? 'absent' : script.cachedDataRejected === true ? 'rejected' : 'accepted' };
}

/**
 * Build step: evaluates the file (its modules' top level: what every worker
 * runs) and writes the code V8 compiled for it so far, after the header.
 * Run it in a fresh Node without flags, as the runner forks a worker: V8
 * rejects a cache made under other flags.
 */
export function writeCodeCache(file: string): number {
  const wrapped = wrap(readFileSync(file, 'utf8'));
  const script = new Script(wrapped, { filename: file });
  evaluate(script, file);
  const data = script.createCachedData();
  writeFileSync(codeCacheOf(file), Buffer.concat([codeDigest(wrapped), sha256(data), data]));
  return data.length;
}
