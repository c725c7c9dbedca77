/**
 * MCP progress for droid_wait_for_sessions, through the real SDK client and
 * server over an in-memory transport; the controller is a scripted stand-in
 * whose sessions settle when the test says so.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import type { JSONRPCMessage, Progress } from '@modelcontextprotocol/sdk/types.js';
import { EventEmitter } from 'node:events';
import { createMcpServer } from '../../../src/mcp/server.js';
import { describeWait, waitWithProgress } from '../../../src/mcp/progress.js';
import type { ToolContext } from '../../../src/mcp/tools.js';
import type { SessionController } from '../../../src/controller/controller.js';
import type { SessionView } from '../../../src/controller/sessions/views.js';

const A = 'aaaaaaaa-0000-4000-8000-000000000001';
const B = 'bbbbbbbb-0000-4000-8000-000000000002';

function view(session: string, working: boolean, detail?: string): SessionView {
  return {
    session,
    agentState: working ? 'working' : 'idle',
    latestRun: {
      run: `run-${session}`,
      state: working ? 'running' : 'succeeded',
      events: detail ? [{ at: '2030-01-01T00:00:00Z', kind: 'tool_started', detail }] : [],
    },
  } as unknown as SessionView;
}

describe('describeWait usage so far (issue 22)', () => {
  const withUsage = (final: boolean, factoryCredits: number | null) => {
    const v = view(A, true, 'Read a.ts');
    const usage = { inputTokens: 200, outputTokens: 20, cacheCreationTokens: 0, cacheReadTokens: 10, thinkingTokens: 0, factoryCredits, final };
    return { ...v, latestRun: { ...v.latestRun, usage } } as unknown as SessionView;
  };

  it('names the running figure (tokens, credits when reported), never a final or absent one', () => {
    expect(describeWait([withUsage(false, 0.75)])).toBe('0 of 1 settled; working: aaaaaaaa running (230 tokens, 0.75 credits so far): Read a.ts');
    expect(describeWait([withUsage(false, null)])).toBe('0 of 1 settled; working: aaaaaaaa running (230 tokens so far): Read a.ts');
    expect(describeWait([withUsage(true, null)])).toBe('0 of 1 settled; working: aaaaaaaa running: Read a.ts');
    expect(describeWait([view(A, true, 'Read a.ts')])).toBe('0 of 1 settled; working: aaaaaaaa running: Read a.ts');
  });
});

/** Sessions that work until `settle(id)`; waits end when all listed ones settled. */
function fakeController() {
  const working = new Map<string, string>([
    [A, 'Create notes.txt'],
    [B, 'Execute npm test'],
  ]);
  const changes = new EventEmitter();
  const streaming = new Map<string, string>();
  const controller = {
    status: (id: string) => {
      if (id !== A && id !== B) throw new Error('session_not_found');
      return view(id, working.has(id), working.get(id));
    },
    onChange: (listener: () => void) => {
      changes.on('change', listener);
      return () => changes.off('change', listener);
    },
    waitForSessions: (ids: readonly string[]) =>
      new Promise((resolve) => {
        const check = () => {
          if (ids.some((id) => working.has(id))) return;
          changes.off('change', check);
          resolve({ sessions: ids.map((id) => view(id, false)), timedOut: false });
        };
        changes.on('change', check);
        check();
      }),
    liveText: (runId: string) => streaming.get(runId),
    listeners: () => changes.listenerCount('change'),
  };
  return {
    controller,
    stream(id: string, text: string) {
      streaming.set(`run-${id}`, text);
    },
    settle(id: string) {
      working.delete(id);
      changes.emit('change');
    },
  };
}

async function connect(controller: unknown) {
  const server = createMcpServer({ controller } as unknown as ToolContext, { error() {} });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  const sent: JSONRPCMessage[] = [];
  const send = serverSide.send.bind(serverSide);
  serverSide.send = (message, options) => {
    sent.push(message);
    return send(message, options);
  };
  await server.connect(serverSide);
  const client = new Client({ name: 't', version: '1' });
  await client.connect(clientSide);
  return { client, sent };
}

