import { errCode } from '../util/errno.js';

/**
 * The one error type of the store. `code` is stable and machine-readable;
 * `action` tells the operator what to do, because most store failures can only
 * be fixed by a human (permissions, a second controller, damaged files).
 */
export type StoreErrorCode =
  | 'state_dir_not_private'
  | 'state_locked'
  | 'state_owned_elsewhere'
  | 'state_corrupt'
  | 'state_version_unsupported'
  /** Another process took the owner lock from us: writing on would risk two owners. */
  | 'state_lock_lost'
  /**
   * A run record kept in the snapshot could not be read back as it was
   * verified at start-up: the file changed underneath. Nothing is guessed.
   */
  | 'state_unreadable'
  /**
   * A write to disk failed. The action says whether nothing was stored or the
   * change may have been, and whether the store still accepts writes.
   */
  | 'state_write_failed'
  /** A caller asked for a change that would break the store's invariants. */
  | 'invalid_change'
  | 'store_closed';

export class StoreError extends Error {
  override readonly name = 'StoreError';
  constructor(
    readonly code: StoreErrorCode,
    /** What is wrong, naming the file (and line) concerned. */
    readonly problem: string,
    /** How to proceed. */
    readonly action: string,
    options?: { cause?: unknown },
  ) {
    super(action ? `${problem}. ${action}` : problem, options);
  }
}

/** What a failed write left behind, as far as the store can tell. */
export type WriteOutcome =
  /** The old content is in place, durably: retrying is safe. */
  | 'unchanged'
  /** The new content may or may not survive a crash; readers see either the old or the new, never a mix. */
  | 'unknown';

/**
 * A `state_write_failed` error for an I/O error (anything with an errno code);
 * any other error, such as a programming error or an existing StoreError, is
 * returned as it is. The message names what was being written and the errno;
 * the action says what the failure left and what to fix, by errno.
 */
export function writeFailure(err: unknown, what: string, dir: string, outcome: WriteOutcome): unknown {
  const errno = errnoOf(err);
  if (err instanceof StoreError || errno === undefined) return err;
  const detail = err instanceof Error ? err.message : String(err);
  const left = outcome === 'unchanged' ? 'Nothing was stored' : 'It may or may not have been stored; the files are consistent either way';
  return new StoreError(
    'state_write_failed',
    `${what} failed: ${detail.startsWith(errno) ? detail : `${errno}: ${detail}`}`,
    `${left}. ${remedy(errno, dir)}, then retry`,
    {
      cause: err,
    },
  );
}

function remedy(errno: string, dir: string): string {
  switch (errno) {
    case 'ENOSPC':
    case 'EDQUOT':
      return `Free space on the file system holding ${dir} (df ${dir})`;
    case 'EACCES':
    case 'EPERM':
    case 'EROFS':
      return `Make ${dir} and its files writable by this user on a read-write file system`;
    default:
      return `The system reported ${errno}: check the disk and the system log (dmesg)`;
  }
}

/** The errno name of a system error (ENOSPC, EIO, …); undefined for other errors. */
export function errnoOf(err: unknown): string | undefined {
  const code = errCode(err);
  return code !== undefined && /^E[A-Z0-9]+$/.test(code) ? code : undefined;
}
