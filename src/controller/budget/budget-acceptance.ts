/**
 * A caller's budget at acceptance (acceptance.ts): its shape checked before
 * anything else is looked at, then turned into the parts the request is
 * built from: the fingerprint's, the session's (create) or the run's (send),
 * and the in-chain checks made only for a request that is not a replay (as
 * for autonomy): within the host's ceilings (an operator may have lowered
 * one since the original was accepted: its replay still replays), and that
 * a follow-up without its own budget still has some of the session's left.
 */
import { NO_CEILINGS, type Budget, type HostCeilings } from '../../shared/budget.js';
import type { RunRecord, SessionRecord } from '../../shared/records.js';
import { assertNotExhausted, assertSessionBudget, assertTurnBudget, budgetOf, type BudgetInput } from './budget-policy.js';

export type { BudgetInput } from './budget-policy.js';

export interface AcceptedBudget {
  /** Spread into the intent: the budget is part of the fingerprint, only when given. */
  intent: { budget?: Budget };
  /** Spread into a new session record (create). */
  session: { budget?: Budget };
  /** The run's own budget (send). */
  turn: Budget | undefined;
  /** In the chain, after the replay lookup (create): refuses a budget above the host's ceilings. */
  assertCeilings(): void;
  /** In the chain, after the replay lookup (send): the ceilings, then budget_exhausted when nothing is left for this turn. */
  assertLeft(session: SessionRecord, runs: readonly RunRecord[]): void;
}

export function acceptBudget(deps: { ceilings?: HostCeilings }, scope: 'session' | 'turn', input: BudgetInput | undefined): AcceptedBudget {
  const host = deps.ceilings ?? NO_CEILINGS;
  const budget = budgetOf(input);
  const assertCeilings = () => (scope === 'session' ? assertSessionBudget(budget, host) : assertTurnBudget(budget, host));
  return {
    assertCeilings,
    intent: budget ? { budget } : {},
    session: scope === 'session' && budget ? { budget } : {},
    turn: scope === 'turn' ? budget : undefined,
    assertLeft: (session, runs) => {
      assertCeilings();
      assertNotExhausted(scope === 'turn' ? budget : undefined, session, runs, host);
    },
  };
}

/** The run with its own budget, when it has one (older runs and runs without one stay as they were). */
export function withBudget(run: RunRecord, budget: Budget | undefined): RunRecord {
  return budget ? { ...run, budget } : run;
}
