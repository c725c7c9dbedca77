/**
 * What a client sees when the built server refuses to start (issue 38, item 4):
 *  - a config its checks refuse (the schema, a relative --config, a state
 *    directory, token file or checkouts folder in an approved root or in
 *    droid's home, …; cheap, so checked before the transport is connected):
 *    over stdio initialize is never answered, the process exits 1 and its
 *    stderr names the code and the action.
 * Driven through the MCP SDK client, and by hand where the exit code and the
 * bytes on stdout matter.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, readdirSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { SERVER_ENTRY } from '../../src/testbed/mcp-driver.js';
import { waitForNoProcesses } from '../support/processes.js';
import { makeContext, type E2EContext } from './context.js';

let ctx: E2EContext;
const TAG = `e2e-refusals-${process.pid}-${Date.now()}`;
const INITIALIZE = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'refusals', version: '1' } } };

beforeAll(async () => {
  ctx = await makeContext(TAG);
});
afterEach(async () => {
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
  transport: StdioClientTransport;
  stderr(): string;
}

/** The MCP SDK client over stdio, not yet connected. */
function sdkClient(configArg: string, cwd?: string): SdkClient {
  const transport = new StdioClientTransport({ command: process.execPath, args: [SERVER_ENTRY, '--config', configArg], env: ctx.env, stderr: 'pipe', ...(cwd && { cwd }) });
  let stderr = '';
  transport.stderr?.on('data', (c: Buffer) => (stderr += c.toString()));
  const client = new Client({ name: 'refusals', version: '1.0.0' });
  return { client, transport, stderr: () => stderr };
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
  expect(refusal(exit.stderr)).toMatchObject({ code: 'config_invalid', msg: expect.stringMatching(words), action: expect.stringMatching(/start droid-mcp again/) });
  expect(refusal(sdk.stderr())).toEqual(refusal(exit.stderr));
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
