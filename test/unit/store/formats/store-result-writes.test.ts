/**
 * A results file is a file of its own: the commits queued after it do not
 * wait for its fsyncs (issue 38: a slow result write held up every
 * acceptance behind it), while it still follows the commits queued before
 * it, and close waits for it.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, expect, it } from 'vitest';
import { nodeStoreFs, type StoreFs } from '../../../../src/store/formats/fs.js';
import { openStore, removeTemps, result, step, tempBase } from '../store-fixtures.js';

afterEach(removeTemps);

/** node:fs, but the fsync of a results temp file waits for `release`. */
function slowResultSync(): { fs: StoreFs; reached: Promise<void>; release: () => void } {
  let reach!: () => void;
  let release!: () => void;
  const reached = new Promise<void>((r) => (reach = r));
  const gate = new Promise<void>((r) => (release = r));
  const fs: StoreFs = {
    ...nodeStoreFs,
    async open(path, flags, mode) {
      const handle = await nodeStoreFs.open(path, flags, mode);
      if (!path.includes('/results/')) return handle;
      return {
        write: (buffer, offset, length) => handle.write(buffer, offset, length),
        sync: async () => {
          reach();
          await gate;
          await handle.sync();
        },
        datasync: () => handle.datasync(),
        truncate: (length) => handle.truncate(length),
        close: () => handle.close(),
      };
    },
  };
  return { fs, reached, release };
}

const within = <T>(promise: Promise<T>, ms = 5_000): Promise<T | 'held up'> => Promise.race([promise, sleep(ms).then(() => 'held up' as const)]);

it('a commit made while a result file is being fsynced does not wait for it; close does', async () => {
  const dir = `${await tempBase()}/state`;
  const slow = slowResultSync();
  const store = await openStore(dir, { fs: slow.fs });
  await store.commit(step(1));
  const writing = store.writeResult(result('r1', 'done'));
  await slow.reached;

  expect(await within(store.commit(step(2)))).toBeUndefined();
  expect(store.runs.get('r2')).toBeDefined();
  expect(await store.readResult('r1')).toBeUndefined();

  let closed = false;
  const closing = store.close().then(() => (closed = true));
  await sleep(50);
  expect(closed).toBe(false);
  slow.release();
  await writing;
  await closing;

  const again = await openStore(dir);
  expect(await again.readResult('r1')).toEqual(result('r1', 'done'));
  expect(again.runs.get('r2')).toBeDefined();
  await again.close();
});

it('a result file still follows the commit of its run queued before it', async () => {
  const dir = `${await tempBase()}/state`;
  const store = await openStore(dir);
  const committing = store.commit(step(1));
  await store.writeResult(result('r1', 'after its run'));
  await committing;
  expect(await store.readResult('r1')).toEqual(result('r1', 'after its run'));
  await store.close();
});
