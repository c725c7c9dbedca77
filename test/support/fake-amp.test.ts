// Proves the fake Amp MCP server the reply-back tests rely on: a real MCP
// client sees its tools, every call is logged, and its failure modes fail.
import { afterEach, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { replyHandleFor, startFakeAmp, UNKNOWN_TOOL, type FakeAmp } from './fake-amp.js';

let amp: FakeAmp | undefined;
afterEach(async () => {
  await amp?.close();
  amp = undefined;
});

async function connect(url: string): Promise<Client> {
  const client = new Client({ name: 'fake-amp-check', version: '0.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  return client;
}

const CONV = 'T-11111111-2222-4333-8444-555555555555';

describe('fake Amp MCP server', () => {
  it('offers puck, the admin and thread tools and an unknown one, and logs every call', async () => {
    amp = await startFakeAmp();
    const client = await connect(amp.url);
    const names = (await client.listTools()).tools.map((t) => t.name).sort();
    expect(names).toEqual(['find_thread', 'manage_amp', 'puck', 'read_thread', UNKNOWN_TOOL].sort());
    const sent = await client.callTool({ name: 'puck', arguments: { action: 'send', params: { conversationID: CONV, message: 'hi' } } });
    const text = (sent.content as Array<{ text: string }>)[0]!.text;
    expect(JSON.parse(text)).toEqual({ status: 'queued', replyHandle: replyHandleFor(CONV, 1) });
    const read = await client.callTool({ name: 'puck', arguments: { action: 'read_reply', params: { replyHandle: replyHandleFor(CONV, 1) } } });
    expect(read.isError).toBeFalsy();
    const foreign = await client.callTool({ name: 'puck', arguments: { action: 'read_reply', params: { replyHandle: 'rh-nobody' } } });
    expect(foreign.isError).toBe(true);
    await client.callTool({ name: 'manage_amp', arguments: { command: 'x' } });
    expect(amp.calls.map((c) => c.tool)).toEqual(['puck', 'puck', 'puck', 'manage_amp']);
    expect(amp.sends()).toHaveLength(1);
    expect(amp.http.some((h) => h.rpc.includes('tools/call'))).toBe(true);
    await client.close();
  });

  it('answers HTTP 401 in unauthorized mode, and hides puck in no_puck mode', async () => {
    amp = await startFakeAmp({ mode: 'unauthorized' });
    const res = await fetch(amp.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    expect(res.status).toBe(401);
    await expect(connect(amp.url)).rejects.toThrow();
    amp.setMode('no_puck');
    const client = await connect(amp.url);
    expect((await client.listTools()).tools.map((t) => t.name)).not.toContain('puck');
    await client.close();
  });

  it('never answers in hang mode', async () => {
    amp = await startFakeAmp({ mode: 'hang' });
    const res = await fetch(amp.url, { method: 'POST', body: '{}', signal: AbortSignal.timeout(300) }).catch((e: Error) => e);
    expect(res).toBeInstanceOf(Error);
  });
});
