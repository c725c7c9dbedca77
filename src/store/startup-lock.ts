/**
 * The startup lock of a state directory (`startup.lock`, proper-lockfile):
 * start-up holds it while it decides whether it may own the directory and
 * claims it (owner-lock.ts), and `backup` and `restore` hold it for their whole
 * run, so no server can start on the state while they read or replace it.
 */
import { join } from 'node:path';
import lockfile from 'proper-lockfile';
import { errCode } from '../util/errno.js';
import { StoreError } from './errors.js';

export const STARTUP_LOCK = 'startup.lock';
const STARTUP_STALE_MS = 10_000;
/** Waits a little longer than the startup lock's staleness, so a crashed start-up is outlived. */
const STARTUP_RETRIES = { retries: 30, factor: 1.5, minTimeout: 100, maxTimeout: 500 };

/** Takes the startup lock of `dir` (waiting out a crashed holder); resolves to its release. Refuses `state_locked` while another holds it. */
export async function takeStartupLock(dir: string, onCompromised: (err: Error) => void): Promise<() => Promise<void>> {
  const path = join(dir, STARTUP_LOCK);
  try {
    return await lockfile.lock(path, { lockfilePath: path, realpath: false, stale: STARTUP_STALE_MS, retries: STARTUP_RETRIES, onCompromised });
  } catch (err) {
    if (errCode(err) !== 'ELOCKED') throw err;
    throw new StoreError(
      'state_locked',
      `another controller is starting on state directory ${dir} (${path} is held), or a backup or restore runs on it`,
      'Wait for it to finish, or stop it; if none is running, remove that lock directory',
    );
  }
}
