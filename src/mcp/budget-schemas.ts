/**
 * The tools' schemas for spend: budgets callers give, spend filters, and
 * how usage, limits and ceilings are shown (schemas.ts uses them).
 */
import { z } from 'zod';
import type { tokenUsage } from '../shared/record-schemas.js';

const CHECKED =
  'The cap is checked whenever droid reports usage (after each model call), so a turn can overshoot it by one model step; ' +
  'a turn that reaches it is interrupted: state interrupted, error budget_exceeded, needsAttention true. ' +
  'Tokens count every token droid reports (input, output, cache creation, cache read, thinking); credits are Factory credits, ' +
  'reported only for Factory-hosted models. Above a host ceiling (droid_list_workspaces policy.ceilings): budget_above_ceiling, nothing accepted.';

function budget(what: string) {
  return z
    .strictObject({
      maxTokens: z.number().int().positive().max(Number.MAX_SAFE_INTEGER).optional().describe('At most this many tokens.'),
      maxCredits: z.number().positive().max(1e12).optional().describe('At most this many Factory credits.'),
    })
    .refine((b) => b.maxTokens !== undefined || b.maxCredits !== undefined, { message: 'a budget names maxTokens, maxCredits or both' })
    .describe(`${what} ${CHECKED}`);
}

export const budgetInput = {
  session: budget(
    "The session's total budget across all its turns. Follow-ups without their own budget run under what is left; once it is spent they are refused with budget_exhausted.",
  ),
  turn: budget(
    "This turn's own budget, instead of what is left of the session's (the way to continue a session whose budget is spent). The host's ceilings still hold.",
  ),
};

const above = (what: string) =>
  z.number().min(0).max(1e15).optional().describe(`Sessions whose turns spent more than this many ${what} (a running turn's figure so far included).`);

export const spendFilters = { tokensAbove: above('tokens'), creditsAbove: above('Factory credits') };

const ceiling = z.number().nullable();

export const budgetOutputs = {
  runUsage: (usage: typeof tokenUsage) =>
    usage
      .extend({
        final: z.boolean().describe("false while the turn runs (usage so far), or when it ended without droid's final figure (a crash, an unconfirmed stop)."),
      })
      .nullable()
      .describe('Token usage of the turn; null when droid reported none (never zero for unknown).'),
  limit: z
    .object({ maxTokens: ceiling, maxCredits: ceiling })
    .nullable()
    .describe("The ceiling the turn ran under (its budget, or what was left of the session's, and the host's ceilings), null: none."),
  session: z
    .object({ maxTokens: ceiling, maxCredits: ceiling, spentTokens: z.number(), spentCredits: z.number() })
    .nullable()
    .describe("The session's total budget and what its turns spent so far (a running turn's figure included); null: no session budget."),
  ceilings: z
    .object({ maxTurnTokens: ceiling, maxTurnCredits: ceiling, maxSessionCredits: ceiling })
    .describe('The host ceilings a budget may not exceed; null: none.'),
  usageSummary: (usage: typeof tokenUsage) => {
    const summary = usage.extend({
      turns: z.number(),
      turnsWithUsage: z.number(),
      turnsRunning: z.number().describe('Counted turns still running; their usage so far is included.'),
      final: z.boolean().describe('false while a counted turn runs or its outcome is unknown: the total may still grow.'),
    });
    return summary.extend({
      byModel: z
        .array(summary.extend({ model: z.string() }))
        .optional()
        .describe('With groupBy "model": the total per model, largest first.'),
    });
  },
};
