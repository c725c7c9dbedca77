/**
 * A StoreFs for tests: it performs every call on the real disk, records it,
 * can make any call fail with an errno, and keeps a model of what a crash at
 * that moment would leave behind, which `image` writes out as a directory
 * tree for a fresh store to open.
 *
 * The model, per file: the content as last fsynced/fdatasynced ("durable"),
 * and as written since ("volatile"). Per directory: the entries (name → file
 * or directory) as of its last directory fsync, and as changed since. A crash
 * keeps only durable content, under durable entries. Two images follow from
 * that:
 *   - 'synced': directory entries as of their last fsync. A missing file or
 *     directory fsync shows up as lost data or a lost name.
 *   - 'metadata-first': every entry change and every shrinking of a file
 *     already on disk (a journaling file system commits metadata on its own
 *     schedule, and may commit a rename or a truncate before data written
 *     earlier), file data still only as synced. A rename done before its data
 *     was synced shows up as an empty file under the new name; a truncate
 *     done before what it cuts was saved elsewhere shows up as lost bytes.
 * A failed sync counts as having written the data anyway (the kernel may
 * have written some of it before failing): what a failed write leaves behind
 * must be undone durably, not just forgotten.
 *
 * Only calls through the seam are modelled; files made otherwise (the lock
 * directories of proper-lockfile) are not part of the image.
 *
 * The real files get every write, rename and removal, but no fsync: what is
 * durable is the model's business, and real syncs would only slow the tests
 * (production syncing is nodeStoreFs, which the other store tests run).
 */
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { join, relative, sep } from 'node:path';
import { nodeStoreFs, type StoreFileHandle, type StoreFs } from '../../../src/store/formats/fs.js';

export type FsOp = 'open' | 'write' | 'sync' | 'datasync' | 'truncate' | 'close' | 'rename' | 'unlink' | 'mkdir' | 'syncDir';

export interface FsCall {
  op: FsOp;
  /** Absolute path (for handle calls, the path the handle was opened with). */
  path: string;
  /** rename: the new name. */
  to?: string;
  /** open: its flags. */
  flags?: string;
  /** write: bytes asked for; truncate: the new length. */
  length?: number;
  /** The errno this call was made to fail with. */
  failed?: string;
}

/** Decides whether a call fails, and with which errno; `n` counts calls from 0. */
export type FaultRule = (call: FsCall, n: number) => string | undefined;

interface FileNode {
  kind: 'file';
  durable: Buffer;
  volatile: Buffer;
}

interface DirNode {
  kind: 'dir';
  durable: Map<string, Node>;
  volatile: Map<string, Node>;
}

type Node = FileNode | DirNode;

export type ImageKind = 'synced' | 'metadata-first';

export class CrashFs implements StoreFs {
  readonly calls: FsCall[] = [];
  /** Applied to every call while set. */
  fault: FaultRule | undefined;
  /** Awaited after every call, failed or not: the moment a crash could happen. */
  afterCall: ((call: FsCall) => Promise<void>) | undefined;

  private constructor(
    readonly root: string,
    private readonly tree: DirNode,
  ) {}

  /** Models `root` (an existing directory) as it is now, everything durable. */
  static async over(root: string): Promise<CrashFs> {
    return new CrashFs(root, await scan(root));
  }

  /** Fails the call `n` calls from now (counting every call) with `errno`; every later call too if `persistent`. */
  failAt(n: number, errno: string, persistent = false): void {
    const start = this.calls.length;
    this.fault = (_call, i) => (i === start + n || (persistent && i > start + n) ? errno : undefined);
  }

