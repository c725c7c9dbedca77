/**
 * The HTTP transport over real HTTP on 127.0.0.1: every guard, in order,
 * with a fake controller that counts calls, plus the SDK Streamable HTTP
 * client for the happy path. No droid is started.
 */
import { connect, type Socket } from 'node:net';
import { request } from 'node:http';
import { randomBytes } from 'node:crypto';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { afterEach, describe, expect, it } from 'vitest';
import { startHttpListener, type HttpListener, type HttpListenerOptions } from '../../../../src/mcp/http/listener.js';
import { INTERNAL_ERROR_MESSAGE } from '../../../../src/mcp/http/listener-answers.js';
import { TOOLS } from '../../../../src/mcp/tools.js';
import { captureLog, fakeContext, mcpHeaders, rawRequest, ROOT, rpc, toolCall, type CapturedLog, type FakeContext } from '../../../support/http-fixtures.js';

const TOKEN = randomBytes(32).toString('base64url');
const MIB = 1024 * 1024;

interface Harness {
  listener: HttpListener;
  port: number;
  fake: FakeContext;
  log: CapturedLog;
}

const open: HttpListener[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((l) => l.close(100)));
});

async function start(extra: Partial<HttpListenerOptions> = {}): Promise<Harness> {
  const fake = fakeContext();
  const log = captureLog();
  const listener = await startHttpListener({ ctx: fake.ctx, log, token: TOKEN, port: 0, ...extra });
  open.push(listener);
  return { listener, port: listener.port, fake, log };
}

/** No tool ran: no controller call, not even a read of the tool context. */
function expectUntouched(fake: FakeContext): void {
  expect(fake.calls).toEqual([]);
  expect(fake.reads()).toBe(0);
}

function errorOf(body: string): { code: number; message: string } {
  return (JSON.parse(body) as { error: { code: number; message: string } }).error;
}

