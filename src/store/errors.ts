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
  /** A write to disk failed; the change was not stored. */
  | 'state_write_failed'
  /** A caller asked for a change that would break the store's invariants. */
  | 'invalid_change'
  | 'store_closed';

export class StoreError extends Error {
  override readonly name = 'StoreError';
  constructor(
    readonly code: StoreErrorCode,
    /** What is wrong, naming the file (and line) concerned. */
    problem: string,
    /** How to proceed. */
    readonly action: string,
    options?: { cause?: unknown },
  ) {
    super(action ? `${problem}. ${action}` : problem, options);
  }
}
