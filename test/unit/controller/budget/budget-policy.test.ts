/**
 * Budgets (issue 22): host ceilings refuse larger budgets, a turn's limit is
 * its own budget or what is left of the session's, within the host's, and a
 * spent session refuses a turn without its own budget.
 */
import { describe, expect, it } from 'vitest';
import { assertNotExhausted, assertSessionBudget, assertTurnBudget, budgetOf, launchLimit } from '../../../../src/controller/budget/budget-policy.js';
import { NO_CEILINGS, reached, tokensOf } from '../../../../src/shared/budget.js';
import type { TokenUsage } from '../../../../src/shared/records.js';
import { runRecord, sessionRecord } from '../../../support/records.js';
import { expectRejection } from '../../../support/assertions.js';

const usage = (inputTokens: number, factoryCredits: number | null = null): TokenUsage => ({
  inputTokens,
  outputTokens: 0,
  cacheCreationTokens: 0,
  cacheReadTokens: 0,
  thinkingTokens: 0,
  factoryCredits,
});

describe('budget input', () => {
  it('keeps what was given, null for the rest; refuses an empty or malformed one', () => {
    expect(budgetOf({ maxTokens: 10 })).toEqual({ maxTokens: 10, maxCredits: null });
    expect(budgetOf(undefined)).toBeUndefined();
    for (const bad of [{}, { maxTokens: 0 }, { maxTokens: 1.5 }, { maxCredits: -1 }, { maxCredits: Number.NaN }]) {
      expect(() => budgetOf(bad)).toThrow(expect.objectContaining({ code: 'invalid_arguments' }));
    }
  });

  it("refuses a budget above the host's ceilings, naming the key; at the ceiling is fine", () => {
    const host = { maxTurnTokens: 100, maxTurnCredits: 2, maxSessionCredits: 5 };
    expect(() => assertTurnBudget({ maxTokens: 101, maxCredits: null }, host)).toThrow(
      expect.objectContaining({ code: 'budget_above_ceiling', action: expect.stringContaining('maxTurnTokens') }),
    );
    expect(() => assertTurnBudget({ maxTokens: null, maxCredits: 2.5 }, host)).toThrow(
      expect.objectContaining({ action: expect.stringContaining('maxTurnCredits') }),
    );
    expect(() => assertSessionBudget({ maxTokens: 10 ** 9, maxCredits: 6 }, host)).toThrow(
      expect.objectContaining({ action: expect.stringContaining('maxSessionCredits') }),
    );
    expect(() => assertTurnBudget({ maxTokens: 100, maxCredits: 2 }, host)).not.toThrow();
    // A session total may exceed the per-turn token ceiling: each turn is capped by it anyway.
    expect(() => assertSessionBudget({ maxTokens: 10 ** 9, maxCredits: 5 }, host)).not.toThrow();
    expect(
      expectRejection(() => assertTurnBudget({ maxTokens: null, maxCredits: 6 }, { ...host, maxTurnCredits: null }), 'budget_above_ceiling').action,
    ).toContain('maxSessionCredits');
  });
});