async function sdkClient(h: Harness, token = TOKEN): Promise<Client> {
  const transport = new StreamableHTTPClientTransport(new URL(h.listener.url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  const client = new Client({ name: 'http-unit', version: '0.0.0' });
  await client.connect(transport);
  return client;
}

/** Sends raw bytes on a fresh socket; resolves with everything received until the server closes. */
function rawSocket(port: number): { socket: Socket; received: Promise<{ text: string; closedAfterMs: number }> } {
  const socket = connect(port, '127.0.0.1');
  const began = Date.now();
  const received = new Promise<{ text: string; closedAfterMs: number }>((resolve) => {
    let text = '';
    socket.on('data', (c: Buffer) => (text += c.toString('latin1')));
    socket.on('error', () => {});
    socket.on('close', () => resolve({ text, closedAfterMs: Date.now() - began }));
  });
  return { socket, received };
}

describe('the MCP endpoint, authorized', () => {
  it('serves the SDK Streamable HTTP client: lists the tools and calls droid_list_workspaces', async () => {
    const h = await start();
    const client = await sdkClient(h);
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(TOOLS.map((t) => t.name).sort());
    const result = await client.callTool({ name: 'droid_list_workspaces', arguments: {} });
    expect(result.isError).toBeFalsy();
    expect(result.structuredContent).toMatchObject({
      workspaces: [ROOT],
      capacity: { maximum: 4, active: 0, queued: 0, available: 4 },
      policy: { defaultModel: 'model-a', maxAutonomy: 'high' },
      droid: { version: '0.225.2' },
    });
    expect(h.fake.calls).toEqual(['capacity', 'droidVersion']);
    await client.close();
  });

  it('keeps ordinary tool rejections as isError results with HTTP 200', async () => {
    const h = await start();
    const res = await rawRequest(h.port, {
      headers: mcpHeaders(TOKEN, h.port),
      body: toolCall('droid_get_session_status', { session: 'nope' }),
    });
    expect(res.status).toBe(200);
    const result = (JSON.parse(res.body) as { result: { isError: boolean; content: Array<{ text: string }> } }).result;
    expect(result.isError).toBe(true);
    expect(JSON.parse(result.content[0]!.text)).toMatchObject({ error: { code: 'session_not_found', action: expect.any(String) } });
    expect(h.fake.calls).toEqual(['status']);

    const invalidArgs = await rawRequest(h.port, { headers: mcpHeaders(TOKEN, h.port), body: toolCall('droid_list_workspaces', { extra: 1 }) });
    expect(invalidArgs.status).toBe(200);
    expect(invalidArgs.body).toContain('invalid_arguments');
  });

  it('answers an unexpected controller failure inside a tool as a generic isError result, detail only in the log', async () => {
    const h = await start();
    h.fake.override('status', () => {
      throw new TypeError('injected: /private/state/path exploded');
    });
    const res = await rawRequest(h.port, { headers: mcpHeaders(TOKEN, h.port), body: toolCall('droid_get_session_status', { session: 's1' }) });
    expect(res.status).toBe(200);
    expect(res.body).toContain('internal_error');
    expect(res.body).not.toContain('/private/state/path');
    expect(h.log.text()).toContain('injected: /private/state/path exploded');
  });

  it('accepts the publicUrl host and origin, and localhost with the bound port', async () => {
    const h = await start({ publicUrl: 'https://mcp.example.test/mcp' });
    const viaProxy = await rawRequest(h.port, {
      headers: mcpHeaders(TOKEN, h.port, { host: 'mcp.example.test', origin: 'https://mcp.example.test' }),
      body: rpc('ping'),
    });
    expect(viaProxy.status).toBe(200);
    const viaLocalhost = await rawRequest(h.port, { headers: mcpHeaders(TOKEN, h.port, { host: `localhost:${h.port}` }), body: rpc('ping') });
    expect(viaLocalhost.status).toBe(200);
    // The same host with its default port spelled out, as a proxy may forward it; another port is refused.
    const spelled = await rawRequest(h.port, { headers: mcpHeaders(TOKEN, h.port, { host: 'mcp.example.test:443' }), body: rpc('ping') });
    expect(spelled.status).toBe(200);
    const other = await rawRequest(h.port, { headers: mcpHeaders(TOKEN, h.port, { host: 'mcp.example.test:8443' }), body: rpc('ping') });
    expect(other.status).toBe(403);
  });

  it('accepts a body of exactly 1 MiB', async () => {
    const h = await start();
    const shell = rpc('ping', { _meta: { pad: '' } });
    const body = shell.replace('"pad":""', `"pad":"${'x'.repeat(MIB - shell.length)}"`);
    expect(Buffer.byteLength(body)).toBe(MIB);
    const res = await rawRequest(h.port, { headers: mcpHeaders(TOKEN, h.port), body });
    expect(res.status).toBe(200);
  });
});

describe('authentication', () => {
  it.each([
    ['no Authorization header', undefined, 'missing'],
    ['a wrong token of the same length', randomBytes(32).toString('base64url'), 'invalid'],
    ['a wrong token of a different length', 'short-token', 'invalid'],
    ['the token with one character more', `${TOKEN}x`, 'invalid'],
    ['the token missing its last character', TOKEN.slice(0, -1), 'invalid'],
  ])('refuses %s with 401 and never reaches a tool', async (_what, token, kind) => {
    const h = await start();
    const res = await rawRequest(h.port, { headers: mcpHeaders(token, h.port), body: toolCall('droid_list_workspaces') });
    expect(res.status).toBe(401);
    expect(res.headers['www-authenticate']).toMatch(/^Bearer realm="droid-mcp"/);
    if (kind === 'invalid') expect(res.headers['www-authenticate']).toContain('invalid_token');
    expectUntouched(h.fake);
  });

  it.each([
    ['another scheme', `Basic ${Buffer.from(`user:${TOKEN}`).toString('base64')}`],
    ['the bare token', TOKEN],
    ['a scheme without a token', 'Bearer'],
  ])('refuses %s in Authorization', async (_what, authorization) => {
    const h = await start();
    const res = await rawRequest(h.port, { headers: mcpHeaders(undefined, h.port, { authorization }), body: toolCall('droid_list_workspaces') });
    expect(res.status).toBe(401);
    expectUntouched(h.fake);
  });

  it('never accepts a token in the query string, with or without the header', async () => {
    const h = await start();
    for (const path of [`/mcp?token=${TOKEN}`, `/mcp?access_token=${TOKEN}`, '/mcp?', '/mcp?x=1']) {
      const bare = await rawRequest(h.port, { path, headers: mcpHeaders(undefined, h.port), body: toolCall('droid_list_workspaces') });
      expect(bare.status).toBe(400);
      expect(errorOf(bare.body).message).toContain('no query string');
      const withHeader = await rawRequest(h.port, { path, headers: mcpHeaders(TOKEN, h.port), body: toolCall('droid_list_workspaces') });
      expect(withHeader.status).toBe(400);
    }
    expectUntouched(h.fake);
    // The query (and so the token) is never logged.
    expect(h.log.text()).not.toContain(TOKEN);
  });

  it('checks the token before Host and Origin (a spoofed Host without a token is a 401)', async () => {
    const h = await start();
    const res = await rawRequest(h.port, { headers: mcpHeaders(undefined, h.port, { host: 'evil.example' }), body: rpc('ping') });
    expect(res.status).toBe(401);
  });
});

describe('Host and Origin', () => {
  it.each([
    ['a foreign host', 'evil.example'],
    ['the loopback address on another port', '127.0.0.1:1'],
    ['localhost without the port', 'localhost'],
    ['a rebinding name', 'attacker.example:8787'],
  ])('refuses %s with 403', async (_what, host) => {
    const h = await start({ publicUrl: 'https://mcp.example.test/mcp' });
    const res = await rawRequest(h.port, { headers: mcpHeaders(TOKEN, h.port, { host }), body: toolCall('droid_list_workspaces') });
    expect(res.status).toBe(403);
    expectUntouched(h.fake);
  });

  // Each Origin a request may carry, with and without publicUrl: the
  // listener's own loopback origins and the proxy's origin pass, nothing else.
  const ORIGIN_CASES: Array<[string, (port: number) => string, { bare: number; proxied: number }]> = [
    ['the loopback IP origin', (port) => `http://127.0.0.1:${port}`, { bare: 200, proxied: 200 }],
    ['the localhost origin', (port) => `http://localhost:${port}`, { bare: 200, proxied: 200 }],
    ['the localhost origin in capitals', (port) => `HTTP://LOCALHOST:${port}`, { bare: 200, proxied: 200 }],
    ['the publicUrl origin', () => 'https://mcp.example.test', { bare: 403, proxied: 200 }],
    ['the publicUrl host over http', () => 'http://mcp.example.test', { bare: 403, proxied: 403 }],
    ['the loopback IP on another port', () => 'http://127.0.0.1:1', { bare: 403, proxied: 403 }],
    ['localhost without the port', () => 'http://localhost', { bare: 403, proxied: 403 }],
    ['the loopback origin over https', (port) => `https://127.0.0.1:${port}`, { bare: 403, proxied: 403 }],
    ['the loopback origin with a path', (port) => `http://127.0.0.1:${port}/`, { bare: 403, proxied: 403 }],
    ['IPv6 loopback (not the bound address)', (port) => `http://[::1]:${port}`, { bare: 403, proxied: 403 }],
    ['a rebinding name on our port', (port) => `http://attacker.example:${port}`, { bare: 403, proxied: 403 }],
    ['a foreign site', () => 'https://evil.example', { bare: 403, proxied: 403 }],
    ['an opaque origin', () => 'null', { bare: 403, proxied: 403 }],
  ];

  it.each(ORIGIN_CASES)('answers %s as the matrix says, with and without publicUrl', async (_what, originAt, expected) => {
    for (const [publicUrl, status] of [
      [undefined, expected.bare],
      ['https://mcp.example.test/mcp', expected.proxied],
    ] as const) {
      const h = await start(publicUrl === undefined ? {} : { publicUrl });
      const res = await rawRequest(h.port, { headers: mcpHeaders(TOKEN, h.port, { origin: originAt(h.port) }), body: toolCall('droid_list_workspaces') });
      expect({ publicUrl, status: res.status }).toEqual({ publicUrl, status });
      if (status === 403) {
        expect(errorOf(res.body).message).toContain('Origin');
        expectUntouched(h.fake);
      } else {
        expect(h.fake.calls).toContain('capacity');
      }
    }
  });

  it('accepts a request without Origin (a non-browser client)', async () => {
    const h = await start();
    const res = await rawRequest(h.port, { headers: mcpHeaders(TOKEN, h.port), body: rpc('ping') });
    expect(res.status).toBe(200);
  });
});

describe('size and time limits', () => {
  it('refuses a declared 1 MiB + 1 body with 413 before any of it is sent', async () => {
    const h = await start();
    const { socket, received } = rawSocket(h.port);
    const head = Object.entries(mcpHeaders(TOKEN, h.port, { 'content-length': String(MIB + 1) }))
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join('');
    socket.write(`POST /mcp HTTP/1.1\r\n${head}\r\n`);
    const { text } = await received;
    expect(text).toMatch(/^HTTP\/1\.1 413 /);
    expect(text.toLowerCase()).toContain('connection: close');
  });

  it('refuses a chunked body at 1 MiB + 1 bytes without waiting for its end', async () => {
    const h = await start();
    const res = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port: h.port, method: 'POST', path: '/mcp', headers: mcpHeaders(TOKEN, h.port), agent: false }, (r) => {
        let body = '';
        r.on('data', (c: Buffer) => (body += c.toString()));
        r.on('end', () => resolve({ status: r.statusCode ?? 0, body }));
        r.on('error', () => resolve({ status: r.statusCode ?? 0, body }));
      });
      req.on('error', reject);
      req.flushHeaders();
      // 1 MiB + 1 in 64 KiB chunks, then the request is left open: a server that waited for the end would hang.
      for (let sent = 0; sent <= MIB; sent += 64 * 1024) req.write(Buffer.alloc(Math.min(64 * 1024, MIB + 1 - sent), 0x20));
    });
    expect(res.status).toBe(413);
    expectUntouched(h.fake);
  });

  it('cuts off a client that sends its body too slowly (408, connection closed)', async () => {
    const h = await start({ limits: { bodyTimeoutMs: 300 } });
    const { socket, received } = rawSocket(h.port);
    const head = Object.entries(mcpHeaders(TOKEN, h.port, { 'content-length': '200' }))
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join('');
    socket.write(`POST /mcp HTTP/1.1\r\n${head}\r\n{"jsonrpc"`);
    const drip = setInterval(() => socket.writable && socket.write(' '), 50);
    const { text, closedAfterMs } = await received;
    clearInterval(drip);
    expect(text).toMatch(/^HTTP\/1\.1 408 /);
    expect(closedAfterMs).toBeLessThan(3_000);
    expect(h.log.text()).toContain('body_timeout');
  });

  it('cuts off a client that never finishes its headers', async () => {
    const h = await start({ limits: { headersTimeoutMs: 500, requestTimeoutMs: 1_000 } });
    const { socket, received } = rawSocket(h.port);
    socket.write(`POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:${h.port}\r\n`);
    const { text, closedAfterMs } = await received;
    expect(text).toMatch(/^HTTP\/1\.1 408 /);
    // Node checks header deadlines once a second.
    expect(closedAfterMs).toBeLessThan(4_000);
  });

  it('answers 500 when MCP does not answer within the response deadline', async () => {
    const h = await start({ limits: { responseTimeoutMs: 300 } });
    h.fake.override('waitForSessions', () => new Promise(() => {}));
    const res = await rawRequest(h.port, {
      headers: mcpHeaders(TOKEN, h.port),
      body: toolCall('droid_wait_for_sessions', { sessions: ['s1'], timeoutSeconds: 60 }),
    });
    expect(res.status).toBe(500);
    expect(errorOf(res.body).message).toBe(INTERNAL_ERROR_MESSAGE);
    expect(h.log.text()).toContain('no MCP response within 300 ms');
  });

  it('defaults every deadline above the 60 s tool wait cap', async () => {
    const { DEFAULT_HTTP_LIMITS } = await import('../../../../src/mcp/http/listener.js');
    expect(DEFAULT_HTTP_LIMITS.responseTimeoutMs).toBeGreaterThan(60_000);
    expect(DEFAULT_HTTP_LIMITS.requestTimeoutMs).toBeGreaterThan(DEFAULT_HTTP_LIMITS.responseTimeoutMs);
    expect(DEFAULT_HTTP_LIMITS.maxBodyBytes).toBe(MIB);
  });
});

