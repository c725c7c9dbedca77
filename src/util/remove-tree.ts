/**
 * Removes a folder a hostile turn may have shaped, off the event loop and
 * without ever throwing: a turn can leave a folder its owner may not list
 * or unlink (`chmod 500`: EACCES for a service user that is not root) or
 * millions of files, and a synchronous `rmSync` in the controller then
 * throws (an unhandled rejection ends the process) or blocks every client.
 * Folders are made owner-writable first, walking with lstat so no link is
 * followed. Resolves with why it failed, or null.
 */
import { chmod, lstat, readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';

async function makeOwnerWritable(path: string): Promise<void> {
  const info = await lstat(path).catch(() => null);
  if (!info?.isDirectory()) return;
  await chmod(path, 0o700).catch(() => undefined);
  for (const name of await readdir(path).catch(() => [])) await makeOwnerWritable(join(path, name));
}

export async function removeTree(path: string): Promise<string | null> {
  try {
    await rm(path, { recursive: true, force: true });
    return null;
  } catch {
    // Not removable as it is: give the owner its rights back, then once more.
  }
  try {
    await makeOwnerWritable(path);
    await rm(path, { recursive: true, force: true });
    return null;
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
}
