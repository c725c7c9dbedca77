/**
 * The snapshot file that stubs (run-entry.ts) point into, held open after it
 * was verified, and the check that it was not written to since: its bytes
 * are read back as records (tables/run-table.ts) and copied into the next
 * snapshot (snapshot.ts) only while it is exactly what was verified.
 */
import { fstatSync, type BigIntStats } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { StoreError } from '../errors.js';
import type { RunEntry } from './run-entry.js';

/** The snapshot file stubs point into, and what it was when it was verified. */
export interface SnapshotSource {
  path: string;
  handle: FileHandle;
  /** fstat right after verification: any write to the file since changes its size, mtime or ctime. */
  stat: BigIntStats;
}

/** Refuses to read from a snapshot that was written to since it was verified. */
export function checkUnchanged(source: SnapshotSource, e?: RunEntry): void {
  let now: BigIntStats;
  try {
    now = fstatSync(source.handle.fd, { bigint: true });
  } catch (err) {
    throw unreadable(source, e, `it cannot be checked (${err instanceof Error ? err.message : String(err)})`);
  }
  const was = source.stat;
  if (!sameFile(was, now)) {
    throw unreadable(source, e, 'the file was written to after start-up checked it');
  }
}

export function unreadable(source: SnapshotSource, e: RunEntry | undefined, why: string): StoreError {
  const what = e === undefined ? `${source.path}` : `${source.path}: run ${e.id} (its line at byte ${e.offset})`;
  return new StoreError(
    'state_unreadable',
    `${what} cannot be read back: ${why}`,
    'Nothing was changed and no record was guessed. Stop every other process writing to the state directory, then restart the controller: start-up checks the whole snapshot and refuses damaged state',
  );
}

/** No write reached the file between the two stats (a write changes its size, mtime or ctime). */
export function sameFile(a: BigIntStats, b: BigIntStats): boolean {
  return a.size === b.size && a.mtimeNs === b.mtimeNs && a.ctimeNs === b.ctimeNs && a.ino === b.ino;
}
