/**
 * The stateless Streamable HTTP rules of the MCP spec as the listener
 * applies them after the token, Host/Origin, size and envelope guards:
 * Accept (406), Content-Type (415), MCP-Protocol-Version (400), the
 * initialize and batch rules, 202 with no body when nothing needs an answer,
 * and exactly one JSON answer per request id. Each refusal is specific and
 * reaches no tool.
 */
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import type { HttpListener } from '../../../../src/mcp/http/listener.js';
import { JsonExchangeTransport } from '../../../../src/mcp/http/json-transport.js';
import { mcpHeaders, rawRequest, rpc, startCountingListener, toolCall, type CountingListener } from '../../../support/http-fixtures.js';

const TOKEN = randomBytes(32).toString('base64url');

const open: HttpListener[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((l) => l.close(100)));
});

type Harness = Pick<CountingListener, 'port' | 'fake' | 'built'>;

async function start(): Promise<Harness> {
  const started = await startCountingListener(TOKEN);
  open.push(started.listener);
  return started;
}

function post(h: Harness, body: string, extra: Record<string, string> = {}) {
  return rawRequest(h.port, { headers: mcpHeaders(TOKEN, h.port, extra), body });
}

function errorOf(body: string): { code: number; message: string } {
  return (JSON.parse(body) as { error: { code: number; message: string } }).error;
}

const notification = (method: string, params: Record<string, unknown> = {}) => ({ jsonrpc: '2.0', method, params });
const request = (method: string, id: number | string, params: Record<string, unknown> = {}) => ({ jsonrpc: '2.0', id, method, params });
const initialize = (id: number | string = 1) =>
  request('initialize', id, { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'batch-client', version: '1' } });

describe('stateless Streamable HTTP rules', () => {
  it.each([
    ['no Accept header', undefined],
    ['Accept without text/event-stream', 'application/json'],
    ['Accept without application/json', 'text/event-stream'],
    ['Accept */*', '*/*'],
  ])('answers 406 for %s, and no tool runs', async (_what, accept) => {
    const h = await start();
    const headers = mcpHeaders(TOKEN, h.port);
    if (accept === undefined) delete (headers as Record<string, string | undefined>).accept;
    else headers.accept = accept;
    const res = await rawRequest(h.port, { headers, body: toolCall('droid_list_workspaces') });
    expect(res.status).toBe(406);
    expect(res.headers['content-type']).toBe('application/json');
    expect(errorOf(res.body)).toEqual({ code: -32000, message: 'Not Acceptable: Client must accept both application/json and text/event-stream' });
    expect(h.fake.calls).toEqual([]);
  });

  it.each([
    ['no Content-Type', undefined],
    ['text/plain', 'text/plain'],
    ['a parameter that merely mentions application/json', 'text/plain; a=application/json'],
    ['application/jsonx', 'application/jsonx'],
  ])('answers 415 for %s, and no tool runs', async (_what, contentType) => {
    const h = await start();
    const headers = mcpHeaders(TOKEN, h.port);
    if (contentType === undefined) delete (headers as Record<string, string | undefined>)['content-type'];
    else headers['content-type'] = contentType;
    const res = await rawRequest(h.port, { headers, body: toolCall('droid_list_workspaces') });
    expect(res.status).toBe(415);
    expect(errorOf(res.body)).toEqual({ code: -32000, message: 'Unsupported Media Type: Content-Type must be application/json' });
    expect(h.fake.calls).toEqual([]);
  });

  it.each(['application/json; charset=utf-8', 'Application/JSON', 'application/json;'])('accepts Content-Type %s', async (contentType) => {
    const h = await start();
    const res = await post(h, rpc('ping'), { 'content-type': contentType });
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body)).toEqual({ jsonrpc: '2.0', id: 1, result: {} });
  });

  it('refuses an unsupported MCP-Protocol-Version with 400 naming the supported ones; accepts a supported one or none', async () => {
    const h = await start();
    const bad = await post(h, toolCall('droid_list_workspaces'), { 'mcp-protocol-version': '1999-01-01' });
    expect(bad.status).toBe(400);
    expect(errorOf(bad.body).code).toBe(-32000);
    expect(errorOf(bad.body).message).toMatch(/^Bad Request: Unsupported protocol version: 1999-01-01 \(supported versions: .*2025-06-18/);
    expect(h.fake.calls).toEqual([]);
    expect((await post(h, rpc('ping'), { 'mcp-protocol-version': '2025-06-18' })).status).toBe(200);
    expect((await post(h, rpc('ping'))).status).toBe(200);
  });

  it('does not check MCP-Protocol-Version on initialize (negotiation answers it)', async () => {
    const h = await start();
    const res = await post(h, JSON.stringify(initialize()), { 'mcp-protocol-version': '1999-01-01' });
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body)).toMatchObject({ id: 1, result: { serverInfo: { name: 'droid-mcp' } } });
  });

  it('answers notifications and responses alone with 202 and no body', async () => {
    const h = await start();
    const initialized = await post(h, JSON.stringify(notification('notifications/initialized')));
    expect(initialized.status).toBe(202);
    expect(initialized.body).toBe('');
    const cancelled = await post(h, JSON.stringify(notification('notifications/cancelled', { requestId: 1, reason: 'x' })));
    expect(cancelled.status).toBe(202);
    const response = await post(h, JSON.stringify({ jsonrpc: '2.0', id: 5, result: {} }));
    expect(response.status).toBe(202);
    expect(response.body).toBe('');
    const mixed = await post(h, JSON.stringify([notification('notifications/initialized'), { jsonrpc: '2.0', id: 6, error: { code: -1, message: 'no' } }]));
    expect(mixed.status).toBe(202);
    expect(mixed.body).toBe('');
    expect(h.fake.calls).toEqual([]);
  });

  it('answers a batch with one response per request, in request order, notifications skipped', async () => {
    const h = await start();
    h.fake.override('status', (session: unknown) => ({ session }));
    const res = await post(
      h,
      JSON.stringify([
        request('tools/call', 'b', { name: 'droid_get_session_status', arguments: { session: 's1' } }),
        notification('notifications/initialized'),
        request('ping', 3),
        request('no/such/method', 4),
      ]),
    );
    expect(res.status).toBe(200);
    const answers = JSON.parse(res.body) as Array<{ id: unknown; result?: unknown; error?: { code: number } }>;
    expect(answers.map((a) => a.id)).toEqual(['b', 3, 4]);
    expect(answers[1]).toEqual({ jsonrpc: '2.0', id: 3, result: {} });
    expect(answers[2]!.error!.code).toBe(-32601);
  });

  it('answers an unknown method with a JSON-RPC error and HTTP 200', async () => {
    const h = await start();
    const res = await post(h, rpc('no/such/method', {}, 9));
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body)).toEqual({ jsonrpc: '2.0', id: 9, error: { code: -32601, message: 'Method not found' } });
  });

  it('refuses initialize batched with anything else (400, -32600), and no tool runs', async () => {
    const h = await start();
    const res = await post(h, JSON.stringify([initialize(), request('tools/call', 2, { name: 'droid_list_workspaces', arguments: {} })]));
    expect(res.status).toBe(400);
    expect(errorOf(res.body)).toEqual({ code: -32600, message: 'Invalid Request: Only one initialization request is allowed' });
    expect(h.fake.calls).toEqual([]);
  });

  it('refuses a batch over 100 messages with 400 (-32600)', async () => {
    const h = await start();
    const res = await post(h, JSON.stringify(Array.from({ length: 101 }, (_, i) => request('ping', i))));
    expect(res.status).toBe(400);
    expect(errorOf(res.body).code).toBe(-32600);
  });

  it('answers a request with exactly one JSON response, no SSE, no session id', async () => {
    const h = await start();
    const res = await post(h, rpc('ping', {}, 'only'));
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('application/json');
    expect(res.headers['mcp-session-id']).toBeUndefined();
    expect(res.headers['cache-control']).toBe('no-store');
    expect(JSON.parse(res.body)).toEqual({ jsonrpc: '2.0', id: 'only', result: {} });
  });

  it('answers a batch of one request with an array of one response (JSON-RPC 2.0 batch rule)', async () => {
    const h = await start();
    const res = await post(h, JSON.stringify([request('ping', 1)]));
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body)).toEqual([{ jsonrpc: '2.0', id: 1, result: {} }]);
  });

  it('refuses a batch whose requests share an id (400, -32600) before anything runs', async () => {
    const h = await start();
    const res = await post(
      h,
      JSON.stringify([
        request('tools/call', 1, { name: 'droid_list_workspaces', arguments: {} }),
        request('tools/call', 1, { name: 'droid_list_workspaces', arguments: {} }),
      ]),
    );
    expect(res.status).toBe(400);
    expect(errorOf(res.body).code).toBe(-32600);
    expect(errorOf(res.body).message).toContain('distinct ids');
    expect(h.fake.calls).toEqual([]);
    expect(h.built()).toBe(0);
    // The same id as a number and as a string are two ids.
    const distinct = await post(h, JSON.stringify([request('ping', 1), request('ping', '1')]));
    expect(JSON.parse(distinct.body)).toEqual([
      { jsonrpc: '2.0', id: 1, result: {} },
      { jsonrpc: '2.0', id: '1', result: {} },
    ]);
  });
});

