/**
 * When the controller vanished (IPC disconnect): nobody can record this
 * turn, so everything of it stops at once. This worker leads its own process
 * group, which droid, bubblewrap and droid's commands inherited: one SIGKILL
 * to the group reaches them all in the same system call, this worker
 * included.
 *
 * Nothing waits first. A grace period (SIGTERM, then SIGKILL a second later)
 * let droid go on reaching the model through this worker's proxy after the
 * controller was killed, and a turn whose code ended first (its cancel
 * resolved) exited the worker before the SIGKILL, leaving bubblewrap's
 * namespace init and droid running under init: SIGTERM cannot stop a PID
 * namespace's init from outside, and bubblewrap's `--die-with-parent` holds
 * only once its own setup is done (issue 38).
 */
export function stopOrphanedGroup(): never {
  try {
    process.kill(-process.pid, 'SIGKILL');
  } finally {
    // Only if the group could not be signalled (it always can: we lead it).
    process.exit(1);
  }
}