describe('routes, methods and envelopes', () => {
  it.each(['/', '/mcp/', '/MCP', '//mcp', '/mcp/../mcp', '/sse', '/.well-known/oauth-authorization-server'])('answers 404 for %s', async (path) => {
    const h = await start();
    const res = await rawRequest(h.port, { path, headers: mcpHeaders(TOKEN, h.port), body: rpc('ping') });
    expect(res.status).toBe(404);
  });

  it.each(['GET', 'PUT', 'DELETE', 'PATCH', 'OPTIONS'])('answers 405 with Allow: POST for %s /mcp', async (method) => {
    const h = await start();
    const res = await rawRequest(h.port, { method, headers: mcpHeaders(TOKEN, h.port) });
    expect(res.status).toBe(405);
    expect(res.headers.allow).toBe('POST');
  });

  it.each([
    ['invalid JSON', '{"jsonrpc": "2.0",', -32700],
    ['invalid UTF-8', Buffer.from([0x7b, 0xff, 0x7d]), -32700],
    ['an empty body', '', -32700],
    ['a JSON object that is no JSON-RPC message', '{"hello":"world"}', -32600],
    ['a wrong jsonrpc version', '{"jsonrpc":"1.0","id":1,"method":"ping"}', -32600],
    ['an empty batch', '[]', -32600],
    ['a JSON string', '"tools/call"', -32600],
  ])('answers 400 for %s', async (_what, body, code) => {
    const h = await start();
    const res = await rawRequest(h.port, { headers: mcpHeaders(TOKEN, h.port), body });
    expect(res.status).toBe(400);
    expect(errorOf(res.body).code).toBe(code);
    expectUntouched(h.fake);
  });
});

