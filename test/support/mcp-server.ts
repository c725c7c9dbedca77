/**
 * Starts the built droid-mcp server as its own process and talks to it with
 * the real MCP SDK client over stdio. Nothing of ours is mocked.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { SERVER_ENTRY } from './paths.js';
import { warmPoolConfig } from './warm-pool.js';

export { SERVER_ENTRY };


export interface ToolOutcome {
  isError: boolean;
  structured: Record<string, unknown>;
  text: string;
}

export interface RunningServer {
  client: Client;
  pid: number;
  stderr: () => string;
  call(name: string, args?: Record<string, unknown>): Promise<ToolOutcome>;
  /** Structured content of a successful call; throws with the error otherwise. */
  ok<T = Record<string, unknown>>(name: string, args?: Record<string, unknown>): Promise<T>;
  close(): Promise<void>;
}

/** Tool calls as tests want them, for any transport's client. */
export function toolCaller(client: Client): Pick<RunningServer, 'call' | 'ok'> {
  const call = async (name: string, args: Record<string, unknown> = {}): Promise<ToolOutcome> => {
    const result = await client.callTool({ name, arguments: args }, undefined, { timeout: 120_000 });
    const content = (result.content as Array<{ type: string; text?: string }> | undefined) ?? [];
    const text = content.map((c) => c.text ?? '').join('');
    const isError = result.isError === true;
    // Rejections carry {error: {...}} as JSON text (see src/mcp/server.ts).
    const structured = isError ? (JSON.parse(text) as Record<string, unknown>) : ((result.structuredContent as Record<string, unknown>) ?? {});
    return { isError, structured, text };
  };
  async function ok<T = Record<string, unknown>>(name: string, args: Record<string, unknown> = {}): Promise<T> {
    const outcome = await call(name, args);
    if (outcome.isError) throw new Error(`${name} failed: ${outcome.text}`);
    return outcome.structured as T;
  }
  return { call, ok };
}

/** Every server config a test writes follows the warm-pool switch, unless the test sets warmPoolSize itself. */
export function writeConfig(dir: string, config: Record<string, unknown>): string {
  const path = join(dir, `config-${Math.random().toString(36).slice(2)}.json`);
  writeFileSync(path, JSON.stringify({ ...warmPoolConfig(), ...config }, null, 2), { mode: 0o600 });
  return path;
}

export function privateDir(prefix: string): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

export async function startServer(configPath: string, env: Record<string, string>): Promise<RunningServer> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [SERVER_ENTRY, '--config', configPath],
    env,
    stderr: 'pipe',
  });
  let stderr = '';
  transport.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
    if (stderr.length > 200_000) stderr = stderr.slice(-100_000);
  });
  const client = new Client({ name: 'droid-mcp-e2e', version: '0.0.0' });
  await client.connect(transport);
  const { call, ok } = toolCaller(client);
  return {
    client,
    pid: transport.pid ?? -1,
    stderr: () => stderr,
    call,
    ok,
    close: () => client.close(),
  };
}

/** Runs the server expecting it to refuse to start; returns exit code and stderr. */
export function startExpectingRefusal(configPath: string, env: Record<string, string>): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [SERVER_ENTRY, '--config', configPath], { env, stdio: ['pipe', 'pipe', 'pipe'] });
    let stderr = '';
    let stdout = '';
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stderr: stderr + stdout });
    });
  });
}
