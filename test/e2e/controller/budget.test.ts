/**
 * Live usage and budgets end to end (issue 22): the built server as its own
 * process over stdio, real workers, the real droid CLI and the scripted
 * model reporting usage on every model step (110 tokens a step).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { script } from '../../../src/testbed/scripted-model.js';
import { tokensOf } from '../../../src/shared/budget.js';
import type { RunningServer } from '../../support/mcp-server.js';
import { waitForNoProcesses } from '../../support/processes.js';
import { STEP_TOKENS, usageSteps } from '../../support/usage-steps.js';
import type { Acceptance, SessionView } from '../../support/tool-views.js';
import { serverPerTest, type E2EContext } from '../../support/e2e-context.js';

let ctx: E2EContext;
let server: RunningServer | undefined;
const TAG = `e2e-budget-${process.pid}-${Date.now()}`;
const STEP = STEP_TOKENS;

serverPerTest(
  TAG,
  (made) => (ctx = made),
  () => ({
    ctx,
    take() {
      const s = server;
      server = undefined;
      return s;
    },
  }),
);

let keys = 0;
const key = () => `budget-key-${++keys}`;

const steps = usageSteps;

const tokens = tokensOf;

async function status(s: RunningServer, session: string): Promise<SessionView> {
  return (await s.ok<{ status: SessionView }>('droid_get_session_status', { session })).status;
}

async function settle(s: RunningServer, session: string): Promise<SessionView> {
  for (;;) {
    const waited = await s.ok<{ sessions: SessionView[]; timedOut: boolean }>('droid_wait_for_sessions', { sessions: [session], timeoutSeconds: 30 });
    if (!waited.timedOut) return waited.sessions[0]!;
  }
}

async function until(predicate: () => boolean | Promise<boolean>, ms = 30_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await predicate())) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** A run's last record in the controller's journal, read as an operator would (no tool shows a run that is not the head). */
function storedRun(runId: string): Record<string, unknown> | undefined {
  let found: Record<string, unknown> | undefined;
  for (const line of readFileSync(join(ctx.stateDir, 'journal.jsonl'), 'utf8').split('\n').filter(Boolean)) {
    const value = JSON.parse(line) as { runs?: Array<Record<string, unknown>> };
    for (const r of value.runs ?? []) if (r['id'] === runId) found = r;
  }
  return found;
}

function create(s: RunningServer, args: Record<string, unknown>): Promise<Acceptance> {
  return s.ok<Acceptance>('droid_create_session', { requestKey: key(), replyTo: null, autonomy: 'high', ...args });
}

describe('live usage', () => {
  it('rises while a slow turn runs (status and get_usage, final:false), then is final once', async () => {
    server = await ctx.start();
    const a = await create(server, { workspace: ctx.workspace('live'), prompt: `look ${steps(6, 600)}` });
    const seen: number[] = [];
    let usageWhileRunning: Record<string, unknown> | undefined;
    await until(async () => {
      const v = await status(server!, a.metadata.session);
      if (v.agentState !== 'working') return true;
      const u = v.latestRun.usage;
      if (u !== null) {
        expect(u.final).toBe(false);
        if (seen.at(-1) !== tokens(u)) seen.push(tokens(u));
        usageWhileRunning ??= await server!.ok('droid_get_usage', { session: a.metadata.session });
      }
      return false;
    });
    expect(seen.length).toBeGreaterThanOrEqual(2);
    expect([...seen].sort((x, y) => x - y)).toEqual(seen);
    expect(usageWhileRunning).toMatchObject({ turns: 1, turnsRunning: 1, final: false });
    const done = await settle(server, a.metadata.session);
    expect(done.latestRun.state).toBe('succeeded');
    expect(done.latestRun.usage).toMatchObject({ inputTokens: 700, outputTokens: 70, final: true });
    // No double count when the final figure replaced the running one.
    expect(await server.ok('droid_get_usage', { session: a.metadata.session })).toMatchObject({ turns: 1, turnsRunning: 0, final: true, inputTokens: 700 });
  }, 90_000);

  it('unreported usage stays null while running and after, never zero', async () => {
    server = await ctx.start();
    const a = await create(server, { workspace: ctx.workspace('silent'), prompt: `talk ${script({ text: 'quiet words here', slowMs: 1_500 })}` });
    await until(async () => (await status(server!, a.metadata.session)).latestRun.state === 'running');
    expect((await status(server, a.metadata.session)).latestRun.usage).toBeNull();
    const done = await settle(server, a.metadata.session);
    expect(done.latestRun.usage).toBeNull();
    expect(await server.ok('droid_get_usage', { session: a.metadata.session })).toMatchObject({
      turns: 1,
      turnsWithUsage: 0,
      inputTokens: 0,
      factoryCredits: null,
    });
  }, 60_000);

  it('a crash mid-turn leaves the last durable figure, not final, on an unknown run', async () => {
    server = await ctx.start();
    const a = await create(server, { workspace: ctx.workspace('crash'), prompt: `loop ${steps(30, 500)}` });
    // The first running figure is made durable at once (later ones at most every 10 s).
    await until(() => readFileSync(join(ctx.stateDir, 'journal.jsonl'), 'utf8').includes('"usageLive":true'));
    process.kill(server.pid, 'SIGKILL');
    await server.close().catch(() => undefined);
    server = undefined;
    await waitForNoProcesses(TAG, 15_000);
    server = await ctx.start();
    const v = await status(server, a.metadata.session);
    expect(v.agentState).toBe('unknown');
    expect(v.latestRun.state).toBe('unknown');
    expect(v.latestRun.usage).toMatchObject({ final: false });
    expect(tokens(v.latestRun.usage!)).toBeGreaterThanOrEqual(STEP);
    expect(await server.ok('droid_get_usage', { session: a.metadata.session })).toMatchObject({ final: false });
  }, 90_000);
});

