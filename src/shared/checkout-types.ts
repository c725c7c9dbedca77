/**
 * A session's own checkout (issue 21, `isolation: "worktree"`) and what a
 * writer turn left on its branch, in the shapes every layer shares: the
 * store keeps and re-checks them, the tools show them. What makes and
 * inspects checkouts lives in src/worktree/.
 */
import { z } from 'zod';
import { agree, type Same } from '../droid/schemas.js';

export const CHECKOUT_STATES = ['pending', 'ready', 'removed'] as const;
/** pending: recorded at acceptance, made when the first turn starts; ready: on disk; removed: archived away (the branch stays). */
export type CheckoutState = (typeof CHECKOUT_STATES)[number];

export interface CheckoutRecord {
  isolation: 'worktree';
  /** The checkout's top folder: `<worktrees.directory>/<session id>`. */
  path: string;
  /** Where the session's turns run: `path`, or the same subfolder the session was created in. */
  workspace: string;
  /** The top-level work tree of the repository it was made from. */
  repository: string;
  /** That repository's git directory, where the branch is kept. */
  gitDir: string;
  /** `droid/<session id>`, in the repository and in the checkout. */
  branch: string;
  /** The commit it was made from; null until it is made. */
  base: string | null;
  state: CheckoutState;
}

/** One commit of the branch that its base does not have. */
export interface CommitSummary {
  sha: string;
  subject: string;
}

/** The session branch after a turn: its commits ahead of the base (newest first, bounded). */
export interface CommitsAhead {
  branch: string;
  ahead: number;
  commits: CommitSummary[];
  /** Commits ahead left out of `commits`. */
  truncated: number;
  /**
   * True when the repository's branch holds the checkout's branch (fast-forwarded
   * after the turn). False: it could not be brought there (diverged, or git
   * failed); the commits are then only in the checkout.
   */
  inRepository: boolean;
  /** With inRepository false: why the branch could not be brought back (diverged, over the size cap, too slow, git failed). */
  notBroughtBack?: string;
}

export const checkoutRecord = z
  .object({
    isolation: z.literal('worktree'),
    path: z.string().startsWith('/'),
    workspace: z.string().startsWith('/'),
    repository: z.string().startsWith('/'),
    gitDir: z.string().startsWith('/'),
    branch: z.string().min(1),
    base: z.string().nullable(),
    state: z.enum(CHECKOUT_STATES),
  })
  .strict();

export const commitsAhead = z
  .object({
    branch: z.string().min(1),
    ahead: z.number().int().nonnegative(),
    commits: z.array(z.object({ sha: z.string(), subject: z.string() }).strict()),
    truncated: z.number().int().nonnegative(),
    inRepository: z.boolean(),
    notBroughtBack: z.string().optional(),
  })
  .strict();

agree<Same<z.infer<typeof checkoutRecord>, CheckoutRecord>>();
agree<Same<z.infer<typeof commitsAhead>, CommitsAhead>>();
