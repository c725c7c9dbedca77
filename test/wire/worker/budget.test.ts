/**
 * Live usage and spend ceilings in the worker, against the real droid CLI
 * with the scripted model reporting usage on every model step (and the
 * protocol-peer mock for credits, which BYOK models never report).
 *
 * What droid makes of the scripted model's `usage` (measured, 0.225.2):
 * inputTokens = prompt_tokens − prompt_tokens_details.cached_tokens,
 * cacheReadTokens = cached_tokens, outputTokens = completion_tokens;
 * completion_tokens_details.reasoning_tokens is not mapped to thinkingTokens.
 */
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { tokensOf } from '../../../src/shared/budget.js';
import type { TurnSpec } from '../../../src/worker/contract/protocol.js';
import { waitForNoProcesses } from '../../support/processes.js';
import { STEP_TOKENS, usageSteps } from '../../support/usage-steps.js';
import { baseSpec, newTag, realDroidSpec, runWorkerTurn, useRealDroid } from '../../support/wire-harness.js';

let workspace: string;
let tag: string;
const real = useRealDroid();

function spec(over: Partial<TurnSpec>): TurnSpec {
  tag = newTag();
  workspace = realpathSync(mkdtempSync(join(tmpdir(), 'droid-ws-')));
  return realDroidSpec(real.bed, tag, { workspace, autonomy: 'high', ...over });
}

afterEach(async () => {
  await waitForNoProcesses(tag, 10_000);
  rmSync(workspace, { recursive: true, force: true });
});

const steps = usageSteps;

describe('live usage and budgets, real droid CLI', () => {
  it('reports the running usage after every model step, rising, and the final figure equals the last one', async () => {
    const turn = runWorkerTurn(spec({ prompt: `look ${steps(3, 100)}` }), tag);
    const result = await turn.done;
    expect(result.outcome).toBe('succeeded');
    // 3 tool steps and the reply: 4 model calls, reported as they happen (a busy host may fold two into one report).
    // The reply's own report can come after the turn's end on a busy host (seen in CI: the live series stopped
    // at 330 of 440); the final figure, not the live one, settles the turn.
    const seen = turn.usages.map(tokensOf);
    expect(seen.length).toBeGreaterThanOrEqual(2);
    for (let i = 0; i < seen.length; i++) {
      expect(seen[i]! % STEP_TOKENS).toBe(0);
      if (i > 0) expect(seen[i]!).toBeGreaterThan(seen[i - 1]!);
    }
    expect(seen.at(-1)).toBeGreaterThanOrEqual(3 * STEP_TOKENS);
    expect(seen.at(-1)).toBeLessThanOrEqual(tokensOf(result.usage!));
    expect(tokensOf(result.usage!)).toBe(4 * STEP_TOKENS);
    expect(result.usage).toMatchObject({ inputTokens: 400, outputTokens: 40, factoryCredits: null });
  });

  it("counts a resumed turn's usage from where the session stood, not the session's total", async () => {
    const first = await runWorkerTurn(spec({ prompt: `look ${steps(2, 0)}` }), tag).done;
    expect(first.usage).toMatchObject({ inputTokens: 300 });
    await waitForNoProcesses(tag, 10_000);
    const resumed = realDroidSpec(real.bed, tag, {
      workspace,
      session: { mode: 'resume', droidSessionId: first.droidSessionId! },
      prompt: `again ${steps(1, 0)}`,
    });
    const turn = runWorkerTurn(resumed, tag);
    const result = await turn.done;
    expect(result.outcome).toBe('succeeded');
    // One tool step and the reply, counted from the session's 330 at the start: the tool step's report
    // comes before the reply (the reply's may come after the turn's end, see above).
    expect(turn.usages.map(tokensOf)[0]).toBe(STEP_TOKENS);
    expect(result.usage).toMatchObject({ inputTokens: 200, outputTokens: 20 });
  });

  it('interrupts a turn at its token ceiling: interrupted, budget_exceeded, spent ≥ limit by at most one step', async () => {
    const limit = 250;
    const before = real.bed.model.requests.length;
    const turn = runWorkerTurn(spec({ prompt: `loop ${steps(12, 400)}`, budget: { maxTokens: limit, maxCredits: null } }), tag);
    const result = await turn.done;
    expect(result.outcome).toBe('interrupted');
    expect(result.reason).toBe('cancelled');
    expect(result.error).toMatchObject({ code: 'budget_exceeded', retryable: false });
    expect(result.error!.message).toContain(`limit ${limit} tokens`);
    const spent = tokensOf(result.usage!);
    expect(spent).toBeGreaterThanOrEqual(limit);
    expect(spent - limit).toBeLessThanOrEqual(STEP_TOKENS);
    // The loop asked for 13 model calls; it stopped after the third (a fourth may have begun).
    expect(real.bed.model.requests.length - before).toBeLessThanOrEqual(4);
  });

  it('without a budget the same loop is not interrupted', async () => {
    const result = await runWorkerTurn(spec({ prompt: `loop ${steps(3, 0)}`, budget: { maxTokens: null, maxCredits: null } }), tag).done;
    expect(result.outcome).toBe('succeeded');
    expect(tokensOf(result.usage!)).toBe(4 * STEP_TOKENS);
  });
});

