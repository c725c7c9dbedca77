/**
 * The start-up of a store (store.ts `StateStore.open`) up to the point where
 * it can commit: checks privacy, takes ownership, validates everything, then
 * claims the directory and makes what a commit needs. Any refusal happens
 * before the first write and leaves the directory as it was; the store then
 * compacts and recovers from an unclean stop.
 */
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { FILE_MODE, TEMP_SUFFIX } from './formats/atomic.js';
import { errCode } from '../util/errno.js';
import { writeFailure } from './errors.js';
import type { StoreFileHandle, StoreFs } from './formats/fs.js';
import { JOURNAL_FILE } from './formats/journal.js';
import { writeIndexOrWarn, writeSnapshotFile } from './formats/snapshot.js';
import { dropTornTail } from './formats/torn-tail.js';
import { loadState, RESULTS_DIR, type LoadedState } from './load.js';
import { beginOwnership, type Ownership } from './owner-lock.js';
import { DIR_MODE, prepareStateDir } from './state-dir.js';
import type { Log } from '../util/logger.js';

/** A state directory this process owns, loaded, with its journal open for appending. */
interface OpenedState {
  owner: Ownership;
  journal: StoreFileHandle;
  loaded: LoadedState;
}

export async function openStateDir(dir: string, { now, logger, fs }: { now: () => Date; logger: Log; fs: StoreFs }): Promise<OpenedState> {
  /** I/O errors of start-up as `state_write_failed`; none of them changes the stored state. */
  const step = async <T>(what: string, job: () => Promise<T>): Promise<T> => {
    try {
      return await job();
    } catch (err) {
      throw writeFailure(err, what, dir, 'unchanged');
    }
  };
  await step(`preparing state directory ${dir}`, () => prepareStateDir(dir, fs));
  const pending = await step(`taking ownership of ${dir}`, () => beginOwnership(dir, { now, logger, fs }));
  let loaded;
  try {
    loaded = await loadState(dir, logger);
  } catch (err) {
    await pending.abandon();
    throw err;
  }

  // From here on the state is known good and we may write.
  let owner: Ownership;
  try {
    owner = await step(`taking ownership of ${dir}`, () => pending.claim());
  } catch (err) {
    await loaded.index.runs.close().catch(() => undefined);
    throw err;
  }
  let journal: StoreFileHandle | undefined;
  try {
    if (loaded.fresh) {
      const written = await writeSnapshotFile(dir, 0, new Map(), loaded.index.runs, fs);
      await writeIndexOrWarn(dir, written, loaded.index, fs, logger);
    }
    await step(`creating ${join(dir, RESULTS_DIR)}`, () =>
      fs.mkdir(join(dir, RESULTS_DIR), { recursive: false, mode: DIR_MODE }).catch((err: unknown) => {
        if (errCode(err) !== 'EEXIST') throw err;
        return undefined;
      }),
    );
    const journalPath = join(dir, JOURNAL_FILE);
    journal = await step(`opening ${journalPath}`, () => fs.open(journalPath, 'a', FILE_MODE));
    // Makes the journal's and results directory's names durable if they were just created.
    await step(`syncing directory ${dir}`, () => fs.syncDir(dir));
    if (loaded.tornTail) await dropTornTail({ dir, journal, tail: loaded.tornTail, now, logger, fs });
    return { owner, journal, loaded };
  } catch (err) {
    await closeOpened({ owner, journal, loaded });
    throw err;
  }
}

/** After a failed start-up: closes the journal and the snapshot, and gives up ownership; never rejects. */
export async function closeOpened({ owner, journal, loaded }: Omit<OpenedState, 'journal'> & { journal: StoreFileHandle | undefined }): Promise<void> {
  await journal?.close().catch(() => undefined);
  await loaded.index.runs.close().catch(() => undefined);
  await owner.release().catch(() => undefined);
}

/** Temp files of atomic writes interrupted by a crash; never part of the state. */
export async function removeTempFiles(dir: string, fs: StoreFs): Promise<void> {
  for (const folder of [dir, join(dir, RESULTS_DIR)]) {
    for (const name of await readdir(folder)) {
      if (name.startsWith('.') && name.endsWith(TEMP_SUFFIX)) await fs.unlink(join(folder, name)).catch(() => undefined);
    }
  }
}
