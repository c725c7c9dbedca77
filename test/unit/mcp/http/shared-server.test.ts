/**
 * The shared MCP server of the HTTP transport (src/mcp/http/shared-server.ts),
 * on its own: which requests it takes, that an abandoned request is cancelled
 * and its late answer reaches nobody, and that a failed connect is not kept.
 * The listener-level guarantees (same ids from many clients, a caller's
 * cancellation never reaching another caller) are in http-reuse.test.ts.
 */
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { CallToolRequestSchema, type JSONRPCMessage, type JSONRPCRequest } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { requestEntry } from '../../../../src/mcp/request-entry.js';
import { ExchangeEnd } from '../../../../src/mcp/http/exchange-end.js';
import { answersAlone, SharedServer } from '../../../../src/mcp/http/shared-server.js';

const extra = { requestInfo: { headers: {}, url: new URL('http://127.0.0.1:1/mcp') } };

function call(id: number | string, text: string): JSONRPCRequest {
  return { jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'echo', arguments: { text } } };
}

interface Held {
  text: string;
  signal: AbortSignal;
  answer(): void;
}

/** Servers whose tool answers only when the test says so, echoing its argument; every one built is kept. */
function heldServer(): { make: () => Server; held: Held[]; built: () => number; servers: Server[] } {
  const held: Held[] = [];
  const servers: Server[] = [];
  const make = () => {
    const server = new Server({ name: 'shared-test', version: '0' }, { capabilities: { tools: {} } });
    servers.push(server);
    server.setRequestHandler(CallToolRequestSchema, (request, { signal }) => {
      const text = String(request.params.arguments?.text);
      return new Promise((resolve) => held.push({ text, signal, answer: () => resolve({ content: [{ type: 'text', text }] }) }));
    });
    return server;
  };
  return { make, held, built: () => servers.length, servers };
}

const textOf = (answer: unknown) => (answer as { result: { content: Array<{ text: string }> } }).result.content[0]!.text;

async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise<void>((resolve) => setImmediate(resolve));
}

