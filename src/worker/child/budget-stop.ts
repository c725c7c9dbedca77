/**
 * A turn's spend ceiling, watched in the worker: every running figure droid
 * reports is passed on and compared with the limit, and the first one that
 * reaches it asks for the interrupt (run-turn.ts does it through the
 * protocol, as for a cancel). droid reports usage once per model call, so
 * the turn can overshoot by at most the step that crossed the limit.
 */
import type { TokenUsage } from '../../droid/notifications.js';
import { hasLimit, reached, spendOf, type Budget } from '../../shared/budget.js';
import type { Reached } from '../../shared/turn-stop.js';

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
