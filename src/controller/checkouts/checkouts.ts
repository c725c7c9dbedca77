/**
 * Sessions with their own checkout (`isolation: "worktree"`, issue 21): the
 * checks at acceptance, making the checkout when the first turn starts,
 * bringing the branch back after each writer turn, and removing the
 * checkout when the session is archived, only if nothing would be lost.
 * The git and the folders are src/worktree/'s; this wires them to the
 * controller's records and its serial chain.
 *
 * Rules it keeps:
 * - A session without `isolation` never reaches any of this: its records,
 *   locks and turns are exactly as before.
 * - Nothing here merges, deletes a branch, or removes a folder it did not
 *   check first (uncommitted, untracked, commits the branch lacks).
 * - A send or a second archive waits out a removal in progress (session_busy).
 */
import { existsSync } from 'node:fs';
import type { CheckoutRecord, CommitsAhead } from '../../shared/checkout-types.js';
import { ControllerError } from '../../shared/public-error.js';
import type { Autonomy, RunRecord, SessionRecord } from '../../shared/records.js';
import { commitsAhead, inspectRepository, makeCheckout, removeCheckout, type Repository } from '../../worktree/checkout.js';
import { removalBlocker } from '../../worktree/removal.js';
import { syncBranch } from '../../worktree/sync.js';
import type { GitHost } from '../../worktree/confined-git.js';
import { liveCheckouts, placementProblem, plannedCheckout } from '../../worktree/plan.js';
import { overlaps } from '../../util/paths.js';
import type { SandboxSpec } from '../../sandbox/sandbox.js';
import type { Log } from '../../util/logger.js';
import { isWorking } from '../sessions/views.js';
import type { LockClaim } from '../turns/admission.js';

export type Isolation = 'none' | 'worktree';

/** Takes a workspace lock held by no turn (turn-queue.ts holdLock): its release, or null when a turn already conflicts. */
export type WorkspaceLock = (claim: LockClaim) => (() => void) | null;

/** The host's setting (config `worktrees`); absent: off. */
export interface CheckoutHost {
  directory: string;
  maxCheckouts: number;
}

/** What an accepted create asks for, checked outside the chain: where its checkout will go. */
export interface CheckoutIntent {
  repo: Repository;
  directory: string;
}

/** What of the controller's shared state this needs (controller-state.ts gives it; no import back, so no cycle). */
interface CheckoutsState {
  readonly store: { readonly sessions: ReadonlyMap<string, SessionRecord>; runsBySession(sessionId: string): RunRecord[] };
  readonly log: Log;
  session(id: string): SessionRecord;
  serialized<T>(fn: () => Promise<T>): Promise<T>;
  commit(change: { sessions?: SessionRecord[] }): Promise<void>;
}

/** The host effects checkouts use. */
export interface CheckoutDeps {
  sandbox: SandboxSpec;
  droidEnv: Record<string, string>;
  sandboxUnavailable: string | null;
  worktrees?: CheckoutHost | null;
  /** The workspace check of every tool: realpath, inside an approved root, a directory. */
  resolveWorkspace(requested: string): Promise<string>;
}

const OFF_ACTION =
  'Omit isolation (or pass "none") to work in the workspace itself; the operator enables checkouts with "worktrees": {"directory": …} in the config.';

export class SessionCheckouts {
  /** Sessions whose checkout is being checked and removed right now. */
  private readonly removing = new Set<string>();

  constructor(
    private readonly state: CheckoutsState,
    private readonly deps: CheckoutDeps,
  ) {}

  private get git(): GitHost {
    return { sandbox: this.deps.sandbox, droidEnv: this.deps.droidEnv };
  }

