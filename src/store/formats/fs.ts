/**
 * The file-system calls through which the store changes the disk. Every
 * write, sync, rename, creation and removal the store makes goes through one
 * `StoreFs`, so a test can record their order (was the data synced before the
 * rename? the directory after it?) and make any one of them fail. Reads stay
 * on node:fs directly: they change nothing, so there is nothing to check.
 *
 * Production uses `nodeStoreFs`, which is node:fs/promises unchanged.
 */
import { mkdir, open, rename, unlink } from 'node:fs/promises';

/** An open file the store writes to. */
export interface StoreFileHandle {
  /** Writes at the handle's position (the end, for 'a'); may write fewer bytes than asked. */
  write(buffer: Uint8Array, offset: number, length: number): Promise<{ bytesWritten: number }>;
  /** fsync: data and all metadata. */
  sync(): Promise<void>;
  /** fdatasync: data and the metadata needed to read it back (the size). */
  datasync(): Promise<void>;
  truncate(length: number): Promise<void>;
  close(): Promise<void>;
}

export interface StoreFs {
  /** 'a': append, created if missing; 'wx': create, failing if the name exists. */
  open(path: string, flags: 'a' | 'wx', mode: number): Promise<StoreFileHandle>;
  rename(from: string, to: string): Promise<void>;
  unlink(path: string): Promise<void>;
  /** As node's mkdir: with `recursive`, the first directory created (undefined if none was). */
  mkdir(path: string, options: { recursive: boolean; mode: number }): Promise<string | undefined>;
  /** fsync of a directory: makes the creations, renames and removals of its entries durable. */
  syncDir(path: string): Promise<void>;
}

export const nodeStoreFs: StoreFs = {
  open: (path, flags, mode) => open(path, flags, mode),
  rename: (from, to) => rename(from, to),
  unlink: (path) => unlink(path),
  mkdir: (path, options) => mkdir(path, options),
  async syncDir(path) {
    const handle = await open(path, 'r');
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
  },
};
