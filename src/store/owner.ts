/**
 * One controller per state directory. Two writers would interleave journal
 * lines and each believe its own view, so ownership is a lock (`owner.lock`,
 * via proper-lockfile, kept fresh while we live) plus a record (`owner.json`)
 * saying who holds it, so a second start-up can name the owner and tell a dead
 * one from a live one.
 *
 * Establishing ownership is two-phase: `beginOwnership` takes a short startup
 * lock and decides whether we may own the directory, without writing anything
 * else; the caller then validates the state and either `claim`s (take the
 * owner lock, write the record) or `abandon`s, leaving the directory as found.
 * The startup lock serializes that decide-then-claim sequence between racing
 * start-ups, which is what makes recovering a dead owner safe.
 */
import { rm, stat } from 'node:fs/promises';
import { homedir, hostname } from 'node:os';
import { join } from 'node:path';
import lockfile from 'proper-lockfile';
import { z } from 'zod';
import { writeFileAtomic } from './atomic.js';
import type { StoreFs } from './fs.js';
import { errCode } from '../util/errno.js';
import { StoreError } from './errors.js';
import type { Log } from '../util/logger.js';
import { readJsonFile } from './json-file.js';

export const OWNER_FILE = 'owner.json';
export const OWNER_LOCK = 'owner.lock';
export const STARTUP_LOCK = 'startup.lock';

/** A live owner refreshes its lock every STALE/2 ms; older than this, it is presumed gone. */
export const OWNER_STALE_MS = 10_000;
const STARTUP_STALE_MS = 10_000;
/** Waits a little longer than the startup lock's staleness, so a crashed start-up is outlived. */
const STARTUP_RETRIES = { retries: 30, factor: 1.5, minTimeout: 100, maxTimeout: 500 };

export interface OwnerRecord {
  pid: number;
  hostname: string;
  home: string;
  startedAt: string;
}

const ownerRecordSchema = z
  .object({ pid: z.number().int().min(1), hostname: z.string(), home: z.string(), startedAt: z.string() })
  .strict();

export interface OwnershipOptions {
  now: () => Date;
  logger: Log;
  fs: StoreFs;
}

type Release = () => Promise<void>;

/** Held ownership of a state directory. */
export class Ownership {
  #release: Release | undefined;

  constructor(
    readonly dir: string,
    readonly record: OwnerRecord,
    release: Release,
    private readonly lockState: { compromised: boolean },
  ) {
    this.#release = release;
  }

  /** True once the lock could not be kept fresh (or was taken): writing on would risk two owners. */
  get compromised(): boolean {
    return this.lockState.compromised;
  }

  /** Removes the owner lock. The owner record stays: it binds the directory to this host and HOME. */
  async release(): Promise<void> {
    const release = this.#release;
    this.#release = undefined;
    // A compromised lock may now be someone else's: leave it alone.
    if (!release || this.lockState.compromised) return;
    await release();
  }
}

/** Ownership decided but not yet taken; see the module comment. */
export class PendingOwnership {
  #done = false;

  constructor(
    private readonly dir: string,
    private readonly releaseStartup: Release,
    /** The previous owner's lock, left by a process that is gone. */
    private readonly deadLock: { pid: number | null } | undefined,
    private readonly opts: OwnershipOptions,
  ) {}

  async claim(): Promise<Ownership> {
    this.#finish();
    const { logger, now } = this.opts;
    const lockPath = join(this.dir, OWNER_LOCK);
    try {
      if (this.deadLock) {
        await rm(lockPath, { recursive: true, force: true });
        logger.warn({ dir: this.dir, pid: this.deadLock.pid }, 'recovered the state directory from a dead owner');
      }
      const record: OwnerRecord = { pid: process.pid, hostname: hostname(), home: homedir(), startedAt: now().toISOString() };
      const lockState = { compromised: false };
      let release: Release;
      try {
        release = await lockfile.lock(lockPath, {
          lockfilePath: lockPath,
          realpath: false,
          stale: OWNER_STALE_MS,
          retries: 0,
          // Called from a timer: throwing would crash the controller, so log and stop writing instead.
          onCompromised: (err) => {
            lockState.compromised = true;
            logger.error({ dir: this.dir, err }, 'lost the state directory lock; the store refuses further writes');
          },
        });
      } catch (err) {
        // Only a process that skipped the startup lock can get here first.
        if (errCode(err) === 'ELOCKED') throw lockedByUnknown(this.dir);
        throw err;
      }
      const ownership = new Ownership(this.dir, record, release, lockState);
      try {
        await writeFileAtomic(join(this.dir, OWNER_FILE), JSON.stringify(record, null, 2) + '\n', this.opts.fs);
      } catch (err) {
        await ownership.release();
        throw err;
      }
      return ownership;
    } finally {
      await this.releaseStartup();
    }
  }

