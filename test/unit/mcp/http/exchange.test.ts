/**
 * One exchange on a lent server (src/mcp/http/exchange.ts over
 * idle-servers.ts), on its own: concurrent exchanges with the same ids each
 * get their own answer; an abandoned exchange's handler is cancelled, its
 * late answer reaches nobody and its server is closed and never lent again;
 * an exchange that already ended takes no server; a server that failed to
 * connect is not lent again. The listener-level guarantees (a client gone,
 * a caller's cancellation never reaching another caller) are in
 * http-reuse.test.ts.
 */
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { CallToolRequestSchema, type JSONRPCRequest } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { exchange, type McpOutcome } from '../../../../src/mcp/http/exchange.js';
import { ExchangeEnd } from '../../../../src/mcp/http/exchange-end.js';
import { IdleServers } from '../../../../src/mcp/http/idle-servers.js';

const HEADERS = { accept: 'application/json, text/event-stream', 'content-type': 'application/json' };

function call(id: number | string, text: string): JSONRPCRequest {
  return { jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'echo', arguments: { text } } };
}

interface Held {
  text: string;
  signal: AbortSignal;
  answer(): void;
}

/** A pool of servers whose tool answers only when the test says so, echoing its argument; every server built is kept. */
function heldPool(make?: (server: Server) => Server): { pool: IdleServers; held: Held[]; servers: Server[] } {
  const held: Held[] = [];
  const servers: Server[] = [];
  const pool = new IdleServers(() => {
    const server = new Server({ name: 'exchange-test', version: '0' }, { capabilities: { tools: {} } });
    servers.push(server);
    server.setRequestHandler(CallToolRequestSchema, (request, { signal }) => {
      const text = String(request.params.arguments?.text);
      return new Promise((resolve) => held.push({ text, signal, answer: () => resolve({ content: [{ type: 'text', text }] }) }));
    });
    return make ? make(server) : server;
  });
  return { pool, held, servers };
}

function send(pool: IdleServers, message: JSONRPCRequest, end = new ExchangeEnd()): Promise<McpOutcome> {
  return exchange(pool, { url: 'http://127.0.0.1:1/mcp', headers: HEADERS, messages: message, end });
}

function answerOf(outcome: McpOutcome): { id: number | string; text: string } {
  if (outcome.kind !== 'answer') throw new Error(`expected an answer, got ${outcome.kind}`);
  const answer = JSON.parse(outcome.body) as { id: number | string; result: { content: Array<{ text: string }> } };
  return { id: answer.id, text: answer.result.content[0]!.text };
}

async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise<void>((resolve) => setImmediate(resolve));
}

describe('an exchange on a lent server', () => {
  it('answers concurrent exchanges with the same id each with its own answer, in whatever order the handlers finish; their servers are lent again', async () => {
    const bed = heldPool();
    const outcomes = ['a', 'b', 'c'].map((text) => send(bed.pool, call(1, text)));
    await until(() => bed.held.length === 3);
    expect(bed.servers).toHaveLength(3);
    for (const held of [...bed.held].reverse()) held.answer();
    const answers = (await Promise.all(outcomes)).map(answerOf);
    expect(answers).toEqual([
      { id: 1, text: 'a' },
      { id: 1, text: 'b' },
      { id: 1, text: 'c' },
    ]);
    // Handed back once closed, after the answer (setImmediate, then close).
    await until(() => bed.pool.idle === 3);
    expect(bed.servers.every((server) => server.transport === undefined)).toBe(true);
  });

  it("cancels an abandoned exchange's handler, closes its server and never lends it again; a late answer reaches nobody, the next exchange with the same id gets its own", async () => {
    const bed = heldPool();
    const abandoned = new ExchangeEnd();
    const first = send(bed.pool, call(7, 'first'), abandoned);
    await until(() => bed.held.length === 1);
    abandoned.end(new Error('client gone'));
    await expect(first).rejects.toThrow('client gone');
    expect(bed.held[0]!.signal.aborted).toBe(true);
    expect(bed.servers[0]!.transport).toBeUndefined();
    expect(bed.pool.idle).toBe(0);

    const second = send(bed.pool, call(7, 'second'));
    await until(() => bed.held.length === 2);
    // A new server: the abandoned one was not lent again.
    expect(bed.servers).toHaveLength(2);
    bed.held[0]!.answer();
    bed.held[1]!.answer();
    expect(answerOf(await second)).toEqual({ id: 7, text: 'second' });
    await until(() => bed.pool.idle === 1);
    const third = send(bed.pool, call(7, 'third'));
    await until(() => bed.held.length === 3);
    bed.held[2]!.answer();
    expect(answerOf(await third)).toEqual({ id: 7, text: 'third' });
    // The clean one was lent again; the abandoned one never was.
    expect(bed.servers).toHaveLength(2);
  });

  it('takes no server and runs nothing for an exchange that already ended', async () => {
    const bed = heldPool();
    const gone = new ExchangeEnd();
    gone.end(new Error('too late'));
    await expect(send(bed.pool, call(1, 'x'), gone)).rejects.toThrow('too late');
    await new Promise<void>((resolve) => setImmediate(resolve));
    expect(bed.servers).toHaveLength(0);
    expect(bed.held).toHaveLength(0);
  });

  it('does not lend again a server that failed to connect: the next exchange is lent another', async () => {
    let attempts = 0;
    const bed = heldPool((server) => {
      if (++attempts === 1) server.connect = () => Promise.reject(new Error('injected: connect failed'));
      return server;
    });
    await expect(send(bed.pool, call(1, 'x'))).rejects.toThrow('injected: connect failed');
    expect(bed.pool.idle).toBe(0);
    const next = send(bed.pool, call(1, 'y'));
    await until(() => bed.held.length === 1);
    bed.held[0]!.answer();
    expect(answerOf(await next)).toEqual({ id: 1, text: 'y' });
    expect(attempts).toBe(2);
  });
});
