/**
 * Durable file primitives. A write is only "done" once it survives power loss:
 * data fsynced, and for new names, the directory entry fsynced as well.
 */
import { randomBytes } from 'node:crypto';
import { open, rename, unlink, type FileHandle } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';

/** Every file the store creates is private to its user. */
export const FILE_MODE = 0o600;

/** Suffix of in-flight temp files, so leftovers from a crash can be recognized. */
export const TEMP_SUFFIX = '.tmp';

/** Makes the directory's entries (creations, renames, removals) durable. */
export async function fsyncDir(dir: string): Promise<void> {
  const handle = await open(dir, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/**
 * Replaces `path` so that readers see either the old or the new content,
 * never a mix, even across a crash. The temp file lives in the same directory
 * because rename is only atomic within one filesystem.
 */
export async function writeFileAtomic(path: string, data: string | Uint8Array): Promise<void> {
  const dir = dirname(path);
  const temp = join(dir, `.${basename(path)}.${randomBytes(6).toString('hex')}${TEMP_SUFFIX}`);
  // 'wx': never follow or reuse an existing name; the mode applies at creation.
  const handle = await open(temp, 'wx', FILE_MODE);
  try {
    try {
      await handle.writeFile(data);
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(temp, path);
  } catch (err) {
    await unlink(temp).catch(() => undefined);
    throw err;
  }
  await fsyncDir(dir);
}

/**
 * Appends one complete line and flushes it. The handle must be opened in
 * append mode so every write lands at the current end. fdatasync is enough:
 * it covers the file size, which is the metadata needed to read the data back.
 */
export async function appendDurable(fd: FileHandle, line: string): Promise<void> {
  const bytes = Buffer.from(line, 'utf8');
  let offset = 0;
  // Regular files rarely write short, but a short write must not lose the tail.
  while (offset < bytes.length) {
    const { bytesWritten } = await fd.write(bytes, offset, bytes.length - offset);
    offset += bytesWritten;
  }
  await fd.datasync();
}
