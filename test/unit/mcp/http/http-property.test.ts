/**
 * Property: whatever arrives without the right bearer token (any method,
 * path, headers or body, including a perfect tool call), no tool runs and
 * nothing changes; and the listener still serves a valid request afterwards.
 */
import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startHttpListener, type HttpListener } from '../../../../src/mcp/http/listener.js';
import { TOOLS } from '../../../../src/mcp/tools.js';
import { captureLog, fakeContext, mcpHeaders, rawRequest, rpc, toolCall, type FakeContext } from '../../../support/http-fixtures.js';

const TOKEN = randomBytes(32).toString('base64url');
let listener: HttpListener;
let fake: FakeContext;

beforeAll(async () => {
  fake = fakeContext();
  listener = await startHttpListener({
    ctx: fake.ctx,
    log: captureLog(),
    token: TOKEN,
    port: 0,
    publicUrl: 'https://mcp.example.test/mcp',
    limits: { bodyTimeoutMs: 2_000 },
  });
});
afterAll(async () => {
  await listener?.close(100);
});

/** Header-safe text: what an HTTP client can put on the wire. */
const headerText = fc.string({ unit: fc.constantFrom(...'abcXYZ019 -_./:=+,;"'.split('')), maxLength: 60 });

/** Anything but the right token, including near misses. */
const wrongAuthorization = fc
  .oneof(
    fc.constant(undefined),
    fc.constant(''),
    headerText,
    fc.constant(`Basic ${Buffer.from(`u:${TOKEN}`).toString('base64')}`),
    fc.constant(TOKEN),
    fc.constant(`Bearer${TOKEN}`),
    fc.constant(`Bearer ${TOKEN.slice(0, -1)}`),
    fc.constant(`Bearer ${TOKEN}x`),
    fc.constant(`Bearer ${TOKEN.slice(1)}`),
    fc.constant(`Bearer ${TOKEN.toUpperCase() === TOKEN ? TOKEN.toLowerCase() : TOKEN.toUpperCase()}`),
    fc.constant(`Token ${TOKEN}`),
    headerText.map((t) => `Bearer ${t}`),
    fc.string({ unit: fc.constantFrom(...'ABCxyz0189-_'.split('')), minLength: 43, maxLength: 43 }).map((t) => `Bearer ${t}`),
  )
  .filter((a) => a !== `Bearer ${TOKEN}`);

const method = fc.constantFrom('POST', 'POST', 'POST', 'GET', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'HEAD');

const path = fc.oneof(
  fc.constant('/mcp'),
  fc.constant('/mcp'),
  fc.constant(`/mcp?token=${TOKEN}`),
  fc.constant(`/mcp?access_token=${TOKEN}`),
  fc.constant(`/mcp?authorization=Bearer%20${TOKEN}`),
  fc.constantFrom('/', '/mcp/', '/MCP', '//mcp', '/mcp#x', '/mcp/../mcp', '/messages', '/sse'),
  fc.string({ unit: fc.constantFrom(...'abcmp/?&=.%_-'.split('')), maxLength: 30 }).map((p) => `/${p}`),
);

const toolBodies = [
  ...TOOLS.map((t) => toolCall(t.name)),
  toolCall('droid_list_workspaces'),
  toolCall('droid_models'),
  toolCall('droid_create_session', { requestKey: 'k', workspace: '/srv/repos/app', prompt: 'p', replyTo: null }),
  toolCall('droid_send_message', { requestKey: 'k2', session: 's', prompt: 'p' }),
  toolCall('droid_get_session_status', { session: 's' }),
  toolCall('droid_wait_for_sessions', { sessions: ['s'], timeoutSeconds: 0 }),
  toolCall('droid_cancel_session', { session: 's' }),
  `[${toolCall('droid_list_workspaces', {}, 1)},${toolCall('droid_cancel_session', { session: 's' }, 2)}]`,
];

const body = fc.oneof(
  fc.constantFrom(...toolBodies),
  fc.constant(rpc('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'x', version: '1' } })),
  fc.json().map(String),
  fc.string({ maxLength: 200 }),
  fc.constant(undefined),
);

const extraHeaders = fc.record(
  {
    host: fc.constantFrom('LISTENER', 'localhost:LISTENER_PORT', 'mcp.example.test', 'evil.example', '127.0.0.1:1', ''),
    origin: fc.constantFrom('https://mcp.example.test', 'https://evil.example', 'null'),
    'content-type': fc.constantFrom('application/json', 'text/plain', 'application/json; charset=utf-8'),
    accept: fc.constantFrom('application/json, text/event-stream', '*/*'),
    'x-forwarded-for': headerText,
    cookie: headerText,
    'mcp-session-id': headerText,
  },
  { requiredKeys: [] },
);

it('lets nothing without the right token reach a tool, and keeps serving', async () => {
  const port = listener.port;
  await fc.assert(
    fc.asyncProperty(method, path, wrongAuthorization, extraHeaders, body, async (m, p, authorization, extra, b) => {
      const headers: Record<string, string> = {
        accept: 'application/json, text/event-stream',
        'content-type': 'application/json',
      };
      for (const [k, v] of Object.entries(extra)) {
        headers[k] = v.replace('LISTENER_PORT', String(port)).replace('LISTENER', `127.0.0.1:${port}`);
      }
      headers.host ??= `127.0.0.1:${port}`;
      if (authorization !== undefined) headers.authorization = authorization;
      const res = await rawRequest(port, {
        method: m,
        path: p,
        headers,
        noDefaultHost: true,
        ...(b !== undefined && m !== 'HEAD' && { body: b }),
      }).catch((err: Error) => ({ status: -1, body: err.message }));
      // Refused by the route, method, query, token, or by Node's own HTTP parser (400): never 2xx or 5xx.
      expect(res.status === 400 || res.status === 401 || res.status === 404 || res.status === 405, `${m} ${p} → ${res.status} ${res.body}`).toBe(true);
      expect(fake.calls).toEqual([]);
      expect(fake.reads()).toBe(0);
    }),
    { numRuns: 200 },
  );

  // Still serving: the right token gets a real answer.
  const ok = await rawRequest(port, { headers: mcpHeaders(TOKEN, port), body: toolCall('droid_list_workspaces') });
  expect(ok.status).toBe(200);
  expect(ok.body).toContain('/srv/repos/app');
  expect(fake.calls).toEqual(['capacity', 'droidVersion']);
  expect(fake.reads()).toBeGreaterThan(0);
});