describe('budgets', () => {
  it('stops a turn at its ceiling; the session budget carries to follow-ups and refuses the turn after it is spent', async () => {
    server = await ctx.start();
    const a = await create(server, { workspace: ctx.workspace('cap'), prompt: `one ${steps(1, 0)}`, budget: { maxTokens: 400 } });
    const first = await settle(server, a.metadata.session);
    expect(first.latestRun).toMatchObject({ state: 'succeeded', limit: { maxTokens: 400, maxCredits: null } });
    expect(first.budget).toMatchObject({ maxTokens: 400, spentTokens: 2 * STEP });

    // The follow-up inherits what is left (400 − 220 = 180) and runs into it.
    await server.ok<Acceptance>('droid_send_message', { requestKey: key(), session: a.metadata.session, prompt: `loop ${steps(12, 300)}` });
    const second = await settle(server, a.metadata.session);
    expect(second.latestRun).toMatchObject({ state: 'interrupted', needsAttention: true, limit: { maxTokens: 180 }, error: { code: 'budget_exceeded' } });
    const over = tokens(second.latestRun.usage!) - 180;
    expect(over).toBeGreaterThanOrEqual(0);
    expect(over).toBeLessThanOrEqual(STEP);
    expect(second.needsAttention).toBe(true);

    // Spent: a message without its own budget is refused, and says how to go on.
    const refused = await server.call('droid_send_message', { requestKey: key(), session: a.metadata.session, prompt: 'more' });
    expect(refused.structured.error).toMatchObject({ code: 'budget_exhausted', retryable: false });
    expect(String((refused.structured.error as { action: string }).action)).toMatch(/own budget.*new session/);
    // Its own budget lets it continue.
    await server.ok<Acceptance>('droid_send_message', {
      requestKey: key(),
      session: a.metadata.session,
      prompt: `last ${steps(0, 0)}`,
      budget: { maxTokens: 1_000 },
    });
    const third = await settle(server, a.metadata.session);
    expect(third.latestRun).toMatchObject({ state: 'succeeded', limit: { maxTokens: 1_000 } });
  }, 120_000);

  it('a queued turn refused at launch because the session budget got spent is cancelled alone: a later one with its own budget still runs', async () => {
    server = await ctx.start();
    const a = await create(server, { workspace: ctx.workspace('queued'), prompt: `loop ${steps(12, 300)}`, budget: { maxTokens: 300 } });
    // Both queued behind the first turn, before it spends the session's budget.
    const t2 = await server.ok<Acceptance>('droid_send_message', { requestKey: key(), session: a.metadata.session, prompt: 'without a budget' });
    const t3 = await server.ok<Acceptance>('droid_send_message', {
      requestKey: key(),
      session: a.metadata.session,
      prompt: `own ${steps(0, 0)}`,
      budget: { maxTokens: 1_000 },
    });
    expect([t2.admission.action, t3.admission.action]).toEqual(['queued', 'queued']);
    const done = await settle(server, a.metadata.session);
    expect(done.latestRun).toMatchObject({ run: t3.metadata.run, state: 'succeeded', limit: { maxTokens: 1_000, maxCredits: null } });
    expect(storedRun(a.metadata.run)).toMatchObject({ state: 'interrupted', error: { code: 'budget_exceeded' } });
    expect(storedRun(t2.metadata.run)).toMatchObject({ state: 'cancelled', startedAt: null, needsAttention: true, error: { code: 'budget_exhausted' } });
    // Not a turn of work: get_usage counts the two that ran.
    expect(await server.ok('droid_get_usage', { session: a.metadata.session })).toMatchObject({ turns: 2 });
  }, 120_000);

  it("refuses a budget above the host's ceilings, changing nothing; a turn without one runs under the host's", async () => {
    server = await ctx.start({ maxTurnTokens: 300, maxSessionCredits: 5 });
    const ws = ctx.workspace('ceiling');
    const listed = await server.ok<{ policy: { ceilings: unknown } }>('droid_list_workspaces', {});
    expect(listed.policy.ceilings).toEqual({ maxTurnTokens: 300, maxTurnCredits: null, maxSessionCredits: 5 });
    const before = (await server.ok<{ sessions: unknown[] }>('droid_find_sessions', { limit: 100 })).sessions.length;
    const tooMuch = await server.call('droid_create_session', { requestKey: key(), replyTo: null, workspace: ws, prompt: 'x', budget: { maxCredits: 6 } });
    expect(tooMuch.structured.error).toMatchObject({ code: 'budget_above_ceiling', action: expect.stringContaining('maxSessionCredits') });
    expect((await server.ok<{ sessions: unknown[] }>('droid_find_sessions', { limit: 100 })).sessions).toHaveLength(before);

    const a = await create(server, { workspace: ws, prompt: `loop ${steps(12, 300)}` });
    const capped = await settle(server, a.metadata.session);
    expect(capped.latestRun).toMatchObject({ state: 'interrupted', limit: { maxTokens: 300, maxCredits: 5 }, error: { code: 'budget_exceeded' } });
    const turnTooMuch = await server.call('droid_send_message', { requestKey: key(), session: a.metadata.session, prompt: 'x', budget: { maxTokens: 301 } });
    expect(turnTooMuch.structured.error).toMatchObject({ code: 'budget_above_ceiling', action: expect.stringContaining('maxTurnTokens') });
    expect((await status(server, a.metadata.session)).latestRun.run).toBe(capped.latestRun.run);
  }, 120_000);

  it('a replay keeps its original budget, also after the operator lowered a ceiling; another budget under the same key is a conflict', async () => {
    server = await ctx.start();
    const args = {
      requestKey: key(),
      replyTo: null,
      workspace: ctx.workspace('replay'),
      prompt: `one ${steps(0, 0)}`,
      budget: { maxTokens: 5_000, maxCredits: 4 },
    };
    const a = await server.ok<Acceptance>('droid_create_session', args);
    await settle(server, a.metadata.session);
    const follow = { requestKey: key(), session: a.metadata.session, prompt: `two ${steps(0, 0)}`, budget: { maxTokens: 2_000 } };
    const sent = await server.ok<Acceptance>('droid_send_message', follow);
    await settle(server, a.metadata.session);
    // Both budgets are now above the host's ceilings: their replays still replay, as accepted.
    await server.close();
    server = await ctx.start({ maxTurnTokens: 1_000, maxSessionCredits: 1 });
    const again = await server.ok<Acceptance>('droid_create_session', args);
    expect(again.metadata).toMatchObject({ replayed: true, run: a.metadata.run });
    expect(again.status.budget).toMatchObject({ maxTokens: 5_000, maxCredits: 4 });
    const resent = await server.ok<Acceptance>('droid_send_message', follow);
    expect(resent.metadata).toMatchObject({ replayed: true, run: sent.metadata.run });
    expect(resent.status.latestRun).toMatchObject({ run: sent.metadata.run, limit: { maxTokens: 2_000, maxCredits: null } });
    // A new request with the same budget is above the lowered ceilings.
    const fresh = await server.call('droid_send_message', { ...follow, requestKey: key() });
    expect(fresh.structured.error).toMatchObject({ code: 'budget_above_ceiling' });
    for (const budget of [{ maxTokens: 6_000 }, undefined]) {
      const other = await server.call('droid_create_session', { ...args, budget });
      expect(other.structured.error).toMatchObject({ code: 'request_key_conflict' });
    }
    const spend = await server.ok<{ sessions: SessionView[] }>('droid_find_sessions', { tokensAbove: 100 });
    expect(spend.sessions.map((s) => s.session)).toContain(a.metadata.session);
    expect((await server.ok<{ sessions: SessionView[] }>('droid_find_sessions', { tokensAbove: 1_000_000 })).sessions).toEqual([]);
  }, 60_000);
});
