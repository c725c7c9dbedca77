/**
 * Loads the worker proper (worker.cjs, one CommonJS bundle: scripts/bundle.mjs)
 * with the V8 code cache the build wrote beside it, and writes that cache.
 * A cold worker loads it while its droid starts, on the same 2 cores: with
 * the cache, loading took ≈ 50 ms of CPU instead of ≈ 75 (most of the rest
 * is zod building its schemas). V8 accepts a cache only for the same source,
 * V8 version and flags; otherwise (or with none) the bundle is compiled as
 * usual, so a stale or foreign cache costs the saving, never the turn.
 * V8 compares only the source's length, so the cache file starts with the
 * SHA-256 of the exact source it was made for, and is used only for that.
 *
 * Only Node built-ins here: the entry (main.ts) imports this before droid runs.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { Script } from 'node:vm';

/** Whether V8 used the cache: `absent` (none, or made for another source) or `rejected` (by V8) mean the bundle was compiled from source. */
export type CodeCacheUse = 'accepted' | 'rejected' | 'absent';

const codeCacheOf = (file: string) => `${file}.cache`;

const DIGEST_BYTES = 32;
/** node:crypto is required here, at the load, not by the entry's first lines: it took ≈ 2 ms, before droid is spawned. */
function digestOf(source: string): Buffer {
  const { hash } = createRequire(import.meta.url)('node:crypto') as typeof import('node:crypto');
  return Buffer.from(hash('sha256', source, 'hex'), 'hex');
}

/** CommonJS's own module wrapper; the first line of the source stays line 1. */
function compile(file: string, source: string, cachedData?: Buffer): Script {
  return new Script(`(function (exports, require, module, __filename, __dirname) {${source}\n})`, { filename: file, ...(cachedData && { cachedData }) });
}

function evaluate(script: Script, file: string): unknown {
  const module = { exports: {} as unknown };
  const body = script.runInThisContext() as (...args: unknown[]) => void;
  body.call(module.exports, module.exports, createRequire(file), module, file, dirname(file));
  return module.exports;
}

/** The V8 data of the file's cache when it was made for exactly this source; otherwise none. */
function cacheFor(file: string, source: string): Buffer | undefined {
  let cache: Buffer;
  try {
    cache = readFileSync(codeCacheOf(file));
  } catch {
    return undefined;
  }
  return cache.length > DIGEST_BYTES && cache.subarray(0, DIGEST_BYTES).equals(digestOf(source)) ? cache.subarray(DIGEST_BYTES) : undefined;
}

/** Evaluates a CommonJS file and returns its exports, compiled from its code cache when that fits and V8 accepts it. */
export function loadWithCodeCache(file: string): { exports: unknown; cache: CodeCacheUse } {
  const source = readFileSync(file, 'utf8');
  const cachedData = cacheFor(file, source);
  const script = compile(file, source, cachedData);
  const exports = evaluate(script, file);
  return { exports, cache: cachedData === undefined ? 'absent' : script.cachedDataRejected === true ? 'rejected' : 'accepted' };
}

/**
 * Build step: evaluates the file (its modules' top level: what every worker
 * runs) and writes the code V8 compiled for it so far, after the source's
 * digest. Run it in a fresh Node without flags, as a worker is started: V8
 * rejects a cache made under other flags.
 */
export function writeCodeCache(file: string): number {
  const source = readFileSync(file, 'utf8');
  const script = compile(file, source);
  evaluate(script, file);
  const data = script.createCachedData();
  writeFileSync(codeCacheOf(file), Buffer.concat([digestOf(source), data]));
  return data.length;
}
