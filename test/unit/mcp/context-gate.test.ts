/**
 * The gate tool calls wait at while a stdio server's state loads
 * (mcp/context-gate.ts): a call waits until the context is there, for at most
 * its bound, and is then refused as retryable; arguments are checked without
 * waiting. A refused gate answers every waiting and later call with the
 * refusal, without waiting.
 */
import { describe, expect, it } from 'vitest';
import { callTool } from '../../../src/mcp/call-tool.js';
import { ContextGate } from '../../../src/mcp/context-gate.js';
import { startupRefusal } from '../../../src/mcp/startup-refusal.js';
import { StoreError } from '../../../src/store/errors.js';
import type { ToolContext } from '../../../src/mcp/tools.js';

const log = { error() {} };
const context = { controller: { status: () => ({ session: 's1' }) } } as unknown as ToolContext;

describe('the start-up gate', () => {
  it('holds a tool call until the context is there, then serves it', async () => {
    const gate = new ContextGate(10_000);
    let answered = false;
    const call = callTool('droid_get_session_status', { session: 's1' }, () => gate.context(), log).then((r) => {
      answered = true;
      return r;
    });
    await new Promise((r) => setTimeout(r, 50));
    expect(answered).toBe(false);
    gate.open(context);
    expect((await call).structuredContent).toEqual({ status: { session: 's1' } });
    // Once open, no call waits.
    expect((await callTool('droid_get_session_status', { session: 's1' }, () => gate.context(), log)).isError).toBeUndefined();
  });

  it('refuses a call as retryable once it has waited its bound, and checks arguments without waiting', async () => {
    const gate = new ContextGate(100);
    const started = Date.now();
    const result = await callTool('droid_get_session_status', { session: 's1' }, () => gate.context(), log);
    expect(Date.now() - started).toBeGreaterThanOrEqual(90);
    const { error } = JSON.parse((result.content as Array<{ text: string }>)[0]!.text) as { error: { code: string; retryable: boolean } };
    expect(result.isError).toBe(true);
    expect(error).toMatchObject({ code: 'controller_starting', retryable: true });

    const badStarted = Date.now();
    const bad = await callTool('droid_get_session_status', { session: 's1', extra: 1 }, () => new Promise<ToolContext>(() => undefined), log);
    expect(bad.isError).toBe(true);
    expect((bad.content as Array<{ text: string }>)[0]!.text).toContain('invalid_arguments');
    expect(Date.now() - badStarted).toBeLessThan(1_000);
  });

  it('once refused, answers the waiting call and every later one with the refusal: its code, no host path, not retryable', async () => {
    const gate = new ContextGate(10_000);
    const error = (result: Awaited<ReturnType<typeof callTool>>) =>
      (JSON.parse((result.content as Array<{ text: string }>)[0]!.text) as { error: Record<string, unknown> }).error;
    const waiting = callTool('droid_get_session_status', { session: 's1' }, () => gate.context(), log);
    gate.refuse(startupRefusal(new StoreError('state_corrupt', '/srv/state/state.jsonl line 2 is not valid JSON', 'Restore /srv/state from a backup')));
    const first = await waiting;
    expect(first.isError).toBe(true);
    expect(error(first)).toMatchObject({ code: 'state_corrupt', retryable: false, action: expect.stringContaining('operator') });
    expect(JSON.stringify(error(first))).not.toContain('/srv/state');
    const started = Date.now();
    expect(error(await callTool('droid_get_session_status', { session: 's1' }, () => gate.context(), log))).toEqual(error(first));
    expect(Date.now() - started).toBeLessThan(1_000);
    // Anything else than a store refusal: a generic code, still not retryable.
    expect(startupRefusal(new Error('boom')).toPublic()).toMatchObject({ code: 'startup_failed', retryable: false });
  });
});
