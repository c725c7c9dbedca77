/**
 * The gate tool calls wait at while a stdio server's state loads
 * (mcp/context-gate.ts): a call waits until the context is there, for at most
 * its bound, and is then refused as retryable; arguments are checked without
 * waiting.
 */
import { describe, expect, it } from 'vitest';
import { callTool } from '../../src/mcp/call-tool.js';
import { ContextGate } from '../../src/mcp/context-gate.js';
import type { ToolContext } from '../../src/mcp/tools.js';

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
});