describe('JsonExchangeTransport', () => {
  const result = (id: number | string) => ({ jsonrpc: '2.0' as const, id, result: {} });

  it('resolves with the answers in request order once each request has exactly one', async () => {
    const t = new JsonExchangeTransport([2, 'a']);
    await t.start();
    let done = false;
    void t.answered.then(() => (done = true));
    await t.send(result('a'));
    await Promise.resolve();
    expect(done).toBe(false);
    await expect(t.send(result('a'))).rejects.toThrow(/no request with id "a" is waiting/);
    await expect(t.send(result(3))).rejects.toThrow(/no request with id 3/);
    await t.send({ jsonrpc: '2.0', id: 2, error: { code: -1, message: 'x' } });
    expect(await t.answered).toEqual([{ jsonrpc: '2.0', id: 2, error: { code: -1, message: 'x' } }, result('a')]);
  });

  it('drops what a JSON answer cannot carry: notifications, requests to the client, anything after close', async () => {
    const t = new JsonExchangeTransport([1]);
    let closes = 0;
    t.onclose = () => closes++;
    await t.start();
    await t.send({ jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 1, progress: 1 } }, { relatedRequestId: 1 });
    await t.send({ jsonrpc: '2.0', id: 9, method: 'sampling/createMessage', params: {} }, { relatedRequestId: 1 });
    await t.close();
    await t.close();
    expect(closes).toBe(1);
    await t.send(result(1));
    expect(() => t.deliver([{ jsonrpc: '2.0', id: 1, method: 'ping' }], {})).toThrow(/not connected/);
  });

  it('refuses a second start and duplicate request ids', async () => {
    expect(() => new JsonExchangeTransport([1, 1])).toThrow(/appears twice/);
    const t = new JsonExchangeTransport([]);
    await t.start();
    await expect(t.start()).rejects.toThrow(/already started/);
    expect(await t.answered).toEqual([]);
  });
});
