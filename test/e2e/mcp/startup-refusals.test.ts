/**
 * What a client sees when the built server refuses to start (issue 38, item 4):
 *  - a config its checks refuse (the schema, a relative --config, a state
 *    directory, token file or checkouts folder in an approved root or in
 *    droid's home, …; cheap, so checked before the transport is connected):
 *    over stdio initialize is never answered, the process exits 1 and its
 *    stderr names the code and the action; over HTTP nothing ever listens;
 *  - a state directory that fails to load (found only once it is opened,
 *    after a stdio client was answered): every tool call is answered with the
 *    refusal (its code, retryable false, an action), an error log message
 *    says it, and the process exits 1 once the client disconnects; over HTTP
 *    nothing ever listens.
 * Driven through the MCP SDK client, and by hand where the exit code and the
 * bytes on stdout matter.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { basename, dirname, join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { LoggingMessageNotificationSchema, type LoggingMessageNotification } from '@modelcontextprotocol/sdk/types.js';
import lockfile from 'proper-lockfile';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { SERVER_ENTRY } from '../../../src/testbed/mcp-driver.js';
import { freePort } from '../../../src/testbed/server-process.js';
import { ChildStdioTransport } from '../../support/child-stdio-transport.js';
import type { RunningServer } from '../../support/mcp-server.js';
import { writeTokenFile } from '../../support/http-server.js';
import { waitForNoProcesses } from '../../support/processes.js';
import { makeContext, type E2EContext } from '../../support/e2e-context.js';

let ctx: E2EContext;
let first: RunningServer | undefined;
const TAG = `e2e-refusals-${process.pid}-${Date.now()}`;
const CORRUPT = '{"version": 1, "seq": 0, "sessions": 1, "runs": 0}\n{"session": {';
const INITIALIZE = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'refusals', version: '1' } },
};

beforeAll(async () => {
  ctx = await makeContext(TAG);
});
afterEach(async () => {
  await first?.close();
  first = undefined;
  await waitForNoProcesses(TAG, 15_000);
});
afterAll(async () => {
  await ctx?.cleanup();
});

interface Exit {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** The server spawned by hand, sent initialize at once and never closed by us: what it wrote and how it exited (killed after 20 s). */
function runSendingInitialize(configArg: string, cwd?: string): Promise<Exit> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [SERVER_ENTRY, '--config', configArg], { env: ctx.env, cwd, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.stdin.on('error', () => undefined);
    child.stdin.write(`${JSON.stringify(INITIALIZE)}\n`);
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    child.on('exit', (code) => {
      clearTimeout(timer);
      child.stdin.end();
      resolve({ code, stdout, stderr });
    });
  });
}

interface SdkClient {
  client: Client;
  transport: ChildStdioTransport;
  stderr(): string;
  logged: LoggingMessageNotification['params'][];
}

/** The MCP SDK client over stdio, not yet connected. */
function sdkClient(configArg: string, cwd?: string): SdkClient {
  const transport = new ChildStdioTransport(process.execPath, [SERVER_ENTRY, '--config', configArg], { env: ctx.env, ...(cwd && { cwd }) });
  let stderr = '';
  transport.child.stderr?.on('data', (c: Buffer) => (stderr += c.toString()));
  const client = new Client({ name: 'refusals', version: '1.0.0' });
  const logged: LoggingMessageNotification['params'][] = [];
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => void logged.push(n.params));
  return { client, transport, stderr: () => stderr, logged };
}

/** The fields of the one "refusing to start" line a server logged. */
function refusal(stderr: string): Record<string, unknown> {
  const lines = stderr.split('\n').filter((l) => l.includes('refusing to start'));
  expect(lines, stderr).toHaveLength(1);
  const { code, msg, action } = JSON.parse(lines[0]!) as Record<string, unknown>;
  return { code, msg, action };
}

/** A config refused by its checks: the SDK client never connects, initialize is never answered, and the process exits 1 naming code and action. */
async function expectRefusedBeforeHandshake(configArg: string, cwd: string | undefined, words: RegExp): Promise<void> {
  const sdk = sdkClient(configArg, cwd);
  await expect(sdk.client.connect(sdk.transport)).rejects.toThrow(/closed/i);
  await sdk.client.close();
  const exit = await runSendingInitialize(configArg, cwd);
  expect(exit.code).toBe(1);
  expect(exit.stdout).toBe('');
  expect(refusal(exit.stderr)).toMatchObject({
    code: 'config_invalid',
    msg: expect.stringMatching(words),
    action: expect.stringMatching(/start droid-mcp again/),
  });
  expect(refusal(sdk.stderr())).toEqual(refusal(exit.stderr));
}

/** Holds `dir`'s startup lock as a racing start-up would (kept fresh), until released: the state's loading waits for it. */
async function holdStartupLock(dir: string): Promise<() => Promise<void>> {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const path = join(dir, 'startup.lock');
  return lockfile.lock(path, { lockfilePath: path, realpath: false, stale: 10_000 });
}

function corruptStateDir(name: string): string {
  const dir = join(ctx.root, '..', name);
  mkdirSync(dir, { mode: 0o700 });
  writeFileSync(join(dir, 'state.jsonl'), CORRUPT, { mode: 0o600 });
  return dir;
}

/** A tool call's rejection, as the SDK client got it. */
async function rejection(sdk: SdkClient, name: string): Promise<Record<string, unknown>> {
  const result = await sdk.client.callTool({ name, arguments: {} }, undefined, { timeout: 30_000 });
  expect(result.isError).toBe(true);
  return (JSON.parse((result.content as Array<{ text: string }>)[0]!.text) as { error: Record<string, unknown> }).error;
}

