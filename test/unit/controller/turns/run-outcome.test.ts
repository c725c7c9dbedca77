/**
 * How a worker's terminal result becomes the run record, for usage: a
 * result without a figure (its worker died: the parent made a stand-in)
 * keeps the spend so far, marked not final, and so still counts against the
 * session's budget.
 */
import { describe, expect, it } from 'vitest';
import { terminalUpdate } from '../../../../src/controller/turns/run-outcome.js';
import { launchLimit } from '../../../../src/controller/budget/budget-policy.js';
import { NO_CEILINGS } from '../../../../src/shared/budget.js';
import type { TokenUsage } from '../../../../src/shared/records.js';
import { failedResult, stoppedResult } from '../../../../src/worker/contract/protocol.js';
import { runRecord, sessionRecord } from '../../../support/records.js';

const usage = (inputTokens: number): TokenUsage => ({
  inputTokens,
  outputTokens: 0,
  cacheCreationTokens: 0,
  cacheReadTokens: 0,
  thinkingTokens: 0,
  factoryCredits: null,
});
const ctx = { cancelRequested: false, events: [], at: '2030-01-01T00:01:00.000Z' };
const died = failedResult({ code: 'worker_failed', message: 'the worker exited', retryable: false }, { submitted: true });

describe('the terminal figure', () => {
  const live = runRecord({ sessionId: 's', seq: 1, state: 'running', endedAt: null, reason: null, hasResult: false, usage: usage(4_000), usageLive: true });

  it("keeps the running figure, not final, when the result has none (worker died): memory's, else the durable one", () => {
    expect(terminalUpdate(live, died, { ...ctx, running: usage(9_000) })).toMatchObject({ state: 'failed', usage: usage(9_000), usageLive: true });
    expect(terminalUpdate(live, died, { ...ctx, running: null })).toMatchObject({ usage: usage(4_000), usageLive: true });
    const never = runRecord({ sessionId: 's', seq: 1, state: 'starting', usage: null });
    const ended = terminalUpdate(never, died, ctx);
    expect(ended.usage).toBeNull();
    expect(ended.usageLive).toBeUndefined();
  });

  it("is droid's final figure when one came, which then is final", () => {
    const done = stoppedResult({ kind: 'ended', end: 'completed' }, { ...died, usage: usage(9_500) });
    const ended = terminalUpdate(live, done, { ...ctx, running: usage(9_000) });
    expect(ended.usage).toEqual(usage(9_500));
    expect(ended.usageLive).toBeUndefined();
  });

  it('so the spend of a turn whose worker died still counts against the session budget', () => {
    const session = sessionRecord({ id: 's', headRunId: 's-r2', budget: { maxTokens: 10_000, maxCredits: null } });
    const first = terminalUpdate(live, died, { ...ctx, running: usage(9_000) });
    const next = runRecord({ sessionId: 's', seq: 2, state: 'queued', usage: null });
    expect(launchLimit(next, session, [first, next], NO_CEILINGS)).toEqual({ limit: { maxTokens: 1_000, maxCredits: null } });
  });
});

describe('a budget stop droid never confirmed', () => {
  it('keeps budget_exceeded (spent, limit, unconfirmed) and needs attention as an unconfirmed interrupt', () => {
    const live = runRecord({ sessionId: 's', seq: 1, state: 'running', endedAt: null, reason: null, hasResult: false, usage: null });
    const verdict = stoppedResult(
      { kind: 'interrupted', by: 'budget', end: null, reached: { dimension: 'tokens', spent: 330, limit: 300 } },
      { ...died, usage: usage(330) },
    );
    expect(verdict.error).toMatchObject({
      code: 'budget_exceeded',
      message: expect.stringMatching(/330 tokens.*limit 300 tokens.*did not confirm the interrupt/),
    });
    const ended = terminalUpdate(live, verdict, ctx);
    expect(ended).toMatchObject({
      state: 'cancelled',
      cancelReason: 'interrupt_unconfirmed',
      needsAttention: true,
      error: { code: 'budget_exceeded' },
      usageLive: true,
    });
  });
});