describe('SharedServer', () => {
  it('takes lone tools/call, tools/list and ping requests only', () => {
    const take: JSONRPCMessage[] = [call(1, 'x'), { jsonrpc: '2.0', id: 'a', method: 'tools/list' }, { jsonrpc: '2.0', id: 2, method: 'ping' }];
    const leave: JSONRPCMessage[] = [
      { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'c', version: '1' } } },
      { jsonrpc: '2.0', id: 1, method: 'logging/setLevel', params: { level: 'debug' } },
      { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 1 } },
      { jsonrpc: '2.0', method: 'tools/call', params: { name: 'echo' } },
      { jsonrpc: '2.0', id: 1, result: {} },
      { jsonrpc: '2.0', id: 1, method: 'resources/list' },
    ];
    expect(take.map(answersAlone)).toEqual([true, true, true]);
    expect(leave.map(answersAlone)).toEqual(leave.map(() => false));
  });

  it("answers each request under its caller's id, in whatever order the handlers finish", async () => {
    const bed = heldServer();
    const shared = new SharedServer(bed.make);
    const end = new ExchangeEnd();
    const answers = ['a', 'b', 'c'].map((text) => shared.answer(call(1, text), extra, end));
    await until(() => bed.held.length === 3);
    for (const held of [...bed.held].reverse()) held.answer();
    const answered = await Promise.all(answers);
    expect(answered.map((a) => a.id)).toEqual([1, 1, 1]);
    expect(answered.map(textOf)).toEqual(['a', 'b', 'c']);
    expect(shared.pending).toBe(0);
    expect(bed.built()).toBe(1);
  });

  it('cancels an abandoned request; its late answer reaches nobody, the next one with the same id gets its own', async () => {
    const bed = heldServer();
    const shared = new SharedServer(bed.make);
    const abandoned = new ExchangeEnd();
    const first = shared.answer(call(7, 'first'), extra, abandoned);
    await until(() => bed.held.length === 1);
    abandoned.end(new Error('client gone'));
    await expect(first).rejects.toThrow('client gone');
    await until(() => bed.held[0]!.signal.aborted);
    expect(shared.pending).toBe(0);

    const second = shared.answer(call(7, 'second'), extra, new ExchangeEnd());
    await until(() => bed.held.length === 2);
    bed.held[0]!.answer();
    bed.held[1]!.answer();
    const answer = await second;
    expect(answer.id).toBe(7);
    expect(textOf(answer)).toBe('second');
    expect(shared.pending).toBe(0);
  });

  it("hands a request to the SDK's request dispatch, past the transport callback that classifies it again; a cancellation still goes through that callback", async () => {
    // The pinned SDK has the entry; an upgrade that drops it fails here.
    expect(requestEntry(new Server({ name: 't', version: '0' }, { capabilities: {} }))).toBeTypeOf('function');
    const bed = heldServer();
    const shared = new SharedServer(bed.make);
    const first = shared.answer(call(1, 'first'), extra, new ExchangeEnd());
    await until(() => bed.held.length === 1);
    bed.held[0]!.answer();
    await first;
    const transport = bed.servers[0]!.transport!;
    const passed: JSONRPCMessage[] = [];
    const callback = transport.onmessage!;
    transport.onmessage = (message, info) => {
      passed.push(message);
      callback(message, info);
    };
    const second = shared.answer(call(2, 'second'), extra, new ExchangeEnd());
    await until(() => bed.held.length === 2);
    bed.held[1]!.answer();
    expect(textOf(await second)).toBe('second');
    expect(passed).toEqual([]);

    const abandoned = new ExchangeEnd();
    const third = shared.answer(call(3, 'third'), extra, abandoned);
    await until(() => bed.held.length === 3);
    abandoned.end(new Error('client gone'));
    await expect(third).rejects.toThrow('client gone');
    await until(() => bed.held[2]!.signal.aborted);
    expect(passed.map((m) => ('method' in m ? m.method : null))).toEqual(['notifications/cancelled']);
  });

  it('replaces its server after an abandoned request, closing the old one once its other requests are answered', async () => {
    const bed = heldServer();
    const shared = new SharedServer(bed.make);
    const servers = bed.servers;
    const abandoned = new ExchangeEnd();
    const gone = shared.answer(call(1, 'gone'), extra, abandoned);
    const kept = shared.answer(call(2, 'kept'), extra, new ExchangeEnd());
    await until(() => bed.held.length === 2);
    abandoned.end(new Error('client gone'));
    await expect(gone).rejects.toThrow('client gone');

    // New requests go to a new server; the old one still answers what it holds.
    const next = shared.answer(call(3, 'next'), extra, new ExchangeEnd());
    await until(() => bed.held.length === 3);
    expect(bed.built()).toBe(2);
    expect(shared.open).toBe(2);
    bed.held[1]!.answer();
    expect(textOf(await kept)).toBe('kept');
    // Nothing waits on the old server any more: it is closed (the SDK forgets the abandoned handler).
    await until(() => servers[0]!.transport === undefined);
    expect(shared.open).toBe(1);
    bed.held[2]!.answer();
    expect(textOf(await next)).toBe('next');
    expect(shared.pending).toBe(0);
    expect(servers[1]!.transport).toBeDefined();
  });

  it('closes the server of an abandoned request whose handler never settles, when nothing else waits on it', async () => {
    const bed = heldServer();
    const shared = new SharedServer(bed.make);
    const servers = bed.servers;
    for (let i = 0; i < 3; i++) {
      const abandoned = new ExchangeEnd();
      const answer = shared.answer(call(1, `hung ${i}`), extra, abandoned);
      await until(() => bed.held.length === i + 1);
      abandoned.end(new Error('deadline'));
      await expect(answer).rejects.toThrow('deadline');
    }
    await until(() => servers.every((server) => server.transport === undefined));
    expect(servers).toHaveLength(3);
    expect(shared.open).toBe(0);
    expect(bed.held.every((held) => held.signal.aborted)).toBe(true);
  });

  it('refuses at once for an exchange that already ended, running nothing', async () => {
    const bed = heldServer();
    const shared = new SharedServer(bed.make);
    const gone = new ExchangeEnd();
    gone.end(new Error('too late'));
    await expect(shared.answer(call(1, 'x'), extra, gone)).rejects.toThrow('too late');
    await new Promise<void>((resolve) => setImmediate(resolve));
    expect(bed.held).toHaveLength(0);
    expect(shared.pending).toBe(0);
  });

  it('does not keep a failed connect: the next request builds and connects again', async () => {
    const bed = heldServer();
    let attempts = 0;
    const shared = new SharedServer(() => {
      if (++attempts === 1) throw new Error('injected: first build fails');
      return bed.make();
    });
    const end = new ExchangeEnd();
    await expect(shared.answer(call(1, 'x'), extra, end)).rejects.toThrow('injected: first build fails');
    const answer = shared.answer(call(1, 'y'), extra, end);
    await until(() => bed.held.length === 1);
    bed.held[0]!.answer();
    expect(textOf(await answer)).toBe('y');
    expect(attempts).toBe(2);
  });
});
