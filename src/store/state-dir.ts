/**
 * The state directory holds prompts' fingerprints, droid session ids and
 * result text, so it must be private to the controller's user. We refuse a
 * directory others can read rather than silently chmod it: the user may have
 * shared it on purpose, and other files in it may already have leaked.
 */
import type { Stats } from 'node:fs';
import { stat } from 'node:fs/promises';
import { dirname, isAbsolute } from 'node:path';
import { nodeStoreFs, type StoreFs } from './formats/fs.js';
import { errCode, sharedMode } from '../util/errno.js';
import { StoreError } from './errors.js';

export const DIR_MODE = 0o700;

export async function prepareStateDir(dir: string, fs: StoreFs = nodeStoreFs): Promise<void> {
  if (!isAbsolute(dir)) {
    throw new StoreError(
      'state_dir_not_private',
      `state directory ${JSON.stringify(dir)} is not an absolute path`,
      'Configure stateDirectory as an absolute path (JSON config does not expand ~)',
    );
  }
  // Parents created here get 0700 too; that is stricter than needed, never looser.
  let created: string | undefined;
  try {
    created = await fs.mkdir(dir, { recursive: true, mode: DIR_MODE });
  } catch (err) {
    // EEXIST here means a non-directory is in the way; the check below names it.
    if (errCode(err) !== 'EEXIST') throw err;
  }
  if (created !== undefined) await fsyncCreated(fs, created, dir);
  refuseSharedStateDir(dir, await stat(dir));
}

/**
 * The refusals of an existing state directory: not a directory, another
 * owner, shared. start-up and the read-only readers (inspect.ts) word them alike.
 */
export function refuseSharedStateDir(dir: string, info: Stats): void {
  if (!info.isDirectory()) {
    throw new StoreError('state_dir_not_private', `state directory ${dir} exists but is not a directory`, `Move it aside or choose another stateDirectory`);
  }
  const uid = process.getuid?.();
  if (uid !== undefined && info.uid !== uid) {
    throw new StoreError(
      'state_dir_not_private',
      `state directory ${dir} is owned by uid ${info.uid}, not by this user (uid ${uid})`,
      `Run the controller as the directory's owner, or give it a directory you own and run chmod 700 ${dir}`,
    );
  }
  const mode = sharedMode(info.mode);
  if (mode !== undefined) {
    throw new StoreError('state_dir_not_private', `state directory ${dir} has mode ${mode}; group and others must have no access`, `Run: chmod 700 ${dir}`);
  }
}

/** Makes newly created directories durable: each one's entry lives in its parent. */
async function fsyncCreated(fs: StoreFs, first: string, last: string): Promise<void> {
  for (let path = last; ; path = dirname(path)) {
    await fs.syncDir(dirname(path));
    if (path === first || dirname(path) === path) return;
  }
}
