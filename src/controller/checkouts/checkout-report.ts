/**
 * The start-up report of session checkouts (issue 21): folders no session
 * owns, checkouts the state names that are gone, and checkouts kept after a
 * crash. Logged once, in the background; nothing is removed.
 */
import type { Log } from '../../util/logger.js';
import { checkoutFolders, classifyCheckouts } from '../../worktree/inventory.js';
import type { ReadableStore } from '../sessions/session-reader.js';

export async function reportCheckouts(directory: string, store: ReadableStore, log: Log): Promise<void> {
  try {
    const unknown = new Set<string>();
    for (const session of store.sessions.values()) {
      if (session.checkout && session.checkout.state !== 'removed' && store.runsBySession(session.id).some((r) => r.state === 'unknown'))
        unknown.add(session.id);
    }
    const survey = classifyCheckouts(directory, await checkoutFolders(directory), store.sessions.values(), unknown);
    for (const path of survey.orphans)
      log.warn({ checkout: path }, 'a folder in the checkouts directory belongs to no session; it is kept (inspect it, then remove it by hand)');
    for (const path of survey.missing) log.warn({ checkout: path }, "a session's checkout folder is gone; its turns will fail until the session is archived");
    for (const path of survey.kept)
      log.warn(
        { checkout: path },
        'kept the checkout of a session whose last turn has an unknown outcome (the controller stopped mid-turn); inspect it, then archive the session',
      );
    log.info(
      { directory, checkouts: survey.owned.length, orphans: survey.orphans.length, missing: survey.missing.length, kept: survey.kept.length },
      'session checkouts',
    );
  } catch (err) {
    log.warn({ err, directory }, 'could not survey the session checkouts');
  }
}
