/**
 * A pending Factory title applied after a turn (best effort, within its own
 * window), given up at once when a follow-up waits for the slot.
 */
import type { DroidClient } from '../../droid/client.js';
import { toErrorInfo } from '../../droid/errors.js';
import { RENAME_SKIPPED, type RenameOutcome } from '../contract/protocol.js';

export async function applyTitle(client: DroidClient, title: string, windowMs: number, skip?: AbortSignal): Promise<RenameOutcome> {
  const skipped: RenameOutcome = { title, ok: false, error: RENAME_SKIPPED };
  if (skip?.aborted) return skipped;
  let onSkip: (() => void) | undefined;
  const skipping = new Promise<RenameOutcome>((resolve) => {
    onSkip = () => resolve(skipped);
    skip?.addEventListener('abort', onSkip, { once: true });
  });
  const renaming = client.rename(title, windowMs).then(
    (result): RenameOutcome => (result.success ? { title, ok: true, error: null } : { title, ok: false, error: 'droid answered success: false' }),
    (err: unknown): RenameOutcome => ({ title, ok: false, error: toErrorInfo(err).message }),
  );
  try {
    // An abandoned rename request ends with droid's process, closed next.
    return await Promise.race([renaming, skipping]);
  } finally {
    if (onSkip) skip?.removeEventListener('abort', onSkip);
  }
}
