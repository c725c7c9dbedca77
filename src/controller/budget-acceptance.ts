/**
 * A caller's budget at acceptance (acceptance.ts): checked against the
 * host's ceilings before anything else is looked at, then turned into the
 * parts the request is built from: the fingerprint's, the session's (create)
 * or the run's (send), and the in-chain check that a follow-up without its
 * own budget still has some of the session's left.
 */
import { NO_CEILINGS, type Budget, type HostCeilings } from '../shared/budget.js';
import type { RunRecord, SessionRecord } from '../shared/records.js';
import { assertNotExhausted, assertSessionBudget, assertTurnBudget, budgetOf, type BudgetInput } from './budget-policy.js';

export type { BudgetInput } from './budget-policy.js';

export interface AcceptedBudget {
  /** Spread into the intent: the budget is part of the fingerprint, only when given. */
  intent: { budget?: Budget };
  /** Spread into a new session record (create). */
  session: { budget?: Budget };
  /** The run's own budget (send). */
  turn: Budget | undefined;
  /** In the chain (send): refuses with budget_exhausted when nothing is left and the turn brings no budget. */
  assertLeft(session: SessionRecord, runs: readonly RunRecord[]): void;
}

export function acceptBudget(deps: { ceilings?: HostCeilings }, scope: 'session' | 'turn', input: BudgetInput | undefined): AcceptedBudget {
  const host = deps.ceilings ?? NO_CEILINGS;
  const budget = budgetOf(input);
  if (scope === 'session') assertSessionBudget(budget, host);
  else assertTurnBudget(budget, host);
  return {
    intent: budget ? { budget } : {},
    session: scope === 'session' && budget ? { budget } : {},
    turn: scope === 'turn' ? budget : undefined,
    assertLeft: (session, runs) => assertNotExhausted(scope === 'turn' ? budget : undefined, session, runs, host),
  };
}

/** The run with its own budget, when it has one (older runs and runs without one stay as they were). */
export function withBudget(run: RunRecord, budget: Budget | undefined): RunRecord {
  return budget ? { ...run, budget } : run;
}
