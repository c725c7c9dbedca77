/**
 * Starts the built droid-mcp server as its own process and talks to it with
 * the real MCP SDK client over stdio, through the test bed's one driver
 * (src/testbed/mcp-driver.ts). Nothing of ours is mocked.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { McpDriver, SERVER_ENTRY, type ToolOutcome } from '../../src/testbed/mcp-driver.js';
import { warmPoolConfig } from './warm-pool.js';

export type { ToolOutcome };

export interface RunningServer {
  client: Client;
  pid: number;
  stderr: () => string;
  call(name: string, args?: Record<string, unknown>): Promise<ToolOutcome>;
  /** Structured content of a successful call; throws with the error otherwise. */
  ok<T = Record<string, unknown>>(name: string, args?: Record<string, unknown>): Promise<T>;
  close(): Promise<void>;
}

/** The driver as tests hold it: the server's pid and a bounded tail of its stderr. */
export function runningServer(mcp: McpDriver, pid: number, stderr: () => string, close = () => mcp.close()): RunningServer {
  return {
    client: mcp.client,
    pid,
    stderr,
    call: (name, args) => mcp.call(name, args),
    ok: <T>(name: string, args?: Record<string, unknown>) => mcp.ok<T>(name, args),
    close,
  };
}

/** Keeps the last ~100–200 kB of a stream, for failure messages. */
export function stderrTail(): { push(chunk: string): void; text(): string } {
  let kept = '';
  return {
    push(chunk) {
      kept += chunk;
      if (kept.length > 200_000) kept = kept.slice(-100_000);
    },
    text: () => kept,
  };
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
  const stderr = stderrTail();
  const mcp = await McpDriver.stdio(configPath, env, stderr.push);
  return runningServer(mcp, mcp.pid ?? -1, stderr.text);
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