describe('the limit a turn starts under', () => {
  const session = sessionRecord({ id: 's', headRunId: 's-r3', budget: { maxTokens: 1_000, maxCredits: 3 } });
  const earlier = [runRecord({ sessionId: 's', seq: 1, usage: usage(400, 1) }), runRecord({ sessionId: 's', seq: 2, usage: null })];

  it("is what is left of the session's budget for a follow-up without its own", () => {
    const run = runRecord({ sessionId: 's', seq: 3, usage: null });
    expect(launchLimit(run, session, [...earlier, run], NO_CEILINGS)).toEqual({ limit: { maxTokens: 600, maxCredits: 2 } });
  });

  it("is the turn's own budget when it has one, still within the host's ceilings", () => {
    const run = runRecord({ sessionId: 's', seq: 3, usage: null, budget: { maxTokens: 5_000, maxCredits: null } });
    const host = { maxTurnTokens: 4_000, maxTurnCredits: null, maxSessionCredits: 1.5 };
    expect(launchLimit(run, session, [...earlier, run], host)).toEqual({ limit: { maxTokens: 4_000, maxCredits: 0.5 } });
  });

  it('refuses to start when nothing is left, and is none when nobody set any', () => {
    const spent = [runRecord({ sessionId: 's', seq: 1, usage: usage(1_000) })];
    const run = runRecord({ sessionId: 's', seq: 2, usage: null });
    expect(launchLimit(run, session, [...spent, run], NO_CEILINGS).refused).toMatchObject({ code: 'budget_exhausted' });
    // Its own budget replaces the session's in both dimensions.
    const own = { ...run, budget: { maxTokens: 10, maxCredits: null } };
    expect(launchLimit(own, session, [...spent, own], NO_CEILINGS)).toEqual({ limit: { maxTokens: 10, maxCredits: null } });
    const free = sessionRecord({ id: 'f', headRunId: 'f-r1' });
    expect(launchLimit(run, free, [run], NO_CEILINGS)).toEqual({});
  });

  it('counts every token kind and reaches the limit at equality', () => {
    const u = { inputTokens: 1, outputTokens: 2, cacheCreationTokens: 3, cacheReadTokens: 4, thinkingTokens: 5, factoryCredits: 0.5 };
    expect(tokensOf(u)).toBe(15);
    expect(reached({ tokens: 15, credits: 0 }, { maxTokens: 15, maxCredits: null })).toEqual({ dimension: 'tokens', spent: 15, limit: 15 });
    expect(reached({ tokens: 14, credits: 0.5 }, { maxTokens: 15, maxCredits: 1 })).toBeNull();
  });
});

describe('a spent session (budget_exhausted)', () => {
  const creditsSpent = [runRecord({ sessionId: 's', seq: 1, usage: usage(100, 3) })];
  const session = sessionRecord({ id: 's', headRunId: 's-r1', budget: { maxTokens: 1_000, maxCredits: 3 } });

  it("names the dimension spent and says a message's own budget replaces the session's", () => {
    const refused = expectRejection(() => assertNotExhausted(undefined, session, creditsSpent, NO_CEILINGS), 'budget_exhausted');
    expect(refused.message).toMatch(/used 3 credits of its budget\.maxCredits 3/);
    expect(refused.action).toMatch(/own budget.*replaces the session's budget.*both dimensions.*new session/);
    const tokensSpent = [runRecord({ sessionId: 's', seq: 1, usage: usage(1_000) })];
    expect(expectRejection(() => assertNotExhausted(undefined, session, tokensSpent, NO_CEILINGS), 'budget_exhausted').message).toMatch(
      /used 1000 tokens of its budget\.maxTokens 1000/,
    );
  });

  it("lets a message with only {maxTokens} continue after the session's credits ran out, as the action says", () => {
    const own = { maxTokens: 500, maxCredits: null };
    expect(() => assertNotExhausted(own, session, creditsSpent, NO_CEILINGS)).not.toThrow();
    const run = runRecord({ sessionId: 's', seq: 2, usage: null, budget: own });
    expect(launchLimit(run, session, [...creditsSpent, run], NO_CEILINGS)).toEqual({ limit: own });
  });

  it("at the host's session ceiling, offers only a new session: no message budget lifts it", () => {
    const host = { maxTurnTokens: null, maxTurnCredits: null, maxSessionCredits: 3 };
    const free = sessionRecord({ id: 's', headRunId: 's-r1' });
    for (const own of [undefined, { maxTokens: 10, maxCredits: 1 }]) {
      const refused = expectRejection(() => assertNotExhausted(own, free, creditsSpent, host), 'budget_exhausted');
      expect(refused.message).toMatch(/host's ceiling for a session \(maxSessionCredits 3\)/);
      expect(refused.action).toMatch(/new session/);
      expect(refused.action).not.toMatch(/Give this message/);
    }
    const run = runRecord({ sessionId: 's', seq: 2, usage: null, budget: { maxTokens: 10, maxCredits: 1 } });
    expect(launchLimit(run, free, [...creditsSpent, run], host).refused).toMatchObject({
      code: 'budget_exhausted',
      message: expect.stringMatching(/maxSessionCredits.*new session/),
    });
  });
});
