/**
 * Start-up over stdio (issue 19): the built server answers initialize and
 * tools/list before its state is loaded, a tool call waits for the state and
 * is then served, and a state that fails to load still refuses start-up with
 * the same words and exit code after a client was answered (its tool calls
 * are answered with the refusal until it disconnects).
 *
 * The state's loading is held back the way a racing start-up holds it: the
 * test takes the state directory's startup lock (store/owner-lock.ts) and lets it
 * go when it has seen what it checks. A raw line-JSON client sees every
 * answer, the exit code and stderr.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import lockfile from 'proper-lockfile';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SERVER_ENTRY } from '../../../src/testbed/mcp-driver.js';
import { startExpectingRefusal } from '../../support/mcp-server.js';
import { waitForNoProcesses } from '../../support/processes.js';
import { makeContext, type E2EContext } from '../../support/e2e-context.js';

let ctx: E2EContext;
const TAG = `e2e-startup-${process.pid}-${Date.now()}`;

beforeAll(async () => {
  ctx = await makeContext(TAG);
});
afterAll(async () => {
  await waitForNoProcesses(TAG, 15_000);
  await ctx?.cleanup();
});

interface RawServer {
  request(method: string, params?: Record<string, unknown>): Promise<Record<string, unknown>>;
  notify(method: string): void;
  stderr(): string;
  exited: Promise<{ code: number | null; stderr: string }>;
  close(): void;
}

/** The built server driven over stdio by hand: each request's answer, stderr, and how it exited. */
function spawnServer(configPath: string): RawServer {
  const child = spawn(process.execPath, [SERVER_ENTRY, '--config', configPath], { env: ctx.env, stdio: ['pipe', 'pipe', 'pipe'] });
  let err = '';
  let out = '';
  let next = 1;
  const waiting = new Map<number, (message: Record<string, unknown>) => void>();
  child.stderr.on('data', (c: Buffer) => (err += c.toString()));
  child.stdout.on('data', (c: Buffer) => {
    out += c.toString();
    for (let nl = out.indexOf('\n'); nl >= 0; nl = out.indexOf('\n')) {
      const message = JSON.parse(out.slice(0, nl)) as Record<string, unknown>;
      out = out.slice(nl + 1);
      waiting.get(message.id as number)?.(message);
    }
  });
  const exited = new Promise<{ code: number | null; stderr: string }>((resolve) => child.on('exit', (code) => resolve({ code, stderr: err })));
  const write = (message: Record<string, unknown>) => child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', ...message })}\n`);
  return {
    request(method, params = {}) {
      const id = next++;
      write({ id, method, params });
      return new Promise((resolve) => waiting.set(id, resolve));
    },
    notify: (method) => write({ method }),
    stderr: () => err,
    exited,
    close: () => child.stdin.end(),
  };
}

/** initialize, then tools/list; fails (rather than hangs) when they are not answered within 15 s. */
async function handshake(server: RawServer): Promise<{ tools: Array<{ name: string }> }> {
  const listed = await within(listTools(server), 15_000);
  if (listed === pending) throw new Error(`initialize and tools/list were not answered within 15 s; stderr: ${server.stderr().slice(-2000)}`);
  return listed;
}

