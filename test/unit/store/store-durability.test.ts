/**
 * What a crash leaves, at every step of every kind of store write. Each test
 * runs one operation through CrashFs (store-crash-fs.ts), takes a crash image
 * after every file-system call and after the operation settles, and opens
 * each image as a fresh store: before the operation is acknowledged an image
 * may hold the old state or the new, never anything else; once it is
 * acknowledged, every image must hold the new. A missing file fsync, a
 * missing directory fsync, or a step done in the wrong order turns some
 * image wrong.
 */
import { appendFile, readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { STATE_FILE } from '../../../src/store/formats/snapshot.js';
import type { StateStore } from '../../../src/store/store.js';
import { CrashFs } from './store-crash-fs.js';
import { atEveryCrashPoint, contents, openImage, openStore, removeTemps, result, run, step, tempBase, type Contents } from './store-fixtures.js';

afterEach(removeTemps);

/** A store over a CrashFs rooted at a new temp folder; the state directory is `<root>/state`. */
async function crashStore(opts: { compactMinLines?: number } = {}): Promise<{ fs: CrashFs; store: StateStore; dir: string }> {
  const root = await tempBase();
  const fs = await CrashFs.over(root);
  const dir = join(root, 'state');
  const store = await openStore(dir, { fs, ...opts });
  return { fs, store, dir };
}

/** Asserts the image holds one of `allowed` (the last one once the operation settled). */
async function expectState(image: { kind: string; dir: string; settled: boolean; after: string }, allowed: Contents[]): Promise<void> {
  const got = await openImage(image, async (store) => contents(store)).catch((err: unknown) => {
    throw new Error(`the ${image.kind} image after ${image.after} does not load: ${String(err)}`);
  });
  const ok = image.settled ? [allowed.at(-1)] : allowed;
  expect(ok, `the ${image.kind} image after ${image.after}`).toContainEqual(got);
}

describe('durability at every crash point', () => {
  it('a commit: once it resolves its line is fdatasynced; before that, the old state', async () => {
    const { fs, store } = await crashStore();
    await store.commit(step(1));
    const before = contents(store);
    const from = fs.calls.length;
    await atEveryCrashPoint(
      fs,
      () => store.commit(step(2)),
      async (image) => expectState(image, [before, contents(store)]),
    );
    expect(fs.callsSince(from)).toEqual(['write state/journal.jsonl', 'datasync state/journal.jsonl']);
    await store.close();
  });

  it('a result file: temp file written, fsynced, closed, renamed into place, then its directory fsynced', async () => {
    const { fs, store } = await crashStore();
    await store.commit(step(1));
    await store.writeResult(result('r1', 'first'));
    const from = fs.calls.length;
    await atEveryCrashPoint(
      fs,
      () => store.writeResult(result('r1', 'second')),
      async (image) => {
        const got = await openImage(image, (s) => s.readResult('r1'));
        expect(
          image.settled ? [result('r1', 'second')] : [result('r1', 'first'), result('r1', 'second')],
          `the ${image.kind} image after ${image.after}`,
        ).toContainEqual(got);
      },
    );
    expect(fs.callsSince(from)).toEqual([
      'open state/results/.r1.json.<tmp> wx',
      'write state/results/.r1.json.<tmp>',
      'sync state/results/.r1.json.<tmp>',
      'close state/results/.r1.json.<tmp>',
      'rename state/results/.r1.json.<tmp> -> state/results/r1.json',
      'syncDir state/results',
    ]);
    await store.close();
  });

  it('compaction: the snapshot is durable (file, then directory) before the journal is emptied', async () => {
    // Compaction follows a commit once the journal has more lines than both this and the record count.
    const { fs, store } = await crashStore({ compactMinLines: 0 });
    await store.commit(step(1)); // two records
    await store.commit({ runs: [run('r1', 's1', 1, { preview: 'a' })] });
    const states = [contents(store)];
    const from = fs.calls.length;
    await atEveryCrashPoint(
      fs,
      async () => {
        await store.commit({ runs: [run('r1', 's1', 1, { preview: 'b' })] }); // the third line: compaction is queued
        states.push(contents(store));
        await store.commit({ runs: [run('r1', 's1', 1, { preview: 'c' })] }); // waits for it
        states.push(contents(store));
      },
      async (image) => expectState(image, states),
    );
    const calls = fs.callsSince(from);
    const at = (call: string): number => {
      expect(calls).toContain(call);
      return calls.indexOf(call);
    };
    const rename = at('rename state/.state.jsonl.<tmp> -> state/state.jsonl');
    expect(at('sync state/.state.jsonl.<tmp>')).toBeLessThan(rename);
    const dirSync = calls.indexOf('syncDir state', rename);
    expect(dirSync).toBeGreaterThan(rename);
    const truncate = at('truncate state/journal.jsonl');
    expect(truncate).toBeGreaterThan(dirSync);
    expect(calls.indexOf('datasync state/journal.jsonl', truncate)).toBeGreaterThan(truncate);
    const header = JSON.parse((await readFile(join(fs.root, 'state', STATE_FILE), 'utf8')).split('\n')[0]!);
    expect(header.seq).toBe(3);
    await store.close();
  });

  it('start-up compaction of a journal left by an earlier run', async () => {
    const root = await tempBase();
    const dir = join(root, 'state');
    const first = await openStore(dir);
    for (let n = 1; n <= 3; n++) await first.commit(step(n));
    const state = contents(first);
    await first.close();
    const fs = await CrashFs.over(root);
    let store: StateStore | undefined;
    await atEveryCrashPoint(
      fs,
      async () => (store = await openStore(dir, { fs })),
      async (image) => expectState(image, [state]),
    );
    expect(fs.callsSince(0)).toContain('truncate state/journal.jsonl');
    await store!.close();
  });

  it('a new state directory: it and each parent created are durable once open resolves, as are the journal and results names', async () => {
    const root = await tempBase();
    const fs = await CrashFs.over(root);
    const rel = join('a', 'b', 'state');
    const dir = join(root, rel);
    let store: StateStore | undefined;
    await atEveryCrashPoint(
      fs,
      async () => (store = await openStore(dir, { fs })),
      async (image) => {
        // Nothing was there before, so a crash may lose any step; but only once open resolves is all of it durable.
        if (image.settled) {
          expect(await readdir(join(image.dir, rel)), `the ${image.kind} image`).toEqual(
            expect.arrayContaining(['journal.jsonl', 'owner.json', 'results', STATE_FILE]),
          );
        }
        await openImage(image, async (s) => expect(s.runs.size).toBe(0), rel);
      },
    );
    expect(fs.callsSince(0).filter((c) => c.startsWith('syncDir'))).toEqual(
      expect.arrayContaining(['syncDir .', 'syncDir a', 'syncDir a/b', 'syncDir a/b/state']),
    );
    // The journal's name must be durable too, or commits fdatasynced into it could vanish with it.
    const before = contents(store!);
    await atEveryCrashPoint(
      fs,
      () => store!.commit(step(1)),
      async (image) => {
        const got = await openImage(image, async (s) => contents(s), rel);
        expect(image.settled ? [contents(store!)] : [before, contents(store!)]).toContainEqual(got);
      },
    );
    await store!.close();
  });

  it('a torn last line: copied aside durably before the journal is cut, and the cut is synced', async () => {
    const root = await tempBase();
    const dir = join(root, 'state');
    const first = await openStore(dir);
    await first.commit(step(1));
    const state = contents(first);
    await first.close();
    await (await openStore(dir)).close(); // compacts: the journal is empty
    const torn = Buffer.from(JSON.stringify({ seq: 2, sessions: [], runs: [] }).slice(0, -5).padEnd(9000, ' '));
    await appendFile(join(dir, 'journal.jsonl'), torn);

    const fs = await CrashFs.over(root);
    let store: StateStore | undefined;
    await atEveryCrashPoint(
      fs,
      async () => (store = await openStore(dir, { fs })),
      async (image) => {
        const where = `the ${image.kind} image after ${image.after}`;
        const imageDir = join(image.dir, 'state');
        const journal = await readFile(join(imageDir, 'journal.jsonl'));
        const copies = (await readdir(imageDir)).filter((n) => n.startsWith('journal.torn-'));
        const kept = await Promise.all(copies.map((n) => readFile(join(imageDir, n))));
        // The torn bytes are never lost: still in the journal, or in a complete copy.
        expect(journal.equals(torn) || kept.some((k) => k.equals(torn)), where).toBe(true);
        if (image.settled) {
          expect(journal.length, where).toBe(0);
          expect(copies, where).toHaveLength(1);
        }
        // Whatever the step, the image opens to the state before the torn line.
        await openImage(image, async (s) => expect(contents(s), where).toEqual(state));
      },
    );
    await store!.close();
  });
});
