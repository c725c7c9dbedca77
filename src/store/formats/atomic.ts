/**
 * Durable file primitives. A write is only "done" once it survives power loss:
 * data fsynced, and for new names, the directory entry fsynced as well.
 * Every call goes through a `StoreFs` (see fs.ts), node:fs by default.
 */
import { randomBytes } from 'node:crypto';
import { basename, dirname, join } from 'node:path';
import { writeFailure } from '../errors.js';
import { nodeStoreFs, type StoreFileHandle, type StoreFs } from './fs.js';

/** Every file the store creates is private to its user. */
export const FILE_MODE = 0o600;

/** Suffix of in-flight temp files, so leftovers from a crash can be recognized. */
export const TEMP_SUFFIX = '.tmp';

/**
 * Replaces `path` so that readers see either the old or the new content,
 * never a mix, even across a crash. The temp file lives in the same directory
 * because rename is only atomic within one filesystem.
 */
export async function writeFileAtomic(path: string, data: string | Uint8Array, fs: StoreFs = nodeStoreFs): Promise<void> {
  await replaceAtomic(path, fs, (handle) => writeAll(handle, typeof data === 'string' ? Buffer.from(data, 'utf8') : data));
}

/**
 * `writeFileAtomic` for content produced as a sequence of byte chunks, each
 * written as soon as it is produced. If producing one throws, the temp file
 * is removed and `path` is left as it was.
 */
export async function writeChunksAtomic(path: string, chunks: Iterable<Uint8Array>, fs: StoreFs = nodeStoreFs): Promise<void> {
  await replaceAtomic(path, fs, async (handle) => {
    for (const chunk of chunks) await writeAll(handle, chunk);
  });
}

/**
 * Temp file in the same directory, filled by `fill`, fsynced, renamed over
 * `path`, directory fsynced. Until the rename, `path` is untouched and any
 * failure removes the temp file (a temp file that cannot be removed is
 * cleared at the next start-up). A failure of the final directory fsync is
 * still an error: the new content is in place but may not survive a crash.
 * I/O errors are thrown as `state_write_failed`, saying which of the two.
 */
async function replaceAtomic(path: string, fs: StoreFs, fill: (handle: StoreFileHandle) => Promise<void>): Promise<void> {
  const dir = dirname(path);
  const temp = join(dir, `.${basename(path)}.${randomBytes(6).toString('hex')}${TEMP_SUFFIX}`);
  try {
    // 'wx': never follow or reuse an existing name; the mode applies at creation.
    const handle = await fs.open(temp, 'wx', FILE_MODE);
    try {
      try {
        await fill(handle);
        // The data must be on disk before the name points at it, or a crash could leave `path` empty.
        await handle.sync();
      } catch (err) {
        await handle.close().catch(() => undefined);
        throw err;
      }
      await handle.close();
      await fs.rename(temp, path);
    } catch (err) {
      await fs.unlink(temp).catch(() => undefined);
      throw err;
    }
  } catch (err) {
    throw writeFailure(err, `writing ${path}`, dir, 'unchanged');
  }
  try {
    // Makes the rename durable; without it a crash could bring back the old content after we reported the new.
    await fs.syncDir(dir);
  } catch (err) {
    throw writeFailure(err, `syncing directory ${dir} after replacing ${path}`, dir, 'unknown');
  }
}

/** Writes all of `bytes` at the handle's position; a short write must not lose the tail. */
async function writeAll(fd: StoreFileHandle, bytes: Uint8Array): Promise<void> {
  let offset = 0;
  while (offset < bytes.length) {
    const { bytesWritten } = await fd.write(bytes, offset, bytes.length - offset);
    offset += bytesWritten;
  }
}

/**
 * Appends one complete line and flushes it. The handle must be opened in
 * append mode so every write lands at the current end. fdatasync is enough:
 * it covers the file size, which is the metadata needed to read the data back.
 */
export async function appendDurable(fd: StoreFileHandle, line: string): Promise<void> {
  await writeAll(fd, Buffer.from(line, 'utf8'));
  await fd.datasync();
}
