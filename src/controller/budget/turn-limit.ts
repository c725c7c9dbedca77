/**
 * The budget of a turn about to start (turn-owner.ts): the ceiling it runs
 * under, recorded with its `starting` commit and sent in its spec, or why it
 * may not start (budget_exhausted, nothing submitted).
 */
import { NO_CEILINGS, type Budget, type HostCeilings } from '../../shared/budget.js';
import type { ErrorInfo, RunRecord, TokenUsage } from '../../shared/records.js';
import type { TurnSpec } from '../../worker/contract/protocol.js';
import { launchLimit } from './budget-policy.js';
import type { ControllerState } from '../controller-state.js';
import { summarizeUsage } from '../sessions/usage.js';

export function budgetAtLaunch(state: ControllerState, run: RunRecord, ceilings: HostCeilings = NO_CEILINGS): { limit?: Budget; refused?: ErrorInfo } {
  const store = state.store;
  // The facts carry every run's usage without reading records back.
  const runs = store.runFactsBySession?.(run.sessionId) ?? store.runsBySession(run.sessionId);
  return launchLimit(run, state.session(run.sessionId), runs, ceilings);
}

/** The spec's spend parts: the limit recorded on the run, and for a resumed turn the session's recorded spend (the worker's fallback baseline). */
export function budgetSpec(state: ControllerState, run: RunRecord): Pick<TurnSpec, 'budget' | 'usageBaseline'> {
  const out: Pick<TurnSpec, 'budget' | 'usageBaseline'> = run.limit ? { budget: run.limit } : {};
  // A new droid session has spent nothing before this turn (turn-spec.ts resumes exactly when droid's id is known).
  if (!state.session(run.sessionId).droidSessionId) return out;
  const store = state.store;
  const runs = (store.runFactsBySession?.(run.sessionId) ?? store.runsBySession(run.sessionId)).filter((r) => r.id !== run.id);
  const { inputTokens, outputTokens, cacheCreationTokens, cacheReadTokens, thinkingTokens, factoryCredits } = summarizeUsage(runs);
  const spent: TokenUsage = { inputTokens, outputTokens, cacheCreationTokens, cacheReadTokens, thinkingTokens, factoryCredits };
  return { ...out, usageBaseline: spent };
}