  /** Outside the chain, before anything is recorded: may this new session have a checkout, and from which repository. Null: no isolation. */
  async intent(isolation: Isolation | undefined, autonomy: Autonomy | undefined, workspace: string): Promise<CheckoutIntent | null> {
    const host = this.deps.worktrees;
    // A session there could rewrite another session's checkout (its .git, which that session's turns bind writable).
    if (host && overlaps(workspace, host.directory)) {
      throw new ControllerError(
        'workspace_in_checkouts',
        `the workspace overlaps the checkouts directory ${host.directory}, which holds other sessions' checkouts`,
        "Create the session in a project folder that neither holds nor lies inside the checkouts directory; continue a checkout session's work with droid_send_message to that session.",
      );
    }
    if (isolation === undefined || isolation === 'none') return null;
    if (!host) throw new ControllerError('isolation_unavailable', 'this host does not make per-session checkouts (isolation: "worktree" is off)', OFF_ACTION);
    if (autonomy === 'off') throw readerRefusal();
    if (this.deps.sandboxUnavailable !== null) {
      throw new ControllerError(
        'sandbox_unavailable',
        `the configured sandbox cannot run (${this.deps.sandboxUnavailable}), and checkouts are made inside it`,
        'Fix the sandbox first (droid_list_workspaces policy.sandbox).',
      );
    }
    const repo = await inspectRepository(this.git, workspace);
    if (!repo) {
      throw new ControllerError(
        'isolation_not_a_repository',
        'the workspace is not inside a git work tree, so there is nothing to make a checkout of',
        'Create the session without isolation, or in a directory inside a git repository (with at least one commit).',
      );
    }
    const problem = placementProblem(workspace, repo, host.directory) ?? (await this.unapproved(repo));
    if (problem)
      throw new ControllerError(
        'isolation_not_possible',
        problem,
        'Create the session without isolation, or have the operator move "worktrees.directory" outside the repository (or approve the repository\'s own folder).',
      );
    return { repo, directory: host.directory };
  }

  /** The controller writes the repository's branches and clones all of it: its top and git folder must be approved too. */
  private async unapproved(repo: Repository): Promise<string | null> {
    for (const [what, path] of [
      ['top folder', repo.top],
      ['git folder', repo.gitDir],
    ] as const) {
      const resolved = await this.deps.resolveWorkspace(path).catch(() => null);
      if (resolved !== path)
        return `the repository's ${what} ${path} is not an approved directory (the workspace is inside a repository that starts above the approved roots, or its .git points elsewhere)`;
    }
    return null;
  }

  /** In the chain, once the run's settings are resolved: the pending checkout of the new session. May refuse. */
  /** `from`: a fork's checkout is made from this branch (its source's), not the workspace's HEAD. */
  plan(intent: CheckoutIntent, sessionId: string, autonomy: Autonomy, from?: string): CheckoutRecord {
    if (autonomy === 'off') throw readerRefusal();
    const max = this.deps.worktrees?.maxCheckouts ?? 0;
    if (liveCheckouts(this.state.store.sessions.values()) >= max) {
      throw new ControllerError(
        'checkout_limit_reached',
        `this host already has ${max} session checkouts, its limit (worktrees.maxCheckouts)`,
        'Archive sessions you are done with (droid_update_session {archived: true} removes a checkout whose work is committed), then retry with the same requestKey.',
        true,
      );
    }
    const planned = plannedCheckout(sessionId, intent.directory, intent.repo);
    return from ? { ...planned, from } : planned;
  }

  /** A send (in the chain): refused while the checkout is being removed, or once it is gone. */
  assertUsable(session: SessionRecord): void {
    if (this.removing.has(session.id)) throw busy('its checkout is being checked and removed');
    if (session.checkout?.state === 'removed') {
      throw new ControllerError(
        'checkout_removed',
        `this session's checkout was removed when it was archived; its work is on the branch ${session.checkout.branch} of ${session.checkout.repository}`,
        'Start a new session (in the repository, or from that branch) to continue the work.',
      );
    }
  }

  /** Whether the session's checkout is still to be made (its next turn makes it). */
  pending(sessionId: string): boolean {
    return this.state.session(sessionId).checkout?.state === 'pending';
  }

  /** Before a turn's spec: the session's pending checkout made and recorded. Rejects with the reason nothing may start. */
  async prepare(sessionId: string): Promise<void> {
    const checkout = this.state.session(sessionId).checkout;
    if (!checkout || checkout.state !== 'pending') return;
    const made = await makeCheckout(this.git, checkout, this.state.session(sessionId).workspace);
    await this.state.serialized(async () => {
      const current = this.state.session(sessionId);
      await this.state.commit({ sessions: [{ ...current, checkout: made }] });
    });
    this.state.log.info({ session: sessionId, checkout: made.path, branch: made.branch, base: made.base }, 'session checkout made');
  }