async function listTools(server: RawServer): Promise<{ tools: Array<{ name: string }> }> {
  const init = await server.request('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'startup-test', version: '1.0.0' } });
  expect(init.result).toMatchObject({ serverInfo: { name: 'droid-mcp' } });
  server.notify('notifications/initialized');
  return (await server.request('tools/list')).result as { tools: Array<{ name: string }> };
}

/** Holds `dir`'s startup lock as a racing start-up would (kept fresh), until released. */
async function holdStartupLock(dir: string): Promise<() => Promise<void>> {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const path = join(dir, 'startup.lock');
  return lockfile.lock(path, { lockfilePath: path, realpath: false, stale: 10_000 });
}

const pending = Symbol('pending');
const within = <T>(promise: Promise<T>, ms: number): Promise<T | typeof pending> =>
  Promise.race([promise, new Promise<typeof pending>((resolve) => setTimeout(() => resolve(pending), ms))]);

/** The `msg` and `code` of the refusal line a server logged. */
function refusal(stderr: string): { code: unknown; msg: unknown } | undefined {
  for (const line of stderr.split('\n')) {
    if (!line.includes('refusing to start')) continue;
    const { code, msg } = JSON.parse(line) as { code: unknown; msg: unknown };
    return { code, msg };
  }
  return undefined;
}

describe('start-up over stdio', () => {
  it('answers initialize and tools/list while the state loads; a tool call waits for it, then is served', async () => {
    const stateDir = join(ctx.root, '..', 'held-state');
    const release = await holdStartupLock(stateDir);
    const server = spawnServer(ctx.config({ stateDirectory: stateDir }));
    try {
      const { tools } = await handshake(server);
      expect(tools).toHaveLength(11);
      const call = server.request('tools/call', { name: 'droid_list_workspaces', arguments: {} });
      // Still loading: the call is not answered, the directory is not owned, the server is not ready.
      expect(await within(call, 1_500)).toBe(pending);
      expect(existsSync(join(stateDir, 'owner.json'))).toBe(false);
      expect(server.stderr()).not.toContain('"msg":"droid-mcp ready"');
      await release();
      const answer = (await call) as { result: { isError?: boolean; structuredContent: { workspaces: string[] } } };
      expect(answer.result.isError).toBeUndefined();
      expect(answer.result.structuredContent.workspaces).toEqual([ctx.root]);
      // Answered only once the directory was owned: the single-owner rule holds before any call is served.
      expect(existsSync(join(stateDir, 'owner.json'))).toBe(true);
      expect(server.stderr()).toContain('"msg":"droid-mcp ready"');
    } finally {
      await release().catch(() => undefined);
      server.close();
    }
    expect((await server.exited).code).toBe(0);
  });

  it('a state that fails to load refuses start-up with the same words and exit code after the client got tools/list; the waiting call is answered with the refusal', async () => {
    const stateDir = join(ctx.root, '..', 'corrupt-held-state');
    mkdirSync(stateDir, { mode: 0o700 });
    writeFileSync(join(stateDir, 'state.jsonl'), '{"version": 1, "seq": 0, "sessions": 1, "runs": 0}\n{"session": {', { mode: 0o600 });
    const config = ctx.config({ stateDirectory: stateDir });
    // As start-up refuses it when no client has said anything.
    const unanswered = await startExpectingRefusal(config, ctx.env);
    expect(unanswered.code).toBe(1);
    expect(refusal(unanswered.stderr)).toMatchObject({ code: 'state_corrupt' });

    const release = await holdStartupLock(stateDir);
    const server = spawnServer(config);
    try {
      expect((await handshake(server)).tools).toHaveLength(11);
      const call = server.request('tools/call', { name: 'droid_get_usage', arguments: {} });
      await release();
      // Never served from a state that did not load: answered with the refusal, and the server waits for the client to go.
      const answered = await within(call, 15_000);
      if (answered === pending) throw new Error(`the waiting call was not answered within 15 s; stderr: ${server.stderr().slice(-2000)}`);
      const answer = answered as { result: { isError?: boolean; content: Array<{ text: string }> } };
      expect(answer.result.isError).toBe(true);
      expect(JSON.parse(answer.result.content[0]!.text)).toMatchObject({ error: { code: 'state_corrupt', retryable: false } });
      expect(await within(server.exited, 300)).toBe(pending);
      server.close();
      const exit = await server.exited;
      expect(exit.code).toBe(unanswered.code);
      expect(refusal(exit.stderr)).toEqual(refusal(unanswered.stderr));
    } finally {
      await release().catch(() => undefined);
      server.close();
    }
  });
});
