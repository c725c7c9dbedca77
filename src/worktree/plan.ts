/**
 * Where a session's checkout goes and what its turns use of it. Pure.
 */
import { join } from 'node:path';
import type { CheckoutRecord } from '../shared/checkout-types.js';
import type { SessionRecord } from '../shared/records.js';
import { isAtOrBelow, overlaps } from '../util/paths.js';
import type { Repository } from './checkout.js';

/** The branch of a session's checkout, in the repository and the checkout alike. */
function branchOf(sessionId: string): string {
  return `droid/${sessionId}`;
}

/** The checkout a new session asks for, recorded at acceptance and made when its first turn starts. */
export function plannedCheckout(sessionId: string, directory: string, repo: Repository): CheckoutRecord {
  const path = join(directory, sessionId);
  // The same subfolder of the repository the session was created in.
  const workspace = repo.prefix === '' ? path : join(path, repo.prefix).replace(/\/$/, '');
  return { isolation: 'worktree', path, workspace, repository: repo.top, gitDir: repo.gitDir, branch: branchOf(sessionId), base: null, state: 'pending' };
}

/** Why this repository cannot have checkouts in `directory`, or null. */
export function placementProblem(workspace: string, repo: Repository, directory: string): string | null {
  if (isAtOrBelow(workspace, directory)) return 'the workspace is itself inside the checkouts directory; create the session in the repository it came from';
  if (overlaps(repo.top, directory) || overlaps(repo.gitDir, directory)) {
    return "the configured checkouts directory lies inside this repository, so a checkout would be part of the repository's own tree";
  }
  return null;
}

/** Where the session's turns run and take their lock: its checkout's workspace while it has one, else its workspace. */
export function turnWorkspace(session: SessionRecord): string {
  const checkout = session.checkout;
  return checkout && checkout.state !== 'removed' ? checkout.workspace : session.workspace;
}

/** What must resolve to itself before a turn of the session starts: the checkout's workspace once made, else the workspace. */
export function resolvedWorkspace(session: SessionRecord): string {
  return session.checkout?.state === 'ready' ? session.checkout.workspace : session.workspace;
}

/** A checkout workspace below the checkout's top needs the checkout's git folder writable too (writer turns only). */
export function alsoWritableOf(session: SessionRecord): string[] {
  const checkout = session.checkout;
  if (!checkout || checkout.state === 'removed' || checkout.workspace === checkout.path) return [];
  return [join(checkout.path, '.git')];
}

/**
 * A checkout borrows its repository's objects (`git clone --shared`): the
 * turn reads them, read-only, though the repository's root is covered.
 */
export function alsoReadableOf(session: SessionRecord): string[] {
  const checkout = session.checkout;
  if (!checkout || checkout.state === 'removed') return [];
  return [join(checkout.gitDir, 'objects')];
}

/** Checkouts that count against the host's limit: recorded and not removed. */
export function liveCheckouts(sessions: Iterable<SessionRecord>): number {
  let count = 0;
  for (const s of sessions) if (s.checkout && s.checkout.state !== 'removed') count++;
  return count;
}
