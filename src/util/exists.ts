import { stat } from 'node:fs/promises';
import { errCode } from './errno.js';

/**
 * Whether `path` exists (a symlink counts by its target). Only ENOENT reads
 * as absent: any other failure (EACCES, EIO, …) is thrown, so a path that
 * cannot be inspected is never taken for a free one.
 */
export async function exists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch (err) {
    if (errCode(err) === 'ENOENT') return false;
    throw err;
  }
}
