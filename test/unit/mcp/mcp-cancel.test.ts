/**
 * A client that cancels a tool call stops the work behind it: the MCP
 * request's abort signal reaches the controller's wait.
 */
import { describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { createMcpServer } from '../../../src/mcp/server.js';
import type { ToolContext } from '../../../src/mcp/tools.js';
import type { SessionController } from '../../../src/controller/controller.js';

describe('MCP request cancellation', () => {
  it('a cancelled droid_wait_for_sessions aborts the controller wait', async () => {
    let waitSignal: AbortSignal | undefined;
    let waitEnded!: () => void;
    const ended = new Promise<void>((resolve) => (waitEnded = resolve));
    const controller = {
      waitForSessions: (_ids: readonly string[], _timeout: number, signal?: AbortSignal) => {
        waitSignal = signal;
        return new Promise((_resolve, reject) => {
          signal?.addEventListener('abort', () => {
            waitEnded();
            reject(new Error('aborted'));
          });
        });
      },
    } as unknown as SessionController;
    const ctx = { controller } as unknown as ToolContext;
    const server = createMcpServer(ctx, { error() {} });
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    await server.connect(serverSide);
    const client = new Client({ name: 't', version: '1' });
    await client.connect(clientSide);

    const abort = new AbortController();
    const call = client.callTool(
      { name: 'droid_wait_for_sessions', arguments: { sessions: ['00000000-0000-4000-8000-000000000000'], timeoutSeconds: 60 } },
      undefined,
      {
        signal: abort.signal,
      },
    );
    await expect.poll(() => waitSignal).toBeDefined();
    expect(waitSignal!.aborted).toBe(false);
    abort.abort('client gave up');
    await expect(call).rejects.toThrow();
    await ended;
    expect(waitSignal!.aborted).toBe(true);
    await client.close();
  });
});
