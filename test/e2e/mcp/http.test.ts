/**
 * The HTTP transport end to end: the built server as its own process with
 * `transport: "http"`, the MCP SDK's Streamable HTTP client with a bearer
 * token, real workers, the real droid CLI, the scripted model.
 */
import { chmodSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { TOOLS } from '../../../src/mcp/tools.js';
import { script } from '../../../src/testbed/scripted-model.js';
import { startExpectingRefusal } from '../../support/mcp-server.js';
import { startHttpServer, writeTokenFile, type RunningHttpServer } from '../../support/http-server.js';
import { waitForNoProcesses } from '../../support/processes.js';
import { makeContext, type E2EContext } from '../../support/e2e-context.js';

interface SessionView {
  session: string;
  agentState: string;
  needsAttention: boolean;
  preview: string;
  latestRun: { run: string; state: string; model: string; autonomy: string; usage: { inputTokens: number } | null };
}
interface Acceptance {
  metadata: { session: string; run: string; requestKey: string; replayed: boolean };
  status: SessionView;
}

let ctx: E2EContext;
let server: RunningHttpServer | undefined;
const TAG = `e2e-http-${process.pid}-${Date.now()}`;

beforeAll(async () => {
  ctx = await makeContext(TAG);
});
afterEach(async () => {
  await server?.stop();
  server = undefined;
  await waitForNoProcesses(TAG, 15_000);
});
afterAll(async () => {
  await ctx?.cleanup();
});

describe('HTTP transport, built server', () => {
  it('create → wait → status → read through the SDK Streamable HTTP client, with the turn really run by droid', async () => {
    server = await startHttpServer(ctx.config, ctx.env);
    // Same tools as stdio.
    const { tools } = await server.client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(TOOLS.map((t) => t.name).sort());

    const ws = ctx.workspace('http-lifecycle');
    const file = join(ws, 'out.txt');
    const accepted = await server.ok<Acceptance>('droid_create_session', {
      requestKey: 'http-1',
      replyTo: null,
      workspace: ws,
      autonomy: 'high',
      prompt: `write ${script({ tool: { name: 'Create', arguments: { file_path: file, content: 'over http\n' } }, usage: { prompt_tokens: 40, completion_tokens: 5 } })}`,
    });
    expect(accepted.metadata.replayed).toBe(false);

    let settled: SessionView | undefined;
    while (!settled) {
      const waited = await server.ok<{ sessions: SessionView[]; timedOut: boolean }>('droid_wait_for_sessions', {
        sessions: [accepted.metadata.session],
        timeoutSeconds: 30,
      });
      if (!waited.timedOut) settled = waited.sessions[0];
    }
    expect(settled).toMatchObject({ agentState: 'idle', latestRun: { state: 'succeeded', autonomy: 'high', model: ctx.bed.modelId } });

    const { status } = await server.ok<{ status: SessionView }>('droid_get_session_status', { session: accepted.metadata.session });
    expect(status.latestRun.run).toBe(accepted.metadata.run);
    expect(status.latestRun.usage!.inputTokens).toBeGreaterThan(0);
    expect(status.preview).toContain('tool said:');
    expect(readFileSync(file, 'utf8')).toBe('over http\n');

    const history = await server.ok<{ items: Array<{ type: string; tool?: string; text?: string }>; nextCursor: string | null; historyAvailable: boolean }>(
      'droid_read_session',
      { session: accepted.metadata.session },
    );
    expect(history.historyAvailable).toBe(true);
    expect(history.nextCursor).toBeNull();
    expect(history.items.map((i) => i.type)).toEqual(['tool_call', 'assistant_text']);
    expect(history.items[0]).toMatchObject({ tool: 'Create' });

    // Same results as stdio: a replayed request key returns the same session and run.
    const replay = await server.ok<Acceptance>('droid_create_session', {
      requestKey: 'http-1',
      replyTo: null,
      workspace: ws,
      autonomy: 'high',
      prompt: `write ${script({ tool: { name: 'Create', arguments: { file_path: file, content: 'over http\n' } }, usage: { prompt_tokens: 40, completion_tokens: 5 } })}`,
    });
    expect(replay.metadata).toEqual({ ...accepted.metadata, replayed: true });
  });

  it('refuses requests without the token, and rejected tool calls stay isError with HTTP 200', async () => {
    server = await startHttpServer(ctx.config, ctx.env);
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'droid_list_workspaces', arguments: {} } });
    const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
    const anonymous = await fetch(server.url, { method: 'POST', headers, body });
    expect(anonymous.status).toBe(401);
    const inQuery = await fetch(`${server.url}?token=${server.token}`, { method: 'POST', headers, body });
    expect(inQuery.status).toBe(400);

    const rejected = await server.call('droid_get_session_status', { session: 'no-such-session' });
    expect(rejected.isError).toBe(true);
    expect(rejected.structured.error).toMatchObject({ code: expect.any(String), action: expect.any(String) });
    // The token never reaches the log.
    expect(server.stderr()).not.toContain(server.token);
  });

  it('refuses to start with a token file others can read, saying how to make one', async () => {
    const { path, remove } = writeTokenFile();
    chmodSync(path, 0o644);
    const refused = await startExpectingRefusal(ctx.config({ transport: 'http', port: 8787, tokenFile: path }), ctx.env);
    remove();
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('tokenFile');
    expect(refused.stderr).toContain('umask 077');
  });
});