describe('unexpected failures', () => {
  it('answers a transport/server failure with the generic 500; the detail goes to the log only', async () => {
    const h = await start({
      newServer: () => {
        throw new Error('injected: secret detail 42');
      },
    });
    const res = await rawRequest(h.port, { headers: mcpHeaders(TOKEN, h.port), body: toolCall('droid_list_workspaces') });
    expect(res.status).toBe(500);
    expect(errorOf(res.body).message).toBe(INTERNAL_ERROR_MESSAGE);
    expect(res.body).not.toContain('secret');
    expect(h.log.text()).toContain('injected: secret detail 42');
    expectUntouched(h.fake);
  });

  it('answers a failure while connecting the MCP server with the generic 500', async () => {
    const h = await start({
      newServer: () => {
        const server = new Server({ name: 'broken', version: '0' }, { capabilities: { tools: {} } });
        server.connect = () => Promise.reject(new Error('injected: connect failed'));
        return server;
      },
    });
    const res = await rawRequest(h.port, { headers: mcpHeaders(TOKEN, h.port), body: rpc('ping') });
    expect(res.status).toBe(500);
    expect(res.body).not.toContain('injected');
    expect(h.log.text()).toContain('injected: connect failed');
  });

  it('keeps serving after refusals and failures', async () => {
    const h = await start();
    await rawRequest(h.port, { headers: mcpHeaders('wrong', h.port), body: rpc('ping') });
    await rawRequest(h.port, { headers: mcpHeaders(TOKEN, h.port), body: '{' });
    const client = await sdkClient(h);
    expect((await client.listTools()).tools).toHaveLength(TOOLS.length);
    await client.close();
  });
});