  async open(path: string, flags: 'a' | 'wx', mode: number): Promise<StoreFileHandle> {
    const call: FsCall = { op: 'open', path, flags };
    return this.#run(call, async () => {
      const real = await nodeStoreFs.open(path, flags, mode);
      const { parent, name } = this.#parent(path);
      let node = parent.volatile.get(name);
      if (node?.kind === 'dir') throw new Error(`model: ${path} is a directory`);
      if (node === undefined || flags === 'wx') {
        node = { kind: 'file', durable: Buffer.alloc(0), volatile: Buffer.alloc(0) };
        parent.volatile.set(name, node);
      }
      return this.#handle(path, real, node, flags === 'a');
    });
  }

  async rename(from: string, to: string): Promise<void> {
    await this.#run({ op: 'rename', path: from, to }, async () => {
      await nodeStoreFs.rename(from, to);
      const source = this.#parent(from);
      const node = source.parent.volatile.get(source.name);
      if (node === undefined) throw new Error(`model: rename of unknown ${from}`);
      source.parent.volatile.delete(source.name);
      const target = this.#parent(to);
      target.parent.volatile.set(target.name, node);
    });
  }

  async unlink(path: string): Promise<void> {
    await this.#run({ op: 'unlink', path }, async () => {
      await nodeStoreFs.unlink(path);
      const { parent, name } = this.#parent(path);
      parent.volatile.delete(name);
    });
  }

  async mkdir(path: string, options: { recursive: boolean; mode: number }): Promise<string | undefined> {
    return this.#run({ op: 'mkdir', path }, async () => {
      const created = await nodeStoreFs.mkdir(path, options);
      let dir = this.tree;
      for (const part of this.#parts(path)) {
        let next = dir.volatile.get(part);
        if (next === undefined) {
          next = { kind: 'dir', durable: new Map(), volatile: new Map() };
          dir.volatile.set(part, next);
        }
        if (next.kind !== 'dir') throw new Error(`model: ${path} crosses a file`);
        dir = next;
      }
      return created;
    });
  }

  async syncDir(path: string): Promise<void> {
    const call: FsCall = { op: 'syncDir', path };
    const node = this.#lookup(path);
    if (node?.kind !== 'dir') throw new Error(`model: syncDir of unknown directory ${path}`);
    const settle = (): void => {
      node.durable = new Map(node.volatile);
    };
    await this.#run(call, async () => settle(), settle);
  }

  /**
   * Writes what a crash now would leave of the root into `into` (created),
   * with private modes. What survives is fixed synchronously, before the first
   * await, so calls the store makes meanwhile are not mixed into the image.
   */
  async image(into: string, kind: ImageKind): Promise<void> {
    await writeTree(survivors(this.tree, kind), into);
  }

  /** The calls made since `from` (an index into `calls`), with temp file names made comparable. */
  callsSince(from: number): string[] {
    return this.calls.slice(from).map((c) => {
      const name = (p: string): string => (relative(this.root, p) || '.').replace(/\.[0-9a-f]{12}\.tmp$/, '.<tmp>');
      const extra = c.op === 'rename' ? ` -> ${name(c.to!)}` : c.op === 'open' ? ` ${c.flags}` : '';
      return `${c.op} ${name(c.path)}${extra}${c.failed ? ` FAILED ${c.failed}` : ''}`;
    });
  }

  #handle(path: string, real: StoreFileHandle, node: FileNode, append: boolean): StoreFileHandle {
    let position = 0;
    const mirror = (bytes: Buffer): void => {
      if (append) {
        node.volatile = Buffer.concat([node.volatile, bytes]);
      } else {
        const end = Math.max(node.volatile.length, position + bytes.length);
        const next = Buffer.alloc(end);
        node.volatile.copy(next);
        bytes.copy(next, position);
        node.volatile = next;
        position += bytes.length;
      }
    };
    const sync = (op: 'sync' | 'datasync'): Promise<void> =>
      this.#run(
        { op, path },
        async () => {
          node.durable = Buffer.from(node.volatile);
        },
        () => (node.durable = Buffer.from(node.volatile)),
      );
    return {
      write: (buffer, offset, length) =>
        this.#run(
          { op: 'write', path, length },
          async () => {
            const done = await real.write(buffer, offset, length);
            mirror(Buffer.from(buffer.subarray(offset, offset + done.bytesWritten)));
            return done;
          },
          // A write that fails part-way, as a full disk does: half of it lands first.
          async () => {
            const half = Math.floor(length / 2);
            if (half === 0) return;
            const done = await real.write(buffer, offset, half);
            mirror(Buffer.from(buffer.subarray(offset, offset + done.bytesWritten)));
          },
        ),
      sync: () => sync('sync'),
      datasync: () => sync('datasync'),
      truncate: (length) =>
        this.#run({ op: 'truncate', path, length }, async () => {
          await real.truncate(length);
          const next = Buffer.alloc(length);
          node.volatile.copy(next, 0, 0, Math.min(length, node.volatile.length));
          node.volatile = next;
        }),
      // A close that reports an error still releases the descriptor.
      close: () =>
        this.#run(
          { op: 'close', path },
          () => real.close(),
          () => real.close(),
        ),
    };
  }

  /** Records the call, fails it if the rule says so (after `onFault`, its partial effect), else runs it. */
  async #run<T>(call: FsCall, job: () => Promise<T>, onFault?: () => unknown): Promise<T> {
    const n = this.calls.length;
    this.calls.push(call);
    try {
      const errno = this.fault?.(call, n);
      if (errno !== undefined) {
        call.failed = errno;
        await onFault?.();
        throw errnoError(errno, call);
      }
      return await job();
    } finally {
      await this.afterCall?.(call);
    }
  }

  #parts(path: string): string[] {
    const rel = relative(this.root, path);
    if (rel.startsWith('..') || rel === '') throw new Error(`model: ${path} is not under ${this.root}`);
    return rel.split(sep);
  }

  #lookup(path: string): Node | undefined {
    if (path === this.root) return this.tree;
    let node: Node | undefined = this.tree;
    for (const part of this.#parts(path)) {
      if (node?.kind !== 'dir') return undefined;
      node = node.volatile.get(part);
    }
    return node;
  }

  #parent(path: string): { parent: DirNode; name: string } {
    const parts = this.#parts(path);
    const name = parts.pop()!;
    const parent = parts.length === 0 ? this.tree : this.#lookup(join(this.root, ...parts));
    if (parent?.kind !== 'dir') throw new Error(`model: no directory for ${path}`);
    return { parent, name };
  }
}

