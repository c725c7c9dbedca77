/**
 * A session's own checkout (issue 21, `isolation: "worktree"`) and what a
 * writer turn left on its branch, in the shapes every layer shares: the
 * store keeps and re-checks them, the tools show them. What makes and
 * inspects checkouts lives in src/worktree/.
 */
import { z } from 'zod';

export const CHECKOUT_STATES = ['pending', 'ready', 'removed'] as const;

export const checkoutRecord = z
  .object({
    isolation: z.literal('worktree'),
    /** The checkout's top folder: `<worktrees.directory>/<session id>`. */
    path: z.string().startsWith('/'),
    /** Where the session's turns run: `path`, or the same subfolder the session was created in. */
    workspace: z.string().startsWith('/'),
    /** The top-level work tree of the repository it was made from. */
    repository: z.string().startsWith('/'),
    /** That repository's git directory, where the branch is kept. */
    gitDir: z.string().startsWith('/'),
    /** `droid/<session id>`, in the repository and in the checkout. */
    branch: z.string().min(1),
    /** The commit it was made from; null until it is made. */
    base: z.string().nullable(),
    /** A fork's checkout (issue 40): made from the tip of this branch of the repository (its source's), not the workspace's HEAD. */
    from: z.string().min(1).optional(),
    /** pending: recorded at acceptance, made when the first turn starts; ready: on disk; removed: archived away (the branch stays). */
    state: z.enum(CHECKOUT_STATES),
  })
  .strict();
export type CheckoutRecord = z.infer<typeof checkoutRecord>;

/** The session branch after a turn: its commits ahead of the base (newest first, bounded). */
export const commitsAhead = z
  .object({
    branch: z.string().min(1),
    ahead: z.number().int().nonnegative(),
    /** One commit of the branch that its base does not have. */
    commits: z.array(z.object({ sha: z.string(), subject: z.string() }).strict()),
    /** Commits ahead left out of `commits`. */
    truncated: z.number().int().nonnegative(),
    /**
     * True when the repository's branch holds the checkout's branch (fast-forwarded
     * after the turn). False: it could not be brought there (diverged, or git
     * failed); the commits are then only in the checkout.
     */
    inRepository: z.boolean(),
    /** With inRepository false: why the branch could not be brought back (diverged, over the size cap, too slow, git failed). */
    notBroughtBack: z.string().optional(),
  })
  .strict();
export type CommitsAhead = z.infer<typeof commitsAhead>;
