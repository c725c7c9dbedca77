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
 *
 * The record binds the directory to a host, a HOME and droid's Factory home
 * (FACTORY_HOME_OVERRIDE, inherited by every droid the controller starts):
 * the droid sessions the state names live there, so a controller that differs
 * in any of them is refused. The previous owner counts as dead, and its lock
 * is recovered, when
 *   - its pid is gone from this host;
 *   - its pid is alive but its lock has not been refreshed for OWNER_STALE_MS
 *     (a live owner refreshes it every OWNER_STALE_MS / 2, so the pid was
 *     reused after a crash, or the owner is hung and will find its lock taken
 *     and stop writing: see Ownership.compromised). The lock judgement tells
 *     the two apart (`unresponsive`: the process started before its record
 *     was written), so that status, backup and restore never count a stopped
 *     or hung server as gone; start-up takes both over;
 *   - its pid is our own pid but this process does not hold the directory:
 *     an earlier incarnation with the same pid, as when a container restarts
 *     and node is pid 1 again.
 */
import { realpath, rm } from 'node:fs/promises';
import { homedir, hostname } from 'node:os';
import { join } from 'node:path';
import lockfile from 'proper-lockfile';
import { z } from 'zod';
import { writeFileAtomic } from './formats/atomic.js';
import type { StoreFs } from './formats/fs.js';
import { errCode } from '../util/errno.js';
import { processStartedAt } from '../util/process-start.js';
import { exists } from '../util/exists.js';
import { StoreError } from './errors.js';
import type { Log } from '../util/logger.js';
import { readJsonFile } from './formats/json-file.js';
import { describeIssue } from '../shared/record-schemas.js';
import { takeStartupLock } from './startup-lock.js';

const OWNER_FILE = 'owner.json';
const OWNER_LOCK = 'owner.lock';

/** Version of the owner record's format; records of any other version (or none) are refused. */
const OWNER_RECORD_VERSION = 1;

/** A live owner refreshes its lock every STALE/2 ms; older than this, it is presumed gone. */
const OWNER_STALE_MS = 10_000;

export interface OwnerRecord {
  version: typeof OWNER_RECORD_VERSION;
  pid: number;
  hostname: string;
  home: string;
  /** FACTORY_HOME_OVERRIDE of the owner, null when it was unset (droid then uses ~/.factory). */
  factoryHomeOverride: string | null;
  startedAt: string;
}

/** Where this process's droid sessions live: what an owner record binds. */
export interface OwnerIdentity {
  hostname: string;
  home: string;
  factoryHomeOverride: string | null;
}

export function currentIdentity(): OwnerIdentity {
  return { hostname: hostname(), home: homedir(), factoryHomeOverride: process.env.FACTORY_HOME_OVERRIDE ?? null };
}

const ownerRecordSchema = z
  .object({
    version: z.literal(OWNER_RECORD_VERSION),
    pid: z.number().int().min(1),
    hostname: z.string(),
    home: z.string(),
    factoryHomeOverride: z.string().nullable(),
    startedAt: z.string(),
  })
  .strict();

/** The record of builds before the format had a version: it does not say which Factory home was used. */
const unversionedRecordSchema = z.object({ pid: z.number().int().min(1), hostname: z.string(), home: z.string(), startedAt: z.string() }).strict();

/**
 * Directories (real paths) this process holds. A record naming our own pid
 * for a directory not in here was left by an earlier process with that pid.
 */
const heldHere = new Set<string>();

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
    private readonly realDir: string,
    /**
     * The record of the owner this one took over from (dead, or alive but not refreshing its lock):
     * its processes may outlive it. null: none, or it stopped cleanly (released its lock after its turns' groups were gone).
     */
    readonly previous: OwnerRecord | null,
  ) {
    this.#release = release;
    heldHere.add(realDir);
  }

  /** True once the lock could not be kept fresh (or was taken): writing on would risk two owners. */
  get compromised(): boolean {
    return this.lockState.compromised;
  }

  /** Removes the owner lock. The owner record stays: it binds the directory to this host, HOME and Factory home. */
  async release(): Promise<void> {
    const release = this.#release;
    this.#release = undefined;
    if (!release) return;
    heldHere.delete(this.realDir);
    // A compromised lock may now be someone else's: leave it alone.
    if (this.lockState.compromised) return;
    await release();
  }
}

/** Ownership decided but not yet taken; see the module comment. */
class PendingOwnership {
  #done = false;

