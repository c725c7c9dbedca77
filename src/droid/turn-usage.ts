/**
 * One turn's token usage from droid's figures. Pure.
 *
 * What droid 0.225.2 sends (measured, docs/PROTOCOL-NOTES.md part 6):
 * `session_token_usage_changed` after every model call, whose `tokenUsage`
 * and `inclusiveTokenUsage` (with sub-agents) are the **session's** running
 * totals, also across processes (`load_session` answers with the same two
 * totals); `agent_turn_completed` carries this turn's own `tokenUsage` and
 * `childTokenUsage`. So the running figure of a turn is the session total
 * now minus the total when the turn began, and its final figure is the
 * turn's own plus its children's: both count sub-agents, so the final
 * figure replaces the running one without a jump between the two.
 */
import { normalizeUsage, type TokenUsage } from './notifications.js';

export type RawUsage = Partial<TokenUsage>;

/** The counts a raw figure holds, unreported fields zero; credits 0 when absent. */
function counts(raw: RawUsage | undefined): Record<Exclude<keyof TokenUsage, 'factoryCredits'>, number> & { factoryCredits: number } {
  const n = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : 0);
  return {
    inputTokens: n(raw?.inputTokens),
    outputTokens: n(raw?.outputTokens),
    cacheCreationTokens: n(raw?.cacheCreationTokens),
    cacheReadTokens: n(raw?.cacheReadTokens),
    thinkingTokens: n(raw?.thinkingTokens),
    factoryCredits: n(raw?.factoryCredits),
  };
}

/** Field by field `a − b` (never below zero), or `a + b`: the raw shape droid sends. */
function combine(a: RawUsage | undefined, b: RawUsage | undefined, sign: 1 | -1): RawUsage {
  const x = counts(a);
  const y = counts(b);
  const f = (k: keyof typeof x) => Math.max(0, x[k] + sign * y[k]);
  return {
    inputTokens: f('inputTokens'),
    outputTokens: f('outputTokens'),
    cacheCreationTokens: f('cacheCreationTokens'),
    cacheReadTokens: f('cacheReadTokens'),
    thinkingTokens: f('thinkingTokens'),
    // Credits are fractional: keep float noise out of the difference.
    factoryCredits: Math.round(f('factoryCredits') * 1e6) / 1e6,
  };
}

/** The session's running total in a `session_token_usage_changed` (or `load_session` answer), sub-agents included when droid says. */
export function sessionTotal(n: { tokenUsage?: unknown; inclusiveTokenUsage?: unknown }): RawUsage | undefined {
  const pick = (v: unknown) => (typeof v === 'object' && v !== null ? (v as RawUsage) : undefined);
  return pick(n.inclusiveTokenUsage) ?? pick(n.tokenUsage);
}

/**
 * A resumed turn's baseline: the session's totals in droid's `load_session`
 * answer; when it carries none, what the controller recorded the earlier
 * turns spent (`recorded`; a turn whose figure was never reported counts as
 * nothing, so the running figure may come out high: a budget then stops
 * early, never late), with a note saying so. Null: neither.
 */
export function resumeBaseline(
  loaded: { tokenUsage?: unknown; inclusiveTokenUsage?: unknown },
  recorded: RawUsage | undefined,
): { baseline: RawUsage | null; note?: string } {
  const total = sessionTotal(loaded);
  if (total !== undefined) return { baseline: total };
  const note = recorded
    ? "load_session carried no usage totals: this turn's running figure is counted from the controller's record of the earlier turns"
    : 'load_session carried no usage totals: no running figure, so no budget check, before the turn ends';
  return { baseline: recorded ?? null, note };
}

export class TurnUsageMeter {
  private running: TokenUsage | null = null;

  /**
   * `baseline`: the session's total when the turn began (zeros for a new
   * session; `load_session`'s answer for a resumed one). Null: droid did not
   * say, so no running figure can be told apart from earlier turns' and
   * none is made (the final figure still counts).
   */
  constructor(private readonly baseline: RawUsage | null) {}

  /** This turn's usage so far, or null when nothing was reported (zero is not a report). */
  get current(): TokenUsage | null {
    return this.running;
  }

  /** A new session total; true when this turn's running figure changed. */
  observe(total: RawUsage | undefined): boolean {
    if (this.baseline === null || total === undefined) return false;
    const next = normalizeUsage(combine(total, this.baseline, -1));
    if (next === null || (this.running !== null && sameUsage(this.running, next))) return false;
    this.running = next;
    return true;
  }

  /**
   * The turn's final figure from `agent_turn_completed`: its own usage plus
   * its sub-agents'. All zeros (droid's "not reported") keeps the running
   * figure, which is then the best known.
   */
  final(n: { tokenUsage?: unknown; childTokenUsage?: unknown }): TokenUsage | null {
    const own = typeof n.tokenUsage === 'object' && n.tokenUsage !== null ? (n.tokenUsage as RawUsage) : undefined;
    const children = typeof n.childTokenUsage === 'object' && n.childTokenUsage !== null ? (n.childTokenUsage as RawUsage) : undefined;
    if (own === undefined && children === undefined) return this.running;
    return normalizeUsage(combine(own, children, 1)) ?? this.running;
  }
}

export function sameUsage(a: TokenUsage, b: TokenUsage): boolean {
  return (
    a.inputTokens === b.inputTokens &&
    a.outputTokens === b.outputTokens &&
    a.cacheCreationTokens === b.cacheCreationTokens &&
    a.cacheReadTokens === b.cacheReadTokens &&
    a.thinkingTokens === b.thinkingTokens &&
    a.factoryCredits === b.factoryCredits
  );
}
