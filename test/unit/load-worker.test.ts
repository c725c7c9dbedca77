/**
 * The worker bundle's code cache (worker/child/load-worker.ts): the build's
 * cache is one a freshly forked worker's V8 accepts, and a cache that does
 * not fit (garbage, another source) or is missing still loads the module.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { REPO_ROOT, WORKER_ENTRY } from '../support/paths.js';

const LOADER = join(REPO_ROOT, 'dist/src/worker/child/load-worker.js');
const dir = mkdtempSync(join(tmpdir(), 'load-worker-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Loads `file` in a fresh Node with no flags, as the runner forks a worker: how V8 took the cache, and one export's type. */
function loadFresh(file: string, exportName: string): { cache: string; exported: string } {
  const code = `const { loadWithCodeCache } = await import(${JSON.stringify(LOADER)});
    const { exports, cache } = loadWithCodeCache(${JSON.stringify(file)});
    process.stdout.write(JSON.stringify({ cache, exported: typeof exports[${JSON.stringify(exportName)}] }));`;
  return JSON.parse(execFileSync(process.execPath, ['--input-type=module', '-e', code], { encoding: 'utf8', env: { PATH: process.env.PATH ?? '' } })) as { cache: string; exported: string };
}

function writeCacheFresh(file: string): void {
  execFileSync(process.execPath, ['--input-type=module', '-e', `(await import(${JSON.stringify(LOADER)})).writeCodeCache(${JSON.stringify(file)})`], { env: { PATH: process.env.PATH ?? '' } });
}

describe('worker code cache', () => {
  it("the build's cache for the worker bundle is accepted by a fresh Node", () => {
    expect(loadFresh(join(dirname(WORKER_ENTRY), 'worker.cjs'), 'runWorker')).toEqual({ cache: 'accepted', exported: 'function' });
  });

  it('both bundles run in strict mode, as the ES modules they are made of', () => {
    // A directive counts only as the first statement: esbuild's own comes after the banner.
    for (const name of ['main.cjs', 'worker.cjs']) expect(readFileSync(join(dirname(WORKER_ENTRY), name), 'utf8').startsWith("'use strict';")).toBe(true);
  });

  it('a cache made for the file is accepted; one made for another source is not used; garbage or none still loads it', () => {
    const file = join(dir, 'module.cjs');
    writeFileSync(file, 'exports.answer = function answer() { return 42; };\n');
    expect(loadFresh(file, 'answer')).toEqual({ cache: 'absent', exported: 'function' });
    writeCacheFresh(file);
    expect(loadFresh(file, 'answer')).toEqual({ cache: 'accepted', exported: 'function' });
    // Same length: V8 alone would take the old code for it.
    writeFileSync(file, 'exports.answer = function answer() { return 43; };\n');
    expect(loadFresh(file, 'answer')).toEqual({ cache: 'absent', exported: 'function' });
    const answer = `process.stdout.write(String((await import(${JSON.stringify(LOADER)})).loadWithCodeCache(${JSON.stringify(file)}).exports.answer()))`;
    expect(execFileSync(process.execPath, ['--input-type=module', '-e', answer], { encoding: 'utf8' })).toBe('43');
    // Made for this source, but not V8's: V8 refuses it.
    writeCacheFresh(file);
    const made = readFileSync(`${file}.cache`);
    writeFileSync(`${file}.cache`, Buffer.concat([made.subarray(0, 32), Buffer.alloc(4096, 7)]));
    expect(loadFresh(file, 'answer')).toEqual({ cache: 'rejected', exported: 'function' });
    rmSync(`${file}.cache`);
    expect(loadFresh(file, 'answer')).toEqual({ cache: 'absent', exported: 'function' });
  });
});
