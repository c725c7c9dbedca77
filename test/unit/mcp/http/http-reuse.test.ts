/**
 * The HTTP transport lends every exchange a pooled MCP server of its own
 * (src/mcp/http/idle-servers.ts). These tests check that reuse never mixes
 * requests up: concurrent clients using the same JSON-RPC ids each get their
 * own answers, a request cut off by its client aborts only its own tool call,
 * no caller's cancellation reaches another caller's request, a server that a
 * client initialized or set a log level is never lent again, and (through the
 * newServer seam) that servers are in fact reused. No timing is asserted.
 */
import { randomBytes } from 'node:crypto';
import { request } from 'node:http';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterEach, describe, expect, it } from 'vitest';
import { IdleServers, reusable } from '../../../../src/mcp/http/idle-servers.js';
import type { HttpListener } from '../../../../src/mcp/http/listener.js';
import { createMcpServer } from '../../../../src/mcp/server.js';
import type { ToolContext } from '../../../../src/mcp/tools.js';
import { mcpHeaders, rawRequest, rpc, startCountingListener, toolCall, type FakeContext } from '../../../support/http-fixtures.js';

const TOKEN = randomBytes(32).toString('base64url');

const open: HttpListener[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((l) => l.close(100)));
});

async function start(): Promise<{ port: number; fake: FakeContext; built: () => number }> {
  const started = await startCountingListener(TOKEN);
  open.push(started.listener);
  return started;
}

/** What the fake's droid_read_session answers: its own session and the call's number. */
interface ReadAnswer {
  id: number | string;
  result: { structuredContent: { session: string; asked: number } };
}

interface StatusAnswer {
  id: number | string;
  result: { structuredContent: { status: { session: string } } };
}