let close: (() => Promise<void>) | undefined;
afterEach(async () => {
  await close?.();
  close = undefined;
});

describe('droid_wait_for_sessions progress', () => {
  it('reports at the start and as each session settles, saying what still works', async () => {
    const { controller, settle } = fakeController();
    const { client } = await connect(controller);
    close = () => client.close();
    const updates: Progress[] = [];
    const call = client.callTool({ name: 'droid_wait_for_sessions', arguments: { sessions: [A, B], timeoutSeconds: 60 } }, undefined, {
      onprogress: (p) => updates.push(p),
    });
    await expect.poll(() => updates.length).toBe(1);
    expect(updates[0]).toMatchObject({ total: 60, message: '0 of 2 settled; working: aaaaaaaa running: Create notes.txt; bbbbbbbb running: Execute npm test' });
    settle(A);
    await expect.poll(() => updates.length).toBe(2);
    expect(updates[1]!.message).toBe('1 of 2 settled; working: bbbbbbbb running: Execute npm test');
    settle(B);
    await call;
    expect(updates.at(-1)!.message).toBe('2 of 2 settled');
    // The MCP spec: progress increases with every notification.
    for (let i = 1; i < updates.length; i++) expect(updates[i]!.progress).toBeGreaterThan(updates[i - 1]!.progress);
    expect(controller.listeners()).toBe(0);
  });

  it('keeps reporting every interval while nothing settles', async () => {
    const { controller, settle } = fakeController();
    const updates: Array<{ progress: number; message?: string }> = [];
    const waiting = waitWithProgress(controller as unknown as SessionController, [A], 30, undefined, (u) => updates.push(u), 30);
    await expect.poll(() => updates.length, { timeout: 2_000 }).toBeGreaterThanOrEqual(4);
    expect(updates.every((u) => u.message === '0 of 1 settled; working: aaaaaaaa running: Create notes.txt')).toBe(true);
    settle(A);
    await waiting;
    const count = updates.length;
    await new Promise((r) => setTimeout(r, 100));
    expect(updates.length).toBe(count); // nothing after the wait ended
  });

  it('sends no progress without a progress token, nor for a wait that is already settled', async () => {
    const { controller, settle } = fakeController();
    const { client, sent } = await connect(controller);
    close = () => client.close();
    const call = client.callTool({ name: 'droid_wait_for_sessions', arguments: { sessions: [A], timeoutSeconds: 60 } });
    await new Promise((r) => setTimeout(r, 50));
    settle(A);
    await call;
    settle(B);
    const updates: Progress[] = [];
    await client.callTool({ name: 'droid_wait_for_sessions', arguments: { sessions: [A, B] } }, undefined, { onprogress: (p) => updates.push(p) });
    expect(updates).toEqual([]);
    expect(sent.filter((m) => 'method' in m && m.method === 'notifications/progress')).toEqual([]);
  });

  it('describes a long progress text briefly', () => {
    const long = `${'x'.repeat(300)}\n\nmore`;
    expect(describeWait([view(A, true, long)])).toBe(`0 of 1 settled; working: aaaaaaaa running: ${'x'.repeat(120)}…`);
  });

  it('shows the tail of the text a session is streaming', async () => {
    const { controller, settle, stream } = fakeController();
    stream(A, Array.from({ length: 100 }, (_, i) => i + 1).join('\n'));
    const updates: Array<{ message?: string }> = [];
    const waiting = waitWithProgress(controller as unknown as SessionController, [A], 30, undefined, (u) => updates.push(u), 1_000);
    await expect.poll(() => updates.length).toBe(1);
    expect(updates[0]!.message).toMatch(/^0 of 1 settled; working: aaaaaaaa running: …[\d ]+ 98 99 100$/);
    settle(A);
    await waiting;
  });
});
