/**
 * dispatchRequestsDirectly (src/mcp/request-entry.ts) on a real SDK server:
 * requests reach their handler without the SDK's transport callback (its
 * second classification of every message), everything else still goes
 * through that callback, and the answers are the SDK's own.
 */
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { CallToolRequestSchema, type JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { dispatchRequestsDirectly } from '../../../src/mcp/request-entry.js';

class RecordingTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  readonly sent: JSONRPCMessage[] = [];
  async start(): Promise<void> {}
  async send(message: JSONRPCMessage): Promise<void> {
    this.sent.push(message);
  }
  async close(): Promise<void> {
    this.onclose?.();
  }
}

async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise<void>((resolve) => setImmediate(resolve));
}

describe('dispatchRequestsDirectly', () => {
  it("sends requests straight to the server's dispatch and every other message through the SDK's callback", async () => {
    const server = new Server({ name: 't', version: '0' }, { capabilities: { tools: {} } });
    const cancelled: string[] = [];
    server.setRequestHandler(CallToolRequestSchema, (request, { signal }) => {
      signal.addEventListener('abort', () => cancelled.push(String(request.params.name)));
      // Never answers: only its cancellation ends it.
      if (request.params.name === 'slow') return new Promise(() => {});
      return { content: [{ type: 'text', text: `called ${request.params.name}` }] };
    });
    const transport = new RecordingTransport();
    await server.connect(transport);
    const throughCallback: JSONRPCMessage[] = [];
    const sdkCallback = transport.onmessage!;
    transport.onmessage = (message) => {
      throughCallback.push(message);
      sdkCallback(message);
    };
    dispatchRequestsDirectly(server, transport);

    transport.onmessage!({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'fast' } });
    transport.onmessage!({ jsonrpc: '2.0', id: 2, method: 'no/such/method' });
    transport.onmessage!({ jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'slow' } });
    await until(() => transport.sent.length === 2);
    expect(transport.sent).toEqual([
      { jsonrpc: '2.0', id: 2, error: { code: -32601, message: 'Method not found' } },
      { jsonrpc: '2.0', id: 1, result: { content: [{ type: 'text', text: 'called fast' }] } },
    ]);
    expect(throughCallback).toEqual([]);

    const cancel: JSONRPCMessage = { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 3 } };
    const response: JSONRPCMessage = { jsonrpc: '2.0', id: 99, result: {} };
    transport.onmessage!(cancel);
    transport.onmessage!(response);
    await until(() => cancelled.length === 1);
    expect(cancelled).toEqual(['slow']);
    expect(throughCallback).toEqual([cancel, response]);
  });
});
