/**
 * Budgets: what a caller may ask for, and the ceiling a turn runs under.
 * Pure.
 *
 * - `droid_create_session {budget}` is the session's total over all its
 *   turns; `droid_send_message {budget}` is that turn's own. A follow-up
 *   without one runs under what is left of the session's budget, each
 *   dimension (tokens, credits) on its own; one with its own budget runs
 *   under that instead, in both dimensions (the way to continue a session
 *   whose budget is spent: {maxTokens} alone is enough after its credits ran out).
 * - The host's ceilings (config) always hold as well: maxTurnTokens and
 *   maxTurnCredits per turn, maxSessionCredits over the session's turns.
 *   A caller's budget above one is refused at acceptance, never lowered
 *   (the rule of autonomy).
 * - The limit is worked out when the turn starts, from the finished turns'
 *   figures (a session runs one turn at a time, so every earlier turn has
 *   ended by then), and recorded on the run (`limit`).
 */
import { addSpend, hasLimit, spendOf, tighter, type Budget, type HostCeilings, type Spend } from '../../shared/budget.js';
import { ControllerError } from '../../shared/public-error.js';
import type { ErrorInfo, RunRecord, SessionRecord } from '../../shared/records.js';

/** A budget as a caller gives it (the tool schema checked its shape). */
export interface BudgetInput {
  maxTokens?: number;
  maxCredits?: number;
}

const BUDGET_ACTION = 'Pass budget as {maxTokens?: a whole number above 0, maxCredits?: a number above 0}, or omit it.';

/** The stored form of a caller's budget; undefined when none was given. */
export function budgetOf(input: BudgetInput | undefined): Budget | undefined {
  if (input === undefined) return undefined;
  const { maxTokens, maxCredits } = input;
  if (maxTokens !== undefined && !(Number.isSafeInteger(maxTokens) && maxTokens > 0)) {
    throw new ControllerError('invalid_arguments', 'budget.maxTokens must be a whole number above 0', BUDGET_ACTION);
  }
  if (maxCredits !== undefined && !(Number.isFinite(maxCredits) && maxCredits > 0)) {
    throw new ControllerError('invalid_arguments', 'budget.maxCredits must be a number above 0', BUDGET_ACTION);
  }
  if (maxTokens === undefined && maxCredits === undefined) {
    throw new ControllerError('invalid_arguments', 'budget names no ceiling', BUDGET_ACTION);
  }
  return { maxTokens: maxTokens ?? null, maxCredits: maxCredits ?? null };
}

function aboveCeiling(what: string, asked: number, ceiling: number, key: string): ControllerError {
  return new ControllerError(
    'budget_above_ceiling',
    `${what} ${asked} is above this host's ceiling (${key} ${ceiling})`,
    `Pass a budget of at most ${ceiling}, or omit it; the ceiling is an operator setting (${key}).`,
  );
}

/** A session's total budget (create): only the host's session ceiling bounds it. */
export function assertSessionBudget(budget: Budget | undefined, host: HostCeilings): void {
  if (budget?.maxCredits != null && host.maxSessionCredits !== null && budget.maxCredits > host.maxSessionCredits) {
    throw aboveCeiling('budget.maxCredits', budget.maxCredits, host.maxSessionCredits, 'maxSessionCredits');
  }
}

/** One turn's budget (send): the per-turn ceilings, and the session ceiling for credits. */
export function assertTurnBudget(budget: Budget | undefined, host: HostCeilings): void {
  if (budget === undefined) return;
  if (budget.maxTokens !== null && host.maxTurnTokens !== null && budget.maxTokens > host.maxTurnTokens) {
    throw aboveCeiling('budget.maxTokens', budget.maxTokens, host.maxTurnTokens, 'maxTurnTokens');
  }
  if (budget.maxCredits !== null && host.maxTurnCredits !== null && budget.maxCredits > host.maxTurnCredits) {
    throw aboveCeiling('budget.maxCredits', budget.maxCredits, host.maxTurnCredits, 'maxTurnCredits');
  }
  assertSessionBudget(budget, host);
}

/** What the session's runs other than `exceptRunId` spent, by their recorded figures. */
function sessionSpend(runs: readonly Pick<RunRecord, 'id' | 'usage'>[], exceptRunId?: string): Spend {
  let spend: Spend = { tokens: 0, credits: 0 };
  for (const run of runs) if (run.id !== exceptRunId) spend = addSpend(spend, spendOf(run.usage));
  return spend;
}