describe('credit ceiling (protocol-peer mock: credits as a Factory model reports them)', () => {
  it('interrupts at the credit limit and keeps the running figure when the final one is all zeros', async () => {
    tag = newTag();
    workspace = realpathSync(mkdtempSync(join(tmpdir(), 'droid-ws-')));
    const s = baseSpec(tag, {}, { workspace, prompt: 'spend <<mock:credits>>', budget: { maxTokens: null, maxCredits: 1.2 } });
    const turn = runWorkerTurn(s, tag);
    const result = await turn.done;
    expect(result.outcome).toBe('interrupted');
    expect(result.error).toMatchObject({ code: 'budget_exceeded' });
    expect(result.error!.message).toContain('limit 1.2 credits');
    // Three steps of 0.5 reach 1.2; droid's cancelled turn reports zeros, so the running figure stands.
    expect(result.usage).toMatchObject({ inputTokens: 30, factoryCredits: 1.5 });
    expect(turn.usages.map((u) => u.factoryCredits)).toEqual([0.5, 1, 1.5]);
  });

  it("a resumed turn whose load_session carries no totals counts from the controller's recorded spend, and its budget holds", async () => {
    tag = newTag();
    workspace = realpathSync(mkdtempSync(join(tmpdir(), 'droid-ws-')));
    const sessions = mkdtempSync(join(tmpdir(), 'droid-mock-state-'));
    try {
      const first = await runWorkerTurn(baseSpec(tag, { MOCK_DROID_STATE_DIR: sessions }, { workspace, prompt: 'hello' }), tag).done;
      expect(first.usage).not.toBeNull();
      const resume = { mode: 'resume' as const, droidSessionId: first.droidSessionId! };
      const env = { MOCK_DROID_STATE_DIR: sessions, MOCK_DROID_LOAD_NO_USAGE: '1' };
      const s = baseSpec(tag, env, {
        workspace,
        session: resume,
        prompt: 'spend <<mock:credits>>',
        budget: { maxTokens: null, maxCredits: 1.2 },
        usageBaseline: first.usage!,
      });
      const turn = runWorkerTurn(s, tag);
      const result = await turn.done;
      expect(result.error).toMatchObject({ code: 'budget_exceeded' });
      expect(turn.usages.map((u) => u.factoryCredits)).toEqual([0.5, 1, 1.5]);
      expect(result.diagnostics.join('\n')).toContain(
        "load_session carried no usage totals: this turn's running figure is counted from the controller's record",
      );
    } finally {
      rmSync(sessions, { recursive: true, force: true });
    }
  });
});
