/**
 * A sandboxed turn's private folders are made before its worker is forked
 * (runner.ts spawnTurnWorker); when the fork itself fails, the folders go
 * with it, so a failed start leaves nothing in the private temp root.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { privateTmpRoot } from '../../../../src/sandbox/turn-paths.js';
import { emptyConfinedTurn, startWorker } from '../../../../src/worker/parent/runner.js';
import { baseSpec, newTag } from '../../../support/wire-harness.js';

const home = mkdtempSync(join(tmpdir(), 'spawn-failure-home-'));
afterAll(() => rmSync(home, { recursive: true, force: true }));

describe('a worker that cannot be forked', () => {
  it('throws, and leaves none of the turn folders it made', async () => {
    const spec = baseSpec(newTag(), { HOME: home }, { sandbox: { mode: 'bwrap', bwrapPath: '/usr/bin/bwrap', hiddenDirs: [], hiddenFiles: [] } });
    // An environment value with a NUL byte: the fork refuses it synchronously.
    expect(() => startWorker(spec, { env: { PATH: process.env.PATH ?? '', BAD: 'a\0b' } })).toThrow();
    // The folders are removed off the event loop (their dispose is asynchronous).
    await new Promise((r) => setTimeout(r, 200));
    expect(existsSync(join(privateTmpRoot(), `sessions-${spec.runId}`))).toBe(false);
    expect(existsSync(join(privateTmpRoot(), `turn-${spec.runId}`))).toBe(false);
  });

  it('folders that cannot all be made are gone by the time it throws: nothing is left for a kill to strand', () => {
    const spec = baseSpec(newTag(), { HOME: home }, { sandbox: { mode: 'bwrap', bwrapPath: '/usr/bin/bwrap', hiddenDirs: [], hiddenFiles: [] } });
    // The turn's TMPDIR is already there (made exclusively): the sessions copy was made first.
    const turnTmp = join(privateTmpRoot(), `turn-${spec.runId}`);
    mkdirSync(turnTmp);
    try {
      expect(() => emptyConfinedTurn(spec)).toThrow(/EEXIST/);
      expect(existsSync(join(privateTmpRoot(), `sessions-${spec.runId}`))).toBe(false);
    } finally {
      rmSync(turnTmp, { recursive: true, force: true });
    }
  });
});
