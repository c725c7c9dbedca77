/**
 * The HTTP pipeline holds each complete request until the end of the poll it
 * was read in (src/mcp/http/poll-round.ts), so the requests of one poll are
 * answered together. What that must not change: a client gone meanwhile gets
 * nothing run for it, and a request alone is answered right after its poll.
 */
import { IncomingMessage, ServerResponse } from 'node:http';
import { Socket } from 'node:net';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { CallToolRequestSchema, type JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { createPipeline } from '../../../../src/mcp/http/pipeline.js';
import { pollRound } from '../../../../src/mcp/http/poll-round.js';
import type { ServerLender } from '../../../../src/mcp/http/idle-servers.js';
import type { Log } from '../../../../src/util/logger.js';

const nextCheckPhase = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('pollRound', () => {
  it('resolves every caller of one round together, in the check phase after it, and then starts a new round', async () => {
    const round = pollRound();
    const first = round();
    expect(round()).toBe(first);
    let done = false;
    void first.then(() => (done = true));
    // Microtasks and next ticks alone do not end the round.
    await Promise.resolve();
    await new Promise<void>((resolve) => process.nextTick(resolve));
    expect(done).toBe(false);
    await nextCheckPhase();
    expect(done).toBe(true);
    expect(round()).not.toBe(first);
  });
});

/** A POST /mcp as Node's parser would hand it over, its body already read off the socket. */
function request(body: JSONRPCMessage | JSONRPCMessage[]): { req: IncomingMessage; res: ServerResponse } {
  const req = new IncomingMessage(new Socket());
  req.method = 'POST';
  req.url = '/mcp';
  const bytes = Buffer.from(JSON.stringify(body));
  req.headers = {
    host: '127.0.0.1:1',
    authorization: 'Bearer ok',
    accept: 'application/json, text/event-stream',
    'content-type': 'application/json',
    'content-length': String(bytes.length),
  };
  req.push(bytes);
  req.push(null);
  // As Node's parser marks a request whose body it read to the end (else the ended stream destroys its socket).
  req.complete = true;
  return { req, res: new ServerResponse(req) };
}

function pipelineOver(reached: string[]) {
  const lines: string[] = [];
  const log: Log = { info: (_o, msg) => lines.push(String(msg)), warn() {}, error: (_o, msg) => lines.push(String(msg)) };
  // Every exchange is lent a server: one taken is recorded, and its tool answers an empty result.
  const servers: ServerLender = {
    take: () => {
      reached.push('lent');
      const server = new Server({ name: 'poll-round-test', version: '0' }, { capabilities: { tools: {} } });
      server.setRequestHandler(CallToolRequestSchema, () => ({ content: [] }));
      return server;
    },
    give() {},
  };
  const handle = createPipeline({
    authorize: (authorization) => (authorization === 'Bearer ok' ? 'ok' : 'invalid'),
    hosts: { hostAllowed: () => true, originAllowed: () => true },
    limits: { maxBodyBytes: 1024, bodyTimeoutMs: 1_000, responseTimeoutMs: 1_000 },
    servers,
    endpoint: 'http://127.0.0.1:1/mcp',
    log,
  });
  return { handle, lines };
}

const statusCall: JSONRPCMessage = { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'droid_get_session_status', arguments: {} } };

describe('the HTTP pipeline and the poll round', () => {
  it('runs nothing for a client that leaves before the round ends, alone or in a batch: no server is even taken', async () => {
    const reached: string[] = [];
    const { handle, lines } = pipelineOver(reached);
    // The response closed, or (a reset read in the same poll) only the socket destroyed: its 'close' comes after the round.
    const leaves = [(res: ServerResponse) => res.emit('close'), (res: ServerResponse) => res.req.socket.destroy()];
    for (const leave of leaves) {
      for (const body of [statusCall, [statusCall]]) {
        const { req, res } = request(body);
        handle(req, res);
        // The body is read (next ticks), then the client goes, all before the check phase.
        for (let i = 0; i < 5; i++) await new Promise<void>((resolve) => process.nextTick(resolve));
        leave(res);
        await nextCheckPhase();
        await nextCheckPhase();
      }
    }
    expect(reached).toEqual([]);
    expect(lines.filter((l) => l === 'http client went away before the MCP response')).toHaveLength(4);
  });

  it('answers a request that stays once its round is over', async () => {
    const reached: string[] = [];
    const { handle } = pipelineOver(reached);
    const { req, res } = request(statusCall);
    let body = '';
    res.write = ((chunk: string) => ((body += chunk), true)) as typeof res.write;
    const ended = new Promise<void>((resolve) => (res.end = ((chunk: string) => ((body += chunk ?? ''), resolve(), res)) as typeof res.end));
    handle(req, res);
    await ended;
    expect(reached).toEqual(['lent']);
    expect(res.statusCode).toBe(200);
    expect(JSON.parse(body)).toEqual({ jsonrpc: '2.0', id: 1, result: { content: [] } });
  });
});
