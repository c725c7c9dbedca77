/**
 * A turn's spend ceiling, watched in the worker: every running figure droid
 * reports is passed on and compared with the limit, and the first one that
 * reaches it asks for the interrupt (run-turn.ts does it through the
 * protocol, as for a cancel). droid reports usage once per model call, so
 * the turn can overshoot by at most the step that crossed the limit.
 */
import type { ErrorInfo } from '../../droid/errors.js';
import type { TokenUsage } from '../../droid/notifications.js';
import { hasLimit, reached, spendOf, type Budget } from '../../shared/budget.js';

export type Reached = NonNullable<ReturnType<typeof reached>>;

export interface BudgetWatch {
  /** A new running figure of the turn: reported, then checked. */
  onUsage(usage: TokenUsage): void;
  /** Resolves the first time the running figure reaches the limit; never without a limit. */
  readonly hit: Promise<Reached>;
}

export function watchBudget(limit: Budget | undefined, report: (usage: TokenUsage) => void): BudgetWatch {
  let resolveHit!: (r: Reached) => void;
  const hit = new Promise<Reached>((resolve) => (resolveHit = resolve));
  let done = false;
  return {
    hit,
    onUsage(usage) {
      report(usage);
      if (done || limit === undefined || !hasLimit(limit)) return;
      const over = reached(spendOf(usage), limit);
      if (over === null) return;
      done = true;
      resolveHit(over);
    },
  };
}

function amount(r: Reached, value: number): string {
  return r.dimension === 'tokens' ? `${value} tokens` : `${value} credits`;
}

/**
 * How a turn the budget interrupted ends (droid's `completed` aside):
 * `interrupted` with budget_exceeded once droid confirms with another end.
 * Never confirmed (the group is killed): still budget_exceeded, so a caller
 * sees why it stopped, and `cancelled` as for any unconfirmed interrupt (the
 * controller records it as interrupt_unconfirmed, needing attention).
 */
export function budgetStopped(r: Reached, end: { reason: string } | undefined): { outcome: 'interrupted' | 'cancelled'; reason: string | null; error: ErrorInfo } {
  const error = budgetExceeded(r);
  if (end) return { outcome: 'interrupted', reason: end.reason, error };
  return { outcome: 'cancelled', reason: null, error: { ...error, message: `${error.message}; droid did not confirm the interrupt in time` } };
}

/** The run's error when the budget stopped it: what was spent when the check fired, and the limit. */
function budgetExceeded(r: Reached): ErrorInfo {
  return {
    code: 'budget_exceeded',
    message:
      `the turn reached its budget: ${amount(r, r.spent)} spent when droid last reported usage, limit ${amount(r, r.limit)}; ` +
      'droid was interrupted (usage is checked whenever droid reports it, so a turn can overshoot by one model step)',
    retryable: false,
  };
}
