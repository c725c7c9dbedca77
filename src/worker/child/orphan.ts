/**
 * Last resort when the controller vanished: this worker leads its own process
 * group, which droid inherited, so signalling the group stops droid too.
 */
const ORPHAN_GRACE_MS = 1_000;

export function stopOrphanedGroup(): void {
  const group = -process.pid;
  // Survive our own SIGTERM so the SIGKILL follow-up still happens.
  process.on('SIGTERM', () => undefined);
  try {
    process.kill(group, 'SIGTERM');
  } catch {
    // Group already gone.
  }
  setTimeout(() => {
    try {
      process.kill(group, 'SIGKILL');
    } finally {
      process.exit(1);
    }
  }, ORPHAN_GRACE_MS);
}
