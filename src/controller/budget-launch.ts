/**
 * The budget of a turn about to start (turn-owner.ts): the ceiling it runs
 * under, recorded with its `starting` commit and sent in its spec, or why it
 * may not start (budget_exhausted, nothing submitted).
 */
import { NO_CEILINGS, type Budget } from '../shared/budget.js';
import type { ErrorInfo, RunRecord } from '../shared/records.js';
import { launchLimit } from './budget-policy.js';
import type { ControllerState } from './controller-state.js';

export function budgetAtLaunch(state: ControllerState, run: RunRecord): { limit?: Budget; refused?: ErrorInfo } {
  const store = state.deps.store;
  // The facts carry every run's usage without reading records back.
  const runs = store.runFactsBySession?.(run.sessionId) ?? store.runsBySession(run.sessionId);
  return launchLimit(run, state.session(run.sessionId), runs, state.deps.ceilings ?? NO_CEILINGS);
}
