/**
 * Disk errors at every write and sync call the store makes. For each
 * operation, a clean run lists the calls it makes through the StoreFs seam;
 * then, on a fresh fixture each time, each call in turn fails with ENOSPC,
 * EIO and EACCES (a failing write lands half its bytes first, as a full disk
 * does). Every time:
 *   - the operation is rejected with state_write_failed, naming the errno,
 *     with an action;
 *   - no corrupt state results: the real directory, and what a crash right
 *     after the failure would leave (store-crash-fs.ts), both open, holding
 *     the old state (or, where the error says it may have been stored, the
 *     old or the new);
 *   - the store keeps serving: the same write succeeds afterwards, durably.
 * When a failed journal append cannot be cut back, the store must instead
 * refuse every further write, and start-up must clean up after it.
 */
import { appendFile, cp, readdir, readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { StoreError } from '../../../src/store/errors.js';
import type { RunResultFile } from '../../../src/shared/records.js';
import { STATE_FILE } from '../../../src/store/formats/snapshot.js';
import type { StateStore } from '../../../src/store/store.js';
import { exists } from '../../../src/util/exists.js';
import { CrashFs, unsyncedFs } from './store-crash-fs.js';
import {
  capture,
  contents,
  ERRNOS,
  expectWriteFailed,
  IMAGE_KINDS,
  imageContents,
  inImage,
  openStore,
  rejectionOf,
  removeTemps,
  result,
  run,
  step,
  tempBase,
  type Contents,
  type Logged,
} from './store-fixtures.js';

afterEach(removeTemps);

/** The calls of a run index write: a temp file written, fsynced, closed, renamed into place, then its directory fsynced. */
const INDEX_WRITE = [
  'open state/.state.index.<tmp> wx',
  'write state/.state.index.<tmp>',
  'sync state/.state.index.<tmp>',
  'close state/.state.index.<tmp>',
  'rename state/.state.index.<tmp> -> state/state.index',
  'syncDir state',
];

/** Positions in `calls` of the calls of run index writes. */
function indexWrites(calls: string[]): Set<number> {
  const at = new Set<number>();
  calls.forEach((call, i) => {
    if (call === INDEX_WRITE[0] && INDEX_WRITE.every((c, j) => calls[i + j] === c)) for (let j = 0; j < INDEX_WRITE.length; j++) at.add(i + j);
  });
  return at;
}

interface Fixture {
  fs: CrashFs;
  store: StateStore;
  dir: string;
  logged: Logged[];
  /** Contents once the fixture is set up. */
  before: Contents;
}

/** An open store over a CrashFs, after `setup`. */
async function fixture(setup: (store: StateStore) => Promise<void>, opts: { compactMinLines?: number } = {}): Promise<Fixture> {
  const root = await tempBase();
  const fs = await CrashFs.over(root);
  const dir = join(root, 'state');
  const { log, logged } = capture();
  const store = await openStore(dir, { fs, logger: log, ...opts });
  await setup(store);
  return { fs, store, dir, logged, before: contents(store) };
}

/** The calls a clean run of `op` makes after `make` set up its fixture. */
async function callsOf<F extends { fs: CrashFs }>(make: () => Promise<F>, op: (f: F) => Promise<unknown>, done: (f: F) => Promise<void>): Promise<string[]> {
  const f = await make();
  const from = f.fs.calls.length;
  await op(f);
  const calls = f.fs.callsSince(from);
  await done(f);
  expect(calls.length).toBeGreaterThan(0);
  return calls;
}

/**
 * Each call of `calls` failing in turn: with each errno, or with one errno
 * per call in rotation (`rotate`) where every call is a full start-up and the
 * errno changes only the wording, which the write tests cover with all three.
 */
function cases(calls: string[], rotate = false): Array<{ n: number; call: string; errno: string; where: string }> {
  return calls.flatMap((call, n) =>
    (rotate ? [ERRNOS[n % ERRNOS.length]!] : ERRNOS).map((errno) => ({ n, call, errno, where: `${errno} at call ${n} (${call})` })),
  );
}

async function expectImages(fs: CrashFs, allowed: Contents[], where: string): Promise<void> {
  for (const kind of IMAGE_KINDS) expect(allowed, `${where}: the ${kind} crash image`).toContainEqual(await imageContents(fs, kind));
}

/** What a start-up of `dir` finds (without fsyncs: only what it reads matters here). */
async function reopened(dir: string): Promise<Contents> {
  const store = await openStore(dir, { fs: unsyncedFs });
  try {
    return contents(store);
  } finally {
    await store.close();
  }
}

async function tempFiles(dir: string): Promise<string[]> {
  const names = [...(await readdir(dir)), ...(await readdir(join(dir, 'results')).catch(() => []))];
  return names.filter((n) => n.endsWith('.tmp'));
}

describe('a disk error at every call of a write', () => {
  it('commit: rejected, durably absent (a partial line is cut back and synced), and the store keeps serving', async () => {
    const make = (): Promise<Fixture> => fixture((s) => s.commit(step(1)));
    const calls = await callsOf(
      make,
      (f) => f.store.commit(step(2)),
      (f) => f.store.close(),
    );
    expect(calls).toEqual(['write state/journal.jsonl', 'datasync state/journal.jsonl']);
    for (const { n, errno, where } of cases(calls)) {
      const f = await make();
      f.fs.failAt(n, errno);
      const err = expectWriteFailed(await rejectionOf(f.store.commit(step(2))), errno);
      expect(err.message, where).toContain('appending commit 2 to');
      expect(err.action, where).toMatch(/^Nothing was stored\. /);
      f.fs.fault = undefined;
      expect(contents(f.store), where).toEqual(f.before);
      await expectImages(f.fs, [f.before], where);

      await f.store.commit(step(2));
      const after = contents(f.store);
      expect(after.runs.map((r) => r.id)).toEqual(['r1', 'r2']);
      await expectImages(f.fs, [after], `${where}, then committed again`);
      await f.store.close();
      expect(await reopened(f.dir), where).toEqual(after);
    }
  });

  it('writeResult: rejected, the old result (or, failing after the rename, old or new) in place, no temp file left', async () => {
    const first = result('r1', 'first');
    const second = result('r1', 'second');
    const make = (): Promise<Fixture> =>
      fixture(async (s) => {
        await s.commit(step(1));
        await s.writeResult(first);
      });
    const calls = await callsOf(
      make,
      (f) => f.store.writeResult(second),
      (f) => f.store.close(),
    );
    expect(calls.at(-1)).toBe('syncDir state/results');
    const readAll = async (f: Fixture): Promise<Array<RunResultFile | undefined>> => {
      const seen = [await f.store.readResult('r1')];
      for (const kind of IMAGE_KINDS) seen.push(await inImage(f.fs, kind, (s) => s.readResult('r1')));
      return seen;
    };
    for (const { call, n, errno, where } of cases(calls)) {
      const f = await make();
      f.fs.failAt(n, errno);
      const err = expectWriteFailed(await rejectionOf(f.store.writeResult(second)), errno);
      f.fs.fault = undefined;
      const afterRename = call.startsWith('syncDir');
      expect(err.action, where).toMatch(afterRename ? /^It may or may not have been stored/ : /^Nothing was stored\. /);
      for (const seen of await readAll(f)) expect(afterRename ? [first, second] : [first], where).toContainEqual(seen);
      expect(await tempFiles(f.dir), where).toEqual([]);

      await f.store.writeResult(second);
      expect(await readAll(f), `${where}, then written again`).toEqual([second, second, second]);
      await f.store.commit(step(2));
      await f.store.close();
    }
  });

  it('compaction after a commit: the commit stands, the failure is logged, the state stays whole, and compaction is retried', async () => {
    const update = (preview: string): { runs: ReturnType<typeof run>[] } => ({ runs: [run('r1', 's1', 1, { preview })] });
    const make = (): Promise<Fixture> =>
      fixture(
        async (s) => {
          await s.commit(step(1));
          await s.commit(update('a'));
        },
        { compactMinLines: 0 },
      );
    // The third line queues a compaction; the next commit waits for it, and may queue another.
    const op = async (f: Fixture): Promise<void> => {
      await f.store.commit(update('b'));
      await f.store.commit(update('c'));
      await f.store.commit({}); // changes nothing, but resolves only after what was queued before it
    };
    const all = await callsOf(make, op, (f) => f.store.close());
    const calls = all.slice(2, all.lastIndexOf('write state/journal.jsonl'));
    expect(calls).toContain('rename state/.state.jsonl.<tmp> -> state/state.jsonl');
    // The snapshot and the emptied journal, then the run index: a cache whose failure is only logged.
    const emptied = calls.indexOf('datasync state/journal.jsonl');
    expect(calls.slice(emptied + 1)).toEqual(INDEX_WRITE);
    for (const { n, errno, where } of cases(calls)) {
      const f = await make();
      f.fs.failAt(2 + n, errno);
      await op(f);
      f.fs.fault = undefined;
      const failure = f.logged.find((l) => l.msg === 'state compaction failed; will retry later');
      const indexFailure = f.logged.find((l) => l.msg.includes('state.index not written'));
      if (n > emptied) {
        expect(failure, where).toBeUndefined();
        expect(indexFailure, where).toBeDefined();
        expectWriteFailed(indexFailure!.obj.err, errno);
      } else {
        expect(failure, where).toBeDefined();
        expectWriteFailed(failure!.obj.err, errno);
      }
      const after = contents(f.store);
      expect(after.runs[0]?.preview).toBe('c');
      await expectImages(f.fs, [after], where);

      // Unless the journal was emptied before the failure, commit 'c' found it still over the bound and compacted again.
      const header = JSON.parse((await readFile(join(f.dir, STATE_FILE), 'utf8')).split('\n')[0]!);
      const journalLines = (await readFile(join(f.dir, 'journal.jsonl'), 'utf8')).split('\n').filter(Boolean).length;
      expect([header.seq, journalLines], where).toEqual(n >= emptied ? [3, 1] : [4, 0]);
      await f.store.commit(update('d'));
      const final = contents(f.store);
      await f.store.close();
      expect(await reopened(f.dir), where).toEqual(final);
    }
  });
});

describe('a disk error at every call of start-up', () => {
  interface Startup {
    fs: CrashFs;
    dir: string;
  }

  /**
   * Fails each call of a start-up of the state directory `seed` makes (seeded
   * once without CrashFs, then copied for every case), then runs `after`.
   */
  async function runAll(seed: (dir: string) => Promise<void>, after: (s: Startup, where: string) => Promise<void>): Promise<void> {
    const template = join(await tempBase(), 'state');
    await seed(template);
    const before = await reopened(await copyOf(template));
    const startup = async (): Promise<Startup> => {
      const dir = await copyOf(template);
      return { fs: await CrashFs.over(dirname(dir)), dir };
    };
    let opened: StateStore | undefined;
    const calls = await callsOf(
      startup,
      async (s) => (opened = await openStore(s.dir, { fs: s.fs })),
      () => opened!.close(),
    );
    const cache = indexWrites(calls);
    expect([0, INDEX_WRITE.length], 'start-up writes the run index at most once').toContain(cache.size);
    for (const { n, errno, where } of cases(calls, true)) {
      const s = await startup();
      s.fs.failAt(n, errno);
      if (cache.has(n)) {
        // The run index is a cache: failing to write it is logged and start-up goes on.
        const { log, logged } = capture();
        const store = await openStore(s.dir, { fs: s.fs, logger: log });
        expect(contents(store), where).toEqual(before);
        await store.close();
        expect(
          logged.map((l) => l.msg),
          where,
        ).toContainEqual(expect.stringContaining('state.index not written'));
      } else {
        expectWriteFailed(await rejectionOf(openStore(s.dir, { fs: s.fs })), errno);
      }
      s.fs.fault = undefined;
      await expectImages(s.fs, [before], where);
      await after(s, where);
      // Nothing is left locked or half-done: a plain start-up now succeeds with the same state.
      expect(await reopened(s.dir), where).toEqual(before);
      expect(await tempFiles(s.dir), where).toEqual([]);
    }
  }

  /** A copy of the state directory `dir` (or, if it was never made, a path where none exists yet). */
  async function copyOf(dir: string): Promise<string> {
    const copy = join(await tempBase(), 'state');
    if (await exists(dir)) await cp(dir, copy, { recursive: true });
    return copy;
  }

  it('of a directory whose journal it compacts', async () => {
    await runAll(
      async (dir) => {
        const store = await openStore(dir);
        for (let i = 1; i <= 3; i++) await store.commit(step(i));
        await store.close();
      },
      async () => undefined,
    );
  });

  it('of a new state directory', async () => {
    await runAll(
      async () => undefined,
      async () => undefined,
    );
  });

  it('of a directory whose journal ends in a torn line: the torn bytes are never lost', async () => {
    const torn = Buffer.from('{"seq":2,"sessions":[],"runs":[{"id":"r2"'.padEnd(6000, 'x'));
    await runAll(
      async (dir) => {
        const store = await openStore(dir);
        await store.commit(step(1));
        await store.close();
        await (await openStore(dir)).close(); // journal folded into the snapshot: empty
        await appendFile(join(dir, 'journal.jsonl'), torn);
      },
      async (s, where) => {
        const journal = await readFile(join(s.dir, 'journal.jsonl'));
        const copies = (await readdir(s.dir)).filter((n) => n.startsWith('journal.torn-'));
        const kept = await Promise.all(copies.map((n) => readFile(join(s.dir, n))));
        expect(journal.equals(torn) || kept.some((k) => k.equals(torn)), where).toBe(true);
      },
    );
  });
});

describe('a failed journal append that cannot be cut back', () => {
  const refusesFurtherWrites = async (store: StateStore): Promise<void> => {
    for (const write of [() => store.commit(step(3)), () => store.writeResult(result('r1', 'later'))]) {
      const err = (await rejectionOf(write())) as StoreError;
      expect(err.code).toBe('state_write_failed');
      expect(err.message).toMatch(
        /^the store stopped writing: appending commit 2 to .* failed \(.*\) and cutting the journal back to its last commit failed too/,
      );
      expect(err.action).toMatch(/^Restart the controller once the disk is fixed/);
    }
  };

  it('with a partial line on disk: the store refuses further writes, and start-up drops the partial line', async () => {
    const f = await fixture((s) => s.commit(step(1)));
    f.fs.failAt(0, 'ENOSPC', true); // the disk stays full: the write lands half, the cut-back fails too
    const err = expectWriteFailed(await rejectionOf(f.store.commit(step(2))), 'ENOSPC');
    expect(err.action).toMatch(/^The commit may or may not be on disk\. Restart the controller/);
    f.fs.fault = undefined;
    await refusesFurtherWrites(f.store);
    expect(f.logged.map((l) => l.msg)).toContain('journal could not be restored after a failed write; the store refuses further writes');
    await expectImages(f.fs, [f.before], 'after the failure');
    await f.store.close();

    const journal = await readFile(join(f.dir, 'journal.jsonl'), 'utf8');
    expect(journal.endsWith('\n')).toBe(false);
    const { log, logged } = capture();
    const store = await openStore(f.dir, { logger: log });
    expect(contents(store)).toEqual(f.before);
    expect(logged.map((l) => l.msg)).toEqual([expect.stringMatching(/^dropped an incomplete last journal line/)]);
    await store.commit(step(2));
    await store.close();
  });

  it('with the whole line on disk but not synced: the store refuses further writes, and start-up may show the commit', async () => {
    const f = await fixture((s) => s.commit(step(1)));
    f.fs.failAt(1, 'EIO', true); // the write lands; fdatasync and the cut-back fail
    expectWriteFailed(await rejectionOf(f.store.commit(step(2))), 'EIO');
    f.fs.fault = undefined;
    await refusesFurtherWrites(f.store);
    await f.store.close();
    const withCommit = await fixture(async (s) => {
      await s.commit(step(1));
      await s.commit(step(2));
    });
    await withCommit.store.close();
    // Old or new, never a mix: here the line was complete, so the commit is there.
    expect(await reopened(f.dir)).toEqual(withCommit.before);
  });
});