const tick = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('pooled MCP servers over HTTP', () => {
  it('concurrent clients sending the same request ids each get their own answer', async () => {
    const h = await start();
    let asked = 0;
    // Answers come back out of order: each call yields a different number of event-loop turns.
    h.fake.override('read', async (session: unknown) => {
      const n = ++asked;
      for (let i = 0; i < (n * 7) % 5; i++) await tick();
      return { session, asked: n };
    });
    const sessions = Array.from({ length: 48 }, (_, i) => `session-${i}`);
    const answers = await Promise.all(
      sessions.map(async (session) => {
        // Every client numbers its requests from 1, as real clients do.
        const res = await rawRequest(h.port, { headers: mcpHeaders(TOKEN, h.port), body: toolCall('droid_read_session', { session }, 1) });
        expect(res.status).toBe(200);
        return JSON.parse(res.body) as ReadAnswer;
      }),
    );
    expect(answers.map((a) => a.id)).toEqual(sessions.map(() => 1));
    expect(answers.map((a) => a.result.structuredContent.session)).toEqual(sessions);
    expect(new Set(answers.map((a) => a.result.structuredContent.asked)).size).toBe(sessions.length);
  });

  it('a request whose client goes away aborts its own tool call only; the others, and later ones, are answered', async () => {
    const h = await start();
    const signals: AbortSignal[] = [];
    let waitStarted!: () => void;
    const started = new Promise<void>((resolve) => (waitStarted = resolve));
    h.fake.override('waitForSessions', (_ids: unknown, _timeout: unknown, signal: unknown) => {
      signals.push(signal as AbortSignal);
      waitStarted();
      return new Promise((_resolve, reject) => (signal as AbortSignal).addEventListener('abort', () => reject(new Error('aborted'))));
    });
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    h.fake.override('read', async (session: unknown) => {
      await held;
      return { session, asked: 0 };
    });
    h.fake.override('status', (session: unknown) => ({ session }));

    // A call in flight on another pooled server, same request id as the wait.
    const pending = rawRequest(h.port, { headers: mcpHeaders(TOKEN, h.port), body: toolCall('droid_read_session', { session: 'kept' }, 7) });
    const body = toolCall('droid_wait_for_sessions', { sessions: ['s1'], timeoutSeconds: 60 }, 7);
    const waitRequest = request({ host: '127.0.0.1', port: h.port, method: 'POST', path: '/mcp', headers: mcpHeaders(TOKEN, h.port), agent: false });
    waitRequest.on('error', () => {});
    waitRequest.end(body);
    await started;
    waitRequest.destroy();
    await expect.poll(() => signals[0]?.aborted).toBe(true);

    release();
    const kept = JSON.parse((await pending).body) as ReadAnswer;
    expect(kept.id).toBe(7);
    expect(kept.result.structuredContent.session).toBe('kept');

    // The servers involved serve again; a new wait gets a signal of its own, not aborted.
    const later = await rawRequest(h.port, { headers: mcpHeaders(TOKEN, h.port), body: toolCall('droid_get_session_status', { session: 'later' }, 7) });
    expect((JSON.parse(later.body) as StatusAnswer).result.structuredContent.status.session).toBe('later');
    h.fake.override('waitForSessions', (_ids: unknown, _timeout: unknown, signal: unknown) => {
      signals.push(signal as AbortSignal);
      return { sessions: [], timedOut: false, aborted: (signal as AbortSignal).aborted };
    });
    const again = await rawRequest(h.port, {
      headers: mcpHeaders(TOKEN, h.port),
      body: toolCall('droid_wait_for_sessions', { sessions: ['s1'], timeoutSeconds: 1 }, 7),
    });
    expect(again.status).toBe(200);
    expect(signals).toHaveLength(2);
    expect(signals[1]).not.toBe(signals[0]);
    expect(signals[1]!.aborted).toBe(false);
  });

  it('lends every exchange a pooled server, reused, never one a client initialized or set a log level', async () => {
    const h = await start();
    h.fake.override('status', (session: unknown) => ({ session }));
    for (let i = 0; i < 20; i++) {
      const res = await rawRequest(h.port, { headers: mcpHeaders(TOKEN, h.port), body: toolCall('droid_get_session_status', { session: `s${i}` }, i) });
      expect(res.status).toBe(200);
    }
    expect((await rawRequest(h.port, { headers: mcpHeaders(TOKEN, h.port), body: rpc('tools/list', {}, 'list') })).status).toBe(200);
    expect((await rawRequest(h.port, { headers: mcpHeaders(TOKEN, h.port), body: rpc('ping', undefined, 'ping') })).status).toBe(200);
    const batch = () => `[${toolCall('droid_get_session_status', { session: 'a' }, 1)},${toolCall('droid_get_session_status', { session: 'b' }, 2)}]`;
    for (let i = 0; i < 3; i++) expect((await rawRequest(h.port, { headers: mcpHeaders(TOKEN, h.port), body: batch() })).status).toBe(200);
    // Sequential exchanges, lone or batched: one server, handed back and lent again (this fails if every exchange builds its own).
    expect(h.built()).toBe(1);

    const init = rpc('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'one-client', version: '1' } });
    const first = await rawRequest(h.port, { headers: mcpHeaders(TOKEN, h.port), body: init });
    expect(first.status).toBe(200);
    // The initialize took the idle server.
    expect(h.built()).toBe(1);
    const next = await rawRequest(h.port, { headers: mcpHeaders(TOKEN, h.port), body: toolCall('droid_get_session_status', { session: 'x' }, 1) });
    expect(next.status).toBe(200);
    // The initialized server was dropped: the next exchange needed a new one.
    expect(h.built()).toBe(2);
    expect((await rawRequest(h.port, { headers: mcpHeaders(TOKEN, h.port), body: batch() })).status).toBe(200);
    expect(h.built()).toBe(2);

    // A server told a log level keeps it: it is not lent to anyone after.
    expect((await rawRequest(h.port, { headers: mcpHeaders(TOKEN, h.port), body: rpc('logging/setLevel', { level: 'debug' }) })).status).toBe(200);
    expect((await rawRequest(h.port, { headers: mcpHeaders(TOKEN, h.port), body: toolCall('droid_get_session_status', { session: 'y' }, 1) })).status).toBe(
      200,
    );
    expect(h.built()).toBe(3);
  });

  it("a caller's notifications/cancelled never reaches another caller's request, whatever id it names", async () => {
    const h = await start();
    const signals: AbortSignal[] = [];
    let waitStarted!: () => void;
    const started = new Promise<void>((resolve) => (waitStarted = resolve));
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    h.fake.override('waitForSessions', async (_ids: unknown, _timeout: unknown, signal: unknown) => {
      signals.push(signal as AbortSignal);
      waitStarted();
      await held;
      return { sessions: [], timedOut: false, aborted: (signal as AbortSignal).aborted };
    });
    const pending = rawRequest(h.port, {
      headers: mcpHeaders(TOKEN, h.port),
      body: toolCall('droid_wait_for_sessions', { sessions: ['s1'], timeoutSeconds: 60 }, 3),
    });
    await started;
    // Its own id, and ids of other requests: each caller's notifications reach only its own lent server.
    for (const requestId of [3, ...Array.from({ length: 20 }, (_, i) => i)]) {
      const cancel = JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId, reason: 'not yours' } });
      expect((await rawRequest(h.port, { headers: mcpHeaders(TOKEN, h.port), body: cancel })).status).toBe(202);
    }
    expect(signals[0]!.aborted).toBe(false);
    release();
    const answered = JSON.parse((await pending).body) as { id: number; result: { structuredContent: { aborted: boolean } } };
    expect(answered.id).toBe(3);
    expect(answered.result.structuredContent.aborted).toBe(false);
  });
});

describe('IdleServers', () => {
  const make = () => createMcpServer({} as ToolContext, { error() {} });

  it('lends idle servers back out, and builds when none is idle', () => {
    let built = 0;
    const pool = new IdleServers(() => {
      built++;
      return make();
    }, 2);
    const a = pool.take();
    const b = pool.take();
    expect(built).toBe(2);
    pool.give(a, true);
    pool.give(b, true);
    pool.give(make(), true); // over the bound: dropped
    expect(pool.idle).toBe(2);
    const again = [pool.take(), pool.take()];
    expect(again).toContain(a);
    expect(again).toContain(b);
    expect(built).toBe(2);
  });

  it('drops a server after an unclean exchange, while connected, or once a client initialized it', async () => {
    const pool = new IdleServers(make);
    const unclean = pool.take();
    pool.give(unclean, false);
    expect(pool.idle).toBe(0);

    const { InMemoryTransport } = await import('@modelcontextprotocol/sdk/inMemory.js');
    // Initialized by a real client, then closed: it still remembers that client.
    const initialized = make();
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    await initialized.connect(serverSide);
    const client = new Client({ name: 'c', version: '1' });
    await client.connect(clientSide);
    await client.close();
    expect(initialized.transport).toBeUndefined();
    expect(reusable(initialized, true)).toBe(false);

    const connected = make();
    await connected.connect(InMemoryTransport.createLinkedPair()[1]);
    expect(reusable(connected, true)).toBe(false);
    await connected.close();
    expect(reusable(connected, true)).toBe(true);
  });
});