/** node:fs without any fsync, for stores that only open crash images and copies: nothing there needs to last. */
export const unsyncedFs: StoreFs = {
  ...nodeStoreFs,
  async open(path, flags, mode) {
    const real = await nodeStoreFs.open(path, flags, mode);
    return {
      write: (buffer, offset, length) => real.write(buffer, offset, length),
      truncate: (length) => real.truncate(length),
      close: () => real.close(),
      sync: async () => undefined,
      datasync: async () => undefined,
    };
  },
  syncDir: async () => undefined,
};

function errnoError(errno: string, call: FsCall): Error {
  const text: Record<string, string> = { ENOSPC: 'no space left on device', EIO: 'i/o error', EACCES: 'permission denied' };
  return Object.assign(new Error(`${errno}: ${text[errno] ?? 'injected failure'}, ${call.op} '${call.path}'`), {
    code: errno,
    syscall: call.op,
    path: call.path,
  });
}

async function scan(dir: string): Promise<DirNode> {
  const entries = new Map<string, Node>();
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    // Lock directories are proper-lockfile's, outside the seam.
    if (entry.name.endsWith('.lock')) continue;
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      entries.set(entry.name, await scan(path));
    } else {
      const bytes = await readFile(path);
      entries.set(entry.name, { kind: 'file', durable: bytes, volatile: Buffer.from(bytes) });
    }
  }
  return { kind: 'dir', durable: entries, volatile: new Map(entries) };
}

/** What a crash leaves of a directory: its names, with each file's bytes or each subdirectory's survivors. */
interface Survivors {
  [name: string]: Buffer | Survivors;
}

function survivors(dir: DirNode, kind: ImageKind): Survivors {
  const out: Survivors = {};
  for (const [name, node] of kind === 'synced' ? dir.durable : dir.volatile) {
    out[name] =
      node.kind === 'dir'
        ? survivors(node, kind)
        : kind === 'synced'
          ? node.durable
          : node.durable.subarray(0, Math.min(node.durable.length, node.volatile.length));
  }
  return out;
}

async function writeTree(tree: Survivors, into: string): Promise<void> {
  await mkdir(into, { recursive: true, mode: 0o700 });
  for (const [name, entry] of Object.entries(tree)) {
    const path = join(into, name);
    if (Buffer.isBuffer(entry)) await writeFile(path, entry, { mode: 0o600 });
    else await writeTree(entry, path);
  }
}