  /** Whether `run` is a writer turn of a session with a checkout, whose branch comes back after it. */
  syncsAfter(run: RunRecord): boolean {
    return this.state.session(run.sessionId).checkout?.state === 'ready' && run.settings.autonomy !== 'off';
  }

  /** After such a turn: its branch in the repository, and its commits ahead; null when git could not tell. Never rejects. */
  async afterTurn(run: RunRecord): Promise<CommitsAhead | null> {
    const checkout = this.state.session(run.sessionId).checkout!;
    try {
      const problem = await syncBranch(this.git, checkout);
      if (problem !== null)
        this.state.log.warn(
          { session: run.sessionId, branch: checkout.branch, problem },
          'the session branch could not be brought back into the repository; its commits stay in the checkout',
        );
      return await commitsAhead(this.git, checkout, problem === null, problem ?? undefined);
    } catch (err) {
      this.state.log.warn({ err, run: run.id }, 'could not read the session branch after the turn');
      return null;
    }
  }

  /**
   * Archiving a checkout session: once no turn is live, checks that nothing
   * would be lost and removes the folder. Resolves the record as it is then
   * (removed), or null when there is no checkout to remove; `done` must be
   * called once the archive is recorded (or refused). `check` throws when
   * the update itself would be refused.
   */
  async beginRemoval(
    sessionId: string,
    check: (session: SessionRecord) => void,
    lock: WorkspaceLock,
  ): Promise<{ checkout: CheckoutRecord | null; done(): void }> {
    let release: (() => void) | null = null;
    const checkout = await this.state.serialized(async () => {
      const session = this.state.session(sessionId);
      const current = session.checkout;
      if (!current || current.state === 'removed') return null;
      // The whole update is checked before anything is removed: bad input changes nothing.
      check(session);
      if (this.removing.has(sessionId) || this.state.store.runsBySession(sessionId).some((r) => isWorking(r.state)))
        throw busy('it has queued or running turns, or its checkout is being removed');
      // The checkout's writer lock for the check and the removal: no turn (of any session) in it meanwhile.
      release = lock({ sessionId, workspace: current.path, writer: true });
      if (!release) throw busy("another session's turn is queued or running in its checkout");
      this.removing.add(sessionId);
      return current;
    });
    const done = () => {
      this.removing.delete(sessionId);
      release?.();
      release = null;
    };
    if (!checkout) return { checkout: null, done };
    try {
      // Nothing on disk (never made, or removed before a crash could record it): nothing to lose.
      if (checkout.state === 'ready' && existsSync(checkout.path)) await this.removeChecked(checkout);
    } catch (err) {
      done();
      throw err;
    }
    return { checkout: { ...checkout, state: 'removed' }, done };
  }

  private async removeChecked(checkout: CheckoutRecord): Promise<void> {
    // A crash may have cut a turn short before its branch came back: bring it back first.
    const notBack = await syncBranch(this.git, checkout);
    const blocker = await removalBlocker(this.git, checkout);
    if (blocker) {
      const why = notBack === null ? '' : ` (the branch could not be brought back: ${notBack})`;
      throw new ControllerError(
        'checkout_has_unsaved_work',
        `archiving would remove this session's checkout and lose work: ${blocker}${why}. Nothing was changed`,
        `Commit the work on the branch ${checkout.branch} (ask droid in this session) or copy it from ${checkout.workspace}, then archive again; or keep the session unarchived.`,
      );
    }
    await removeCheckout(checkout);
    this.state.log.info({ checkout: checkout.path, branch: checkout.branch }, 'session checkout removed; its branch stays');
  }
}

function readerRefusal(): ControllerError {
  return new ControllerError(
    'isolation_not_for_readers',
    'isolation: "worktree" is for writer sessions; an autonomy off (read-only) session needs no copy of the repository',
    'Omit isolation for a read-only session (it reads the workspace itself), or pass an autonomy above off.',
  );
}

function busy(why: string): ControllerError {
  return new ControllerError(
    'session_busy',
    `this session cannot change now: ${why}`,
    'Wait for the session to settle (droid_wait_for_sessions), then retry.',
    true,
  );
}