  constructor(
    private readonly dir: string,
    private readonly realDir: string,
    private readonly identity: OwnerIdentity,
    private readonly releaseStartup: Release,
    /** The previous owner's lock, left by a process that is gone. */
    private readonly deadLock: DeadOwner | undefined,
    private readonly previous: OwnerRecord | undefined,
    private readonly opts: OwnershipOptions,
  ) {}

  async claim(): Promise<Ownership> {
    this.#finish();
    const { logger, now } = this.opts;
    const lockPath = join(this.dir, OWNER_LOCK);
    try {
      if (this.deadLock) {
        await rm(lockPath, { recursive: true, force: true });
        logger.warn({ dir: this.dir, pid: this.deadLock.pid, why: this.deadLock.why }, 'recovered the state directory from a dead owner');
      }
      const record: OwnerRecord = { version: OWNER_RECORD_VERSION, pid: process.pid, ...this.identity, startedAt: now().toISOString() };
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
      const ownership = new Ownership(this.dir, record, release, lockState, this.realDir, (this.deadLock && this.previous) ?? null);
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
  const unlockStartup = await takeStartupLock(dir, (err) => opts.logger.warn({ dir, err }, 'startup lock was not kept fresh'));
  // Failing to remove the startup lock is not fatal: it turns stale and the next start-up takes it.
  const releaseStartup: Release = () => unlockStartup().catch((err: unknown) => opts.logger.warn({ dir, err }, 'could not release the startup lock'));
  try {
    const realDir = await realpath(dir);
    const previous = await readOwnerRecord(dir);
    const here = currentIdentity();
    if (previous) refuseOtherIdentity(dir, previous, here);
    const lock = await judgeOwnerLock(dir, realDir, previous);
    if (lock.kind === 'live') throw lockedBy(dir, lock.pid === null ? undefined : previous);
    const deadLock = lock.kind === 'dead' ? lock.dead : lock.kind === 'unresponsive' ? { pid: lock.pid, why: lock.why } : undefined;
    return new PendingOwnership(dir, realDir, here, releaseStartup, deadLock, previous, opts);
  } catch (err) {
    await releaseStartup();
    throw err;
  }
}

export interface DeadOwner {
  pid: number | null;
  /** Why it counts as dead, for the log. */
  why: string;
}

/**
 * Who holds the owner lock, as start-up judges it: no lock, a lock its holder
 * left behind (taken over), a live owner, or the owner's own process alive
 * but not refreshing its lock (stopped or hung: start-up takes it over too,
 * but it is no stopped server to back up or restore beside).
 */
export type OwnerLock =
  { kind: 'free' } | { kind: 'dead'; dead: DeadOwner } | { kind: 'live'; pid: number | null } | { kind: 'unresponsive'; pid: number; why: string };

/** A process that started after the owner record was written cannot be the owner; allows for clock steps. */
const START_SLACK_MS = 2_000;

/**
 * The owner lock of `dir` (real path `realDir`) judged against the owner
 * record, without taking or changing anything: start-up decides with it
 * (under its startup lock), and `status`, `doctor` and `backup` read with it.
 */
export async function judgeOwnerLock(dir: string, realDir: string, previous: OwnerRecord | undefined): Promise<OwnerLock> {
  const lockPath = join(dir, OWNER_LOCK);
  if (!(await exists(lockPath))) return { kind: 'free' };
  const fresh = (): Promise<boolean> => lockfile.check(lockPath, { lockfilePath: lockPath, realpath: false, stale: OWNER_STALE_MS });
  if (previous === undefined) {
    // A lock without a record: its holder died before writing one, or is not us.
    if (await fresh()) return { kind: 'live', pid: null };
    return { kind: 'dead', dead: { pid: null, why: 'lock without owner record, not refreshed' } };
  }
  if (previous.pid === process.pid) {
    if (heldHere.has(realDir)) return { kind: 'live', pid: previous.pid };
    return { kind: 'dead', dead: { pid: previous.pid, why: 'our own pid, left by an earlier process (a restart that reused the pid)' } };
  }
  // No one can be refreshing the lock: recover now rather than waiting for it to turn stale.
  if (!pidAlive(previous.pid)) return { kind: 'dead', dead: { pid: previous.pid, why: 'pid no longer running' } };
  if (!(await fresh())) {
    const stale = `pid running but lock not refreshed for ${OWNER_STALE_MS / 1000} s`;
    const started = processStartedAt(previous.pid);
    if (started !== undefined && started > Date.parse(previous.startedAt) + START_SLACK_MS) {
      return { kind: 'dead', dead: { pid: previous.pid, why: `${stale}, and that process started after the owner record: a reused pid` } };
    }
    return { kind: 'unresponsive', pid: previous.pid, why: `${stale}: the owner is stopped (SIGSTOP) or hung` };
  }
  return { kind: 'live', pid: previous.pid };
}

/** The refusal of a directory a live owner holds (`previous` undefined: one that left no record). */
function lockedBy(dir: string, previous: OwnerRecord | undefined): StoreError {
  if (previous === undefined) return lockedByUnknown(dir);
  if (previous.pid === process.pid) {
    return new StoreError('state_locked', `state directory ${dir} is already open in this process (pid ${previous.pid})`, 'Close the other store first');
  }
  return new StoreError(
    'state_locked',
    `state directory ${dir} is in use by controller pid ${previous.pid} (started ${previous.startedAt})`,
    `Stop that controller first (kill ${previous.pid}), or use another stateDirectory. ` +
      `If pid ${previous.pid} is not a droid-mcp controller, its lock turns stale ${OWNER_STALE_MS / 1000} s after the real owner died; start again then`,
  );
}

/** Refuses a record made on another host, as another user (HOME) or with another Factory home. */
export function refuseOtherIdentity(dir: string, previous: OwnerRecord, here: OwnerIdentity): void {
  const recordPath = join(dir, OWNER_FILE);
  if (previous.hostname !== here.hostname || previous.home !== here.home) {
    throw new StoreError(
      'state_owned_elsewhere',
      `state directory ${dir} belongs to a controller on host ${previous.hostname} with HOME ${previous.home} ` +
        `(this is host ${here.hostname}, HOME ${here.home}); its droid sessions live there`,
      `Run the controller on that host as that user, or use another stateDirectory here. ` +
        `Only if the directory was moved on purpose and no controller uses it, remove ${recordPath}`,
    );
  }
  if (previous.factoryHomeOverride !== here.factoryHomeOverride) {
    throw new StoreError(
      'state_owned_elsewhere',
      `state directory ${dir} belongs to a controller that ran with ${describeFactoryHome(previous.factoryHomeOverride)} ` +
        `(this one runs with ${describeFactoryHome(here.factoryHomeOverride)}); its droid sessions live in that Factory home`,
      `Start the controller with ${previous.factoryHomeOverride === null ? 'FACTORY_HOME_OVERRIDE unset' : `FACTORY_HOME_OVERRIDE=${previous.factoryHomeOverride}`}, ` +
        `or use another stateDirectory. Only if the sessions were moved to this Factory home on purpose and no controller uses the directory, remove ${recordPath}`,
    );
  }
}

function describeFactoryHome(value: string | null): string {
  return value === null ? 'FACTORY_HOME_OVERRIDE unset (~/.factory)' : `FACTORY_HOME_OVERRIDE=${value}`;
}

export async function readOwnerRecord(dir: string): Promise<OwnerRecord | undefined> {
  const path = join(dir, OWNER_FILE);
  const action = `If no controller is using ${dir}, restore ${OWNER_FILE} from backup or remove it, then start again`;
  const raw = await readJsonFile(path, { schema: z.unknown(), what: 'owner record', action });
  if (raw === undefined) return undefined;
  const record = ownerRecordSchema.safeParse(raw);
  if (record.success) return record.data;
  // Told apart explicitly: no silent migration, and no guessing at the Factory home it was used with.
  const unversioned = unversionedRecordSchema.safeParse(raw);
  if (unversioned.success) {
    const { hostname: host, home } = unversioned.data;
    throw new StoreError(
      'state_version_unsupported',
      `owner record ${path} has no version: an earlier build wrote it, and it does not say which FACTORY_HOME_OVERRIDE ` +
        `(where droid keeps the sessions this state names) its controller used (host ${host}, HOME ${home})`,
      `Nothing was changed. Stop any controller using ${dir}; if the last one ran on this host as this user with ` +
        `${describeFactoryHome(currentIdentity().factoryHomeOverride)}, like this one, remove ${path} and start again; ` +
        `otherwise start this controller with the FACTORY_HOME_OVERRIDE it used`,
    );
  }
  if (typeof raw === 'object' && raw !== null && 'version' in raw && raw.version !== OWNER_RECORD_VERSION) {
    throw new StoreError(
      'state_version_unsupported',
      `owner record ${path} has version ${JSON.stringify(raw.version)}; this controller reads only version ${OWNER_RECORD_VERSION}`,
      `Nothing was changed. Run the controller release that wrote it, or, if no controller is using ${dir}, remove ${path}`,
    );
  }
  throw new StoreError('state_corrupt', `owner record ${path} is unreadable (${describeIssue(record.error)})`, action);
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
