/**
 * Spend ceilings and how usage is measured against them. Pure; shared by
 * the worker (which stops a turn at its limit) and the controller (which
 * works the limit out and checks it at acceptance).
 *
 * Tokens are every token droid reports for the turn: input, output, cache
 * creation, cache read and thinking. Credits are Factory credits, reported
 * only for Factory-hosted models (never for BYOK custom models).
 */
import type { TokenUsage } from '../droid/notifications.js';
import type { Budget } from './record-schemas.js';

export type { Budget };

/** The operator's ceilings (config): per turn in tokens and credits, per session in credits; null: none. */
export interface HostCeilings {
  maxTurnTokens: number | null;
  maxTurnCredits: number | null;
  maxSessionCredits: number | null;
}

export const NO_CEILINGS: HostCeilings = Object.freeze({ maxTurnTokens: null, maxTurnCredits: null, maxSessionCredits: null });

/** What a turn or session spent: tokens and credits, 0 when nothing was reported. */
export interface Spend {
  tokens: number;
  credits: number;
}

export function tokensOf(u: TokenUsage): number {
  return u.inputTokens + u.outputTokens + u.cacheCreationTokens + u.cacheReadTokens + u.thinkingTokens;
}

export function spendOf(u: TokenUsage | null): Spend {
  return u === null ? { tokens: 0, credits: 0 } : { tokens: tokensOf(u), credits: u.factoryCredits ?? 0 };
}

export function addSpend(a: Spend, b: Spend): Spend {
  return { tokens: a.tokens + b.tokens, credits: Math.round((a.credits + b.credits) * 1e6) / 1e6 };
}

/** The dimension a spend reached (tokens first), with what was spent and the limit; null while under both. */
export function reached(spend: Spend, limit: Budget): { dimension: 'tokens' | 'credits'; spent: number; limit: number } | null {
  if (limit.maxTokens !== null && spend.tokens >= limit.maxTokens) return { dimension: 'tokens', spent: spend.tokens, limit: limit.maxTokens };
  if (limit.maxCredits !== null && spend.credits >= limit.maxCredits) return { dimension: 'credits', spent: spend.credits, limit: limit.maxCredits };
  return null;
}

export function hasLimit(b: Budget): boolean {
  return b.maxTokens !== null || b.maxCredits !== null;
}

/** The smaller of two ceilings per dimension (null: none). */
export function tighter(a: Budget, b: Budget): Budget {
  const min = (x: number | null, y: number | null) => (x === null ? y : y === null ? x : Math.min(x, y));
  return { maxTokens: min(a.maxTokens, b.maxTokens), maxCredits: min(a.maxCredits, b.maxCredits) };
}