/** The server behind the client's transport: closing the client ends its stdin; resolves with its exit code. */
function exitOf(sdk: SdkClient): Promise<number | null> {
  return sdk.transport.exited;
}

describe('a config its checks refuse: refused before the handshake', () => {
  it('stdio, a relative --config: initialize is never answered, exit 1 with config_invalid and its action on stderr', async () => {
    const config = ctx.config();
    await expectRefusedBeforeHandshake(basename(config), dirname(config), /--config must be an absolute path/);
  });

  it('stdio, a state directory inside an approved root: initialize is never answered, exit 1 with config_invalid, nothing written there', async () => {
    const inside = join(ctx.root, 'state-inside');
    mkdirSync(inside, { mode: 0o700 });
    await expectRefusedBeforeHandshake(ctx.config({ stateDirectory: inside }), undefined, /"stateDirectory" .* inside the approved root/);
    expect(readdirSync(inside)).toEqual([]);
  });
});

describe('a state directory that fails to load: every tool call answers the refusal', () => {
  it('stdio, a corrupt state found after the handshake: waiting and later calls get state_corrupt (retryable false, an action), a log message says it, exit 1 once the client disconnects', async () => {
    const stateDir = corruptStateDir('corrupt-after-handshake');
    const release = await holdStartupLock(stateDir);
    const sdk = sdkClient(ctx.config({ stateDirectory: stateDir }));
    try {
      await sdk.client.connect(sdk.transport);
      expect((await sdk.client.listTools()).tools).toHaveLength(11);
      const waiting = rejection(sdk, 'droid_list_workspaces');
      await release();
      const refused = {
        code: 'state_corrupt',
        retryable: false,
        message: expect.stringMatching(/refused to start/),
        action: expect.stringMatching(/operator/),
      };
      expect(await waiting).toMatchObject(refused);
      // Answered again, not dropped: the server stays until the client goes.
      expect(await rejection(sdk, 'droid_get_usage')).toEqual(await waiting);
      // No host path in what the client is told.
      expect(JSON.stringify(await waiting)).not.toContain(stateDir);
      expect(sdk.logged).toContainEqual(expect.objectContaining({ level: 'error', data: expect.objectContaining({ code: 'state_corrupt' }) }));
      const exited = exitOf(sdk);
      await sdk.client.close();
      expect(await exited).toBe(1);
      expect(refusal(sdk.stderr())).toMatchObject({ code: 'state_corrupt', action: expect.stringMatching(/backup/) });
    } finally {
      await release().catch(() => undefined);
      await sdk.client.close();
    }
  });

  it('stdio, a state directory a live controller owns: the calls of a client answered before it failed get state_locked with its action, exit 1 once it disconnects', async () => {
    first = await ctx.start();
    const sdk = sdkClient(ctx.config());
    try {
      await sdk.client.connect(sdk.transport);
      expect(await rejection(sdk, 'droid_list_workspaces')).toMatchObject({
        code: 'state_locked',
        retryable: false,
        action: expect.stringMatching(/operator/),
      });
      const exited = exitOf(sdk);
      await sdk.client.close();
      expect(await exited).toBe(1);
      expect(refusal(sdk.stderr())).toMatchObject({ code: 'state_locked', action: expect.stringMatching(/Stop that controller/) });
    } finally {
      await sdk.client.close();
    }
    // The owner is untouched.
    expect((await first.ok<{ workspaces: string[] }>('droid_list_workspaces')).workspaces).toEqual([ctx.root]);
  });
});

/** Whether something accepts a TCP connection on 127.0.0.1:`port` now. */
function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port }, () => {
      socket.destroy();
      resolve(true);
    });
    socket.on('error', () => resolve(false));
  });
}

/** Tries `port` every 50 ms until `exited` settles: whether anything ever accepted a connection there. */
async function everListened(port: number, exited: Promise<unknown>): Promise<boolean> {
  let done = false;
  void exited.finally(() => (done = true));
  while (!done) {
    if (await listening(port)) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return listening(port);
}

describe('over HTTP nothing listens before the config and the state are known good', () => {
  it('http, a state directory inside an approved root: exit 1 with config_invalid, never listening', async () => {
    const token = writeTokenFile();
    const inside = join(ctx.root, 'http-state-inside');
    mkdirSync(inside, { mode: 0o700 });
    const port = await freePort();
    try {
      const exit = runSendingInitialize(ctx.config({ transport: 'http', port, tokenFile: token.path, stateDirectory: inside }));
      expect(await everListened(port, exit)).toBe(false);
      const { code, stderr } = await exit;
      expect(code).toBe(1);
      expect(refusal(stderr)).toMatchObject({
        code: 'config_invalid',
        msg: expect.stringMatching(/"stateDirectory" .* inside the approved root/),
        action: expect.any(String),
      });
      expect(readdirSync(inside)).toEqual([]);
    } finally {
      token.remove();
    }
  });

  it('http, a corrupt state: nothing listens while it loads, then exit 1 with state_corrupt and its action', async () => {
    const token = writeTokenFile();
    const stateDir = corruptStateDir('http-corrupt');
    const release = await holdStartupLock(stateDir);
    const port = await freePort();
    try {
      const exit = runSendingInitialize(ctx.config({ transport: 'http', port, tokenFile: token.path, stateDirectory: stateDir }));
      // The state's loading waits for its startup lock: 3 s of a server up and not listening, then the refusal.
      setTimeout(() => void release(), 3_000);
      expect(await everListened(port, exit)).toBe(false);
      const { code, stderr } = await exit;
      expect(code).toBe(1);
      expect(refusal(stderr)).toMatchObject({ code: 'state_corrupt', action: expect.stringMatching(/backup/) });
    } finally {
      await release().catch(() => undefined);
      token.remove();
    }
  });
});