function remaining(max: number | null, spent: number): number | null {
  return max === null ? null : Math.round((max - spent) * 1e6) / 1e6;
}

/** What the caller's side allows: the turn's own budget (both dimensions), else what is left of the session's. */
function callerLimit(turn: Budget | undefined, session: Budget | undefined, spent: Spend): Budget {
  if (turn) return turn;
  return { maxTokens: remaining(session?.maxTokens ?? null, spent.tokens), maxCredits: remaining(session?.maxCredits ?? null, spent.credits) };
}

/** The turn's ceiling: the caller's, then the host's. May be ≤ 0 (spent). */
function turnLimit(turn: Budget | undefined, session: Budget | undefined, spent: Spend, host: HostCeilings): Budget {
  const perTurn: Budget = { maxTokens: host.maxTurnTokens, maxCredits: host.maxTurnCredits };
  return tighter(tighter(callerLimit(turn, session, spent), perTurn), hostSessionLeft(host, spent));
}

function hostSessionLeft(host: HostCeilings, spent: Spend): Budget {
  return { maxTokens: null, maxCredits: remaining(host.maxSessionCredits, spent.credits) };
}

const gone = (max: number | null) => max !== null && max <= 0;

/**
 * Why a turn may not start: some ceiling has nothing left. The host's
 * session ceiling first (no budget of the caller's lifts it: only a new
 * session does), then the session's own budget (a message's own budget
 * replaces it). Null: it may start. A turn's own budget or a per-turn host
 * ceiling is never spent before the turn runs.
 */
function exhaustion(turn: Budget | undefined, session: Budget | undefined, spent: Spend, host: HostCeilings): { error: ErrorInfo; action: string } | null {
  const credits = `${spent.credits} credits`;
  if (gone(hostSessionLeft(host, spent).maxCredits)) {
    return exhausted(
      `this session's turns used ${credits}, this host's ceiling for a session (maxSessionCredits ${host.maxSessionCredits})`,
      "No budget of a message lifts the host's ceiling for a session: start a new session with droid_create_session (or have the operator raise maxSessionCredits).",
    );
  }
  const left = callerLimit(turn, session, spent);
  const dimension = gone(left.maxTokens)
    ? { spent: `${spent.tokens} tokens`, key: 'maxTokens', max: session?.maxTokens }
    : gone(left.maxCredits)
      ? { spent: credits, key: 'maxCredits', max: session?.maxCredits }
      : null;
  if (dimension === null) return null;
  return exhausted(
    `this session's budget is spent: its turns used ${dimension.spent} of its budget.${dimension.key} ${dimension.max}`,
    "Give this message its own budget (droid_send_message budget {maxTokens?, maxCredits?}, within the host's ceilings): it replaces the session's budget for that turn in both dimensions. Or start a new session with droid_create_session.",
  );
}

function exhausted(message: string, action: string): { error: ErrorInfo; action: string } {
  return { error: { code: 'budget_exhausted', message: `${message}; nothing was submitted`, retryable: false }, action };
}

/**
 * The ceiling a run starts under, or why it may not start. `runs`: the
 * session's runs, the run itself among them. The limit is undefined when
 * neither the caller nor the host set any.
 */
export function launchLimit(
  run: RunRecord,
  session: SessionRecord,
  runs: readonly Pick<RunRecord, 'id' | 'usage'>[],
  host: HostCeilings,
): { limit?: Budget; refused?: ErrorInfo } {
  const spent = sessionSpend(runs, run.id);
  const limit = turnLimit(run.budget, session.budget, spent, host);
  if (!hasLimit(limit)) return {};
  const refused = exhaustion(run.budget, session.budget, spent, host);
  return refused ? { refused: { ...refused.error, message: `${refused.error.message}. ${refused.action}` } } : { limit };
}

/** At acceptance: a follow-up without its own budget on a spent session is refused at once. */
export function assertNotExhausted(turn: Budget | undefined, session: SessionRecord, runs: readonly RunRecord[], host: HostCeilings): void {
  const refused = exhaustion(turn, session.budget, sessionSpend(runs), host);
  if (refused) throw new ControllerError(refused.error.code, refused.error.message.replace('; nothing was submitted', ''), refused.action);
}
