/**
 * Dropping a torn last journal line (see `TornTail` in journal.ts) at start-up,
 * so an operator never has to hand-edit the journal after a crash. The bytes
 * are kept beside the state in `journal.torn-<time>` (mode 600) before the
 * journal is cut, so nothing is destroyed: a crash at any point leaves either
 * the torn line in the journal, or the copy and a journal without it.
 */
import { open, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { writeFileAtomic } from './atomic.js';
import { StoreError, writeFailure } from '../errors.js';
import type { StoreFileHandle, StoreFs } from './fs.js';
import { JOURNAL_FILE, type TornTail } from './journal.js';
import type { Log } from '../../util/logger.js';
import { errCode } from '../../util/errno.js';

const TORN_PREFIX = 'journal.torn-';

export interface DropTornTail {
  dir: string;
  /** The journal, open for appending (truncate works on it). */
  journal: StoreFileHandle;
  tail: TornTail;
  now: () => Date;
  logger: Log;
  fs: StoreFs;
}

/** Copies the torn bytes aside, then cuts them off the journal, both durably. Returns the copy's path. */
export async function dropTornTail({ dir, journal, tail, now, logger, fs }: DropTornTail): Promise<string> {
  const journalPath = join(dir, JOURNAL_FILE);
  const bytes = await readTail(journalPath, tail);
  const copy = await freeName(join(dir, TORN_PREFIX + now().toISOString().replaceAll(':', '-')));
  // writeFileAtomic syncs the copy and its directory entry before we touch the journal.
  await writeFileAtomic(copy, bytes, fs);
  try {
    await journal.truncate(tail.offset);
    await journal.datasync();
  } catch (err) {
    // The journal still ends in the torn line, which the next start-up drops again.
    throw writeFailure(err, `cutting the incomplete last line off ${journalPath}`, dir, 'unchanged');
  }
  logger.warn(
    { journal: journalPath, line: tail.line, bytes: tail.bytes, copy },
    'dropped an incomplete last journal line (a write cut short by a crash, never acknowledged); its bytes are kept in the copy',
  );
  return copy;
}

/** The torn bytes, checking that the journal is still exactly as loaded. */
async function readTail(path: string, tail: TornTail): Promise<Buffer> {
  const file = await open(path, 'r');
  try {
    const { size } = await file.stat();
    if (size !== tail.offset + tail.bytes) {
      throw new StoreError(
        'state_corrupt',
        `${path} changed while the controller was starting (${size} bytes, expected ${tail.offset + tail.bytes})`,
        'Make sure no other process writes to the state directory, then start again',
      );
    }
    const bytes = Buffer.alloc(tail.bytes);
    let read = 0;
    while (read < tail.bytes) {
      const { bytesRead } = await file.read(bytes, read, tail.bytes - read, tail.offset + read);
      if (bytesRead === 0) throw new Error(`${path} ended before its torn line was read`);
      read += bytesRead;
    }
    return bytes;
  } finally {
    await file.close();
  }
}

/** `base`, or `base.1`, `base.2`, … if taken: an earlier copy is never replaced. */
async function freeName(base: string): Promise<string> {
  for (let i = 0; ; i++) {
    const name = i === 0 ? base : `${base}.${i}`;
    try {
      await stat(name);
    } catch (err) {
      if (errCode(err) === 'ENOENT') return name;
      throw err;
    }
  }
}
