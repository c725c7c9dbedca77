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
import { REPO_ROOT, WORKER_ENTRY } from '../../../support/paths.js';

const LOADER = join(REPO_ROOT, 'dist/src/worker/child/load-worker.js');
const dir = mkdtempSync(join(tmpdir(), 'load-worker-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Runs `body` in a fresh Node with only `nodeFlags` (none: as the runner forks a worker), `loader` bound to load-worker.ts; its stdout. */
function freshNode(body: string, nodeFlags: string[] = []): string {
  const code = `const loader = await import(${JSON.stringify(LOADER)}); ${body}`;
  return execFileSync(process.execPath, [...nodeFlags, '--input-type=module', '-e', code], { encoding: 'utf8', env: { PATH: process.env.PATH ?? '' } });
}

/** How V8 took `file`'s cache, and one export's type. */
function loadFresh(file: string, exportName: string): { cache: string; exported: string } {
  const body = `const { exports, cache } = loader.loadWithCodeCache(${JSON.stringify(file)});
    process.stdout.write(JSON.stringify({ cache, exported: typeof exports[${JSON.stringify(exportName)}] }));`;
  return JSON.parse(freshNode(body)) as { cache: string; exported: string };
}

const writeCacheFresh = (file: string, nodeFlags: string[] = []) => freshNode(`loader.writeCodeCache(${JSON.stringify(file)});`, nodeFlags);

describe('worker code cache', () => {
  it("the build's cache for the worker bundle is accepted by a fresh Node", () => {
    expect(loadFresh(join(dirname(WORKER_ENTRY), 'worker.cjs'), 'runWorker')).toEqual({ cache: 'accepted', exported: 'function' });
  });

  it('both bundles run in strict mode, as the ES modules they are made of', () => {
    // A directive counts only as the first statement: esbuild's own comes after the banner.
    for (const name of ['main.cjs', 'worker.cjs']) expect(readFileSync(join(dirname(WORKER_ENTRY), name), 'utf8').startsWith("'use strict';")).toBe(true);
  });

  it('a cache made for the file is accepted; one for other code, damaged, refused by V8 or missing is not used and the file still loads', () => {
    const file = join(dir, 'module.cjs');
    // Big enough that damaged data would reach V8's deserializer (it aborted the process, unchecked).
    const body = Array.from({ length: 300 }, (_, i) => `exports.f${i} = function f${i}(x) { return [x, ${i}, 'v${i}'].join('-'); };`).join('\n');
    writeFileSync(file, `${body}\nexports.answer = function answer() { return 42; };\n`);
    expect(loadFresh(file, 'answer')).toEqual({ cache: 'absent', exported: 'function' });
    writeCacheFresh(file);
    expect(loadFresh(file, 'answer')).toEqual({ cache: 'accepted', exported: 'function' });
    const made = readFileSync(`${file}.cache`);

    // Damaged data under a header for this code: never handed to V8.
    const damaged = Buffer.from(made);
    for (let i = 64 + Math.floor((made.length - 64) / 2); i < Math.min(made.length, 64 + Math.floor((made.length - 64) / 2) + 400); i++) damaged[i] ^= 0x5a;
    writeFileSync(`${file}.cache`, damaged);
    expect(loadFresh(file, 'answer')).toEqual({ cache: 'absent', exported: 'function' });

    // Same length, other code: V8 alone would run the old code for it.
    writeFileSync(`${file}.cache`, made);
    writeFileSync(file, `${body}\nexports.answer = function answer() { return 43; };\n`);
    expect(loadFresh(file, 'answer')).toEqual({ cache: 'absent', exported: 'function' });
    expect(freshNode(`process.stdout.write(String(loader.loadWithCodeCache(${JSON.stringify(file)}).exports.answer()));`)).toBe('43');

    // Whole and for this code, but made under other V8 flags: V8 refuses it.
    writeCacheFresh(file, ['--no-lazy-feedback-allocation', '--stack-size=900']);
    expect(loadFresh(file, 'answer')).toEqual({ cache: 'rejected', exported: 'function' });

    rmSync(`${file}.cache`);
    expect(loadFresh(file, 'answer')).toEqual({ cache: 'absent', exported: 'function' });
  });
});