  /** Gives up without having changed anything but the (now removed) startup lock. */
  async abandon(): Promise<void> {
    this.#finish();
    await this.releaseStartup();
  }

  #finish(): void {
    if (this.#done) throw new Error('ownership already claimed or abandoned');
    this.#done = true;
  }
}

/**
 * Decides whether this process may own `dir`: refuses a live owner, an owner
 * from another host or HOME, and recognizes a dead owner for recovery.
 */
export async function beginOwnership(dir: string, opts: OwnershipOptions): Promise<PendingOwnership> {
  const startupPath = join(dir, STARTUP_LOCK);
  let unlockStartup: Release;
  try {
    unlockStartup = await lockfile.lock(startupPath, {
      lockfilePath: startupPath,
      realpath: false,
      stale: STARTUP_STALE_MS,
      retries: STARTUP_RETRIES,
      onCompromised: (err) => opts.logger.warn({ dir, err }, 'startup lock was not kept fresh'),
    });
  } catch (err) {
    if (errCode(err) === 'ELOCKED') {
      throw new StoreError(
        'state_locked',
        `another controller is starting on state directory ${dir} (${startupPath} is held)`,
        'Wait for it to finish starting, or stop it; if none is running, remove that lock directory',
      );
    }
    throw err;
  }
  // Failing to remove the startup lock is not fatal: it turns stale and the next start-up takes it.
  const releaseStartup: Release = () =>
    unlockStartup().catch((err: unknown) => opts.logger.warn({ dir, err }, 'could not release the startup lock'));
  try {
    const previous = await readOwnerRecord(dir);
    const here = { hostname: hostname(), home: homedir() };
    if (previous && (previous.hostname !== here.hostname || previous.home !== here.home)) {
      throw new StoreError(
        'state_owned_elsewhere',
        `state directory ${dir} belongs to a controller on host ${previous.hostname} with HOME ${previous.home} ` +
          `(this is host ${here.hostname}, HOME ${here.home}); its droid sessions live there`,
        `Run the controller on that host as that user, or use another stateDirectory here. ` +
          `Only if the directory was moved on purpose and no controller uses it, remove ${join(dir, OWNER_FILE)}`,
      );
    }
    const lockPath = join(dir, OWNER_LOCK);
    let deadLock: { pid: number | null } | undefined;
    if (await exists(lockPath)) {
      if (previous === undefined) {
        // A lock without a record: its holder died before writing one, or is not us.
        const fresh = await lockfile.check(lockPath, { lockfilePath: lockPath, realpath: false, stale: OWNER_STALE_MS });
        if (fresh) throw lockedByUnknown(dir);
        deadLock = { pid: null };
      } else if (pidAlive(previous.pid)) {
        // Also taken when the pid was reused after a crash: refusing is safer than two owners.
        const self = previous.pid === process.pid;
        throw new StoreError(
          'state_locked',
          self
            ? `state directory ${dir} is already open in this process (pid ${previous.pid})`
            : `state directory ${dir} is in use by controller pid ${previous.pid} (started ${previous.startedAt})`,
          self
            ? 'Close the other store first'
            : `Stop that controller first (kill ${previous.pid}), or use another stateDirectory. ` +
              `If pid ${previous.pid} is not a droid-mcp controller (pid reused after a crash), remove ${lockPath}`,
        );
      } else {
        // The pid is gone from this host, so no one can be refreshing the lock: recover now
        // rather than waiting for it to turn stale.
        deadLock = { pid: previous.pid };
      }
    }
    return new PendingOwnership(dir, releaseStartup, deadLock, opts);
  } catch (err) {
    await releaseStartup();
    throw err;
  }
}

function readOwnerRecord(dir: string): Promise<OwnerRecord | undefined> {
  return readJsonFile(join(dir, OWNER_FILE), {
    schema: ownerRecordSchema,
    what: 'owner record',
    action: `If no controller is using ${dir}, restore ${OWNER_FILE} from backup or remove it, then start again`,
  });
}

function lockedByUnknown(dir: string): StoreError {
  const lockPath = join(dir, OWNER_LOCK);
  return new StoreError(
    'state_locked',
    `state directory ${dir} is locked (${lockPath}) by a process that left no owner record`,
    `Stop any other controller using it; if none is running, wait ${OWNER_STALE_MS / 1000} s for the lock to turn stale or remove ${lockPath}`,
  );
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: the process exists but belongs to someone else; still alive.
    return errCode(err) !== 'ESRCH';
  }
}

async function exists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch (err) {
    if (errCode(err) === 'ENOENT') return false;
    throw err;
  }
}
