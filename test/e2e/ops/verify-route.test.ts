/**
 * `droid-mcp verify-route` against the real droid CLI and the fake Amp MCP
 * server: fresh, resumed, re-attached and detached inventories, with no
 * model request and no tool call reaching "Amp".
 */
import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeAmp, type FakeAmp } from '../../support/fake-amp.js';
import { SERVER_ENTRY } from '../../support/paths.js';
import { waitForNoProcesses } from '../../support/processes.js';
import { makeContext, type E2EContext } from '../../support/e2e-context.js';

const TAG = `e2e-verify-route-${process.pid}-${Date.now()}`;
let ctx: E2EContext;
const amps: FakeAmp[] = [];

beforeAll(async () => {
  ctx = await makeContext(TAG);
});
afterAll(async () => {
  for (const amp of amps) await amp.close();
  await waitForNoProcesses(TAG, 15_000);
  await ctx?.cleanup();
});

function verify(url: string): Promise<{ code: number | null; out: string }> {
  const config = ctx.config({ ampMcp: { url } });
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [SERVER_ENTRY, 'verify-route', '--config', config], { env: ctx.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (out += c.toString()));
    child.on('exit', (code) => resolve({ code, out }));
  });
}

describe('droid-mcp verify-route', () => {
  it('passes fresh, resumed, re-attached and detached checks without any prompt or tool call', async () => {
    const amp = await startFakeAmp();
    amps.push(amp);
    const requests = ctx.bed.model.requests.length + ctx.bed.model.titleRequests.length;
    const { code, out } = await verify(amp.url);
    expect(out).toMatch(/^ok {3}fresh: attached on initialize: .*mcp_amp-puck_puck usable/m);
    expect(out).toMatch(/^ok {3}resumed: loaded without the attachment: no amp-puck tool listed/m);
    expect(out).toMatch(/^ok {3}reattached: attached again on load: .*mcp_amp-puck_manage_amp disabled/m);
    expect(out).toMatch(/^ok {3}detached: initialized without the attachment: no amp-puck tool listed/m);
    expect(code).toBe(0);
    expect(ctx.bed.model.requests.length + ctx.bed.model.titleRequests.length).toBe(requests);
    expect(amp.calls).toEqual([]);
    // Contacted exactly twice (fresh and re-attached), each an MCP handshake and a tools/list.
    expect(amp.http.filter((h) => h.rpc.includes('initialize'))).toHaveLength(2);
    expect(amp.http.filter((h) => h.rpc.includes('tools/list'))).toHaveLength(2);
    // No session id or credential is printed.
    expect(out).not.toMatch(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/);
  }, 120_000);

  it('fails, naming the cause, when droid cannot start the server or keep other tools disabled', async () => {
    const unauthorized = await startFakeAmp({ mode: 'unauthorized' });
    const odd = await startFakeAmp({ extraTools: [{ name: 'puck ', description: 'looks like puck', inputSchema: { type: 'object' } }] });
    amps.push(unauthorized, odd);
    const denied = await verify(unauthorized.url);
    expect(denied.code).toBe(1);
    expect(denied.out).toMatch(/^FAIL fresh: amp_mcp_auth_required/m);
    const exposed = await verify(odd.url);
    expect(exposed.code).toBe(1);
    expect(exposed.out).toMatch(/^FAIL fresh: amp_mcp_admin_tool_exposed/m);
  }, 180_000); // two full runs of four droid processes each

  it('refuses a config without ampMcp', async () => {
    const config = ctx.config();
    const result = await new Promise<{ code: number | null; out: string }>((resolve) => {
      const child = spawn(process.execPath, [SERVER_ENTRY, 'verify-route', '--config', config], { env: ctx.env, stdio: ['ignore', 'ignore', 'pipe'] });
      let out = '';
      child.stderr.on('data', (c: Buffer) => (out += c.toString()));
      child.on('exit', (code) => resolve({ code, out }));
    });
    expect(result.code).toBe(2);
    expect(result.out).toContain('ampMcp');
  });
});
