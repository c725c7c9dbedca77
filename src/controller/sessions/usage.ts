/**
 * Token usage and Factory credits summed over turns. Pure.
 *
 * Which turns count: every run that reached droid, i.e. live runs (with
 * their running figure) and all terminal states except a `cancelled` run
 * that never started (dropped from the queue: nothing was submitted, so it
 * is not a turn of work). Queued runs are left out until they start. A
 * total is `final: false` while a counted turn runs, its outcome is
 * unknown, or it ended with only a running figure (`usageLive`: droid's
 * final one never came); a finished turn's figure never changes. A run whose usage is
 * null (droid reported nothing) is a turn, but not a turn with usage, and
 * adds no tokens: unknown is not zero.
 */
import type { TokenUsage } from '../../droid/notifications.js';
import type { RunRecord, SessionRecord } from '../../shared/records.js';
import type { RunFacts } from '../../store/store.js';
import { LIVE_STATES, TERMINAL_STATES } from '../../shared/records.js';
import { ControllerError } from '../../shared/public-error.js';
import { tokensOf } from '../../shared/budget.js';
import { parseRange } from './find.js';

/** Summed token counts; `factoryCredits` is null when no counted turn reported credits. */
export interface UsageSummary extends TokenUsage {
  turns: number;
  turnsWithUsage: number;
  /** Counted turns still running (their figures so far are included). */
  turnsRunning: number;
  /** False while a counted turn runs, its outcome is unknown or its figure is a running one: the sum may be short. */
  final: boolean;
}

/** One model's share (`groupBy: "model"`). */
export interface ModelUsage extends UsageSummary {
  model: string;
}

/** A live run's running figure, held in memory (the turn's); undefined: use the record's. */
export type LiveUsageOf = (runId: string) => TokenUsage | null | undefined;

export interface UsageScope {
  session?: string;
  /** Turns accepted at or after this ISO date-time. */
  after?: string;
  /** Turns accepted before this ISO date-time. */
  before?: string;
  /** Also split the total by the model each turn ran on. */
  groupBy?: 'model';
}

/** The part of the store usage reads (the controller store satisfies it). */
export interface UsageSource {
  readonly sessions: ReadonlyMap<string, SessionRecord>;
  readonly runs: ReadonlyMap<string, RunRecord>;
  runsBySession(sessionId: string): readonly RunRecord[];
  /** What counting needs of every run, without reading records back; used instead of `runs` when present. */
  runFacts?(): Iterable<RunFacts>;
  runFactsBySession?(sessionId: string): readonly RunFacts[];
}

/** A run as usage reads it: its record, or the facts the store holds for it. */
export type UsageRun = RunRecord | RunFacts;

/** Whether a run is one accepted turn of work, final enough to count. */
export function countsAsTurn(run: UsageRun): boolean {
  if (LIVE_STATES.includes(run.state)) return true;
  if (!TERMINAL_STATES.includes(run.state)) return false;
  return run.state !== 'cancelled' || ('started' in run ? run.started : run.startedAt !== null);
}

/** Credits are fractional; rounding hides float noise such as 0.30000000000000004. */
function roundCredits(value: number): number {
  return Math.round(value * 1e6) / 1e6;
}

export function summarizeUsage(runs: Iterable<UsageRun>, live: LiveUsageOf = () => undefined): UsageSummary {
  const sum: UsageSummary = {
    turns: 0,
    turnsWithUsage: 0,
    turnsRunning: 0,
    final: true,
    inputTokens: 0,
    outputTokens: 0,
    cacheCreationTokens: 0,
    cacheReadTokens: 0,
    thinkingTokens: 0,
    factoryCredits: null,
  };
  // A run is one accepted request key; replays return the same run, so
  // counting each run id once is what keeps replays from double counting.
  const seen = new Set<string>();
  let credits: number | null = null;
  for (const run of runs) {
    if (seen.has(run.id) || !countsAsTurn(run)) continue;
    seen.add(run.id);
    sum.turns++;
    const running = LIVE_STATES.includes(run.state);
    if (running) sum.turnsRunning++;
    const u = (running ? live(run.id) : undefined) ?? run.usage;
    // A terminal run whose figure is a running one (no final figure came: droid or its worker died) may have spent more.
    if (running || (u !== null && (run.state === 'unknown' || run.usageLive === true))) sum.final = false;
    if (u === null) continue;
    sum.turnsWithUsage++;
    sum.inputTokens += u.inputTokens;
    sum.outputTokens += u.outputTokens;
    sum.cacheCreationTokens += u.cacheCreationTokens;
    sum.cacheReadTokens += u.cacheReadTokens;
    sum.thinkingTokens += u.thinkingTokens;
    if (u.factoryCredits !== null) credits = (credits ?? 0) + u.factoryCredits;
  }
  sum.factoryCredits = credits === null ? null : roundCredits(credits);
  return sum;
}

/**
 * The runs in scope: one session's runs, or every run, optionally limited to
 * those accepted in [after, before). Acceptance time, not end time: it is
 * known for every run and never changes, so a turn stays in the same range
 * (and a range total stays stable) whether it is queued, running or done.
 */
/** The total split by model, largest token count first; `runs` are records (facts hold no model). */
export function usageByModel(runs: Iterable<RunRecord>, live?: LiveUsageOf): ModelUsage[] {
  const byModel = new Map<string, RunRecord[]>();
  for (const run of runs) {
    const list = byModel.get(run.settings.model) ?? [];
    list.push(run);
    byModel.set(run.settings.model, list);
  }
  const rows = [...byModel].map(([model, list]) => ({ model, ...summarizeUsage(list, live) })).filter((row) => row.turns > 0);
  return rows.sort((a, b) => tokensOf(b) - tokensOf(a) || (a.model < b.model ? -1 : a.model > b.model ? 1 : 0));
}

/** `records`: the runs' records rather than the store's facts (grouping by model needs them). */
export function selectRunsForUsage(source: UsageSource, scope: UsageScope, records = false): UsageRun[] {
  const { afterMs, beforeMs } = parseRange(scope.after, scope.before);
  let candidates: Iterable<UsageRun>;
  if (scope.session !== undefined) {
    if (typeof scope.session !== 'string' || !source.sessions.has(scope.session)) {
      throw new ControllerError('session_not_found', 'no session with this handle exists on this controller', 'Use a handle returned by droid_create_session.');
    }
    candidates = (records ? undefined : source.runFactsBySession?.(scope.session)) ?? source.runsBySession(scope.session);
  } else {
    candidates = (records ? undefined : source.runFacts?.()) ?? source.runs.values();
  }
  if (afterMs === null && beforeMs === null) return [...candidates];
  const selected: UsageRun[] = [];
  for (const run of candidates) {
    const at = 'acceptedMs' in run ? run.acceptedMs : Date.parse(run.acceptedAt);
    if (Number.isNaN(at)) continue; // cannot be placed in any range
    if (afterMs !== null && at < afterMs) continue;
    if (beforeMs !== null && at >= beforeMs) continue;
    selected.push(run);
  }
  return selected;
}
