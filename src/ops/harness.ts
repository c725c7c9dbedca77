/**
 * Drives a droid-mcp server the way an MCP client does: the built server as
 * its own process over stdio, or a running instance over Streamable HTTP,
 * through the MCP SDK client. Shared by the demo and the verification
 * scripts; nothing here is part of the server itself.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Progress } from '@modelcontextprotocol/sdk/types.js';
import type { PublicError } from '../shared/public-error.js';

/** The built server entry (dist/src/cli.js), beside this file's own build output. */
export const SERVER_ENTRY = fileURLToPath(new URL('../cli.js', import.meta.url));

export type ToolReply = { ok: true; value: Record<string, unknown> } | { ok: false; error: PublicError };

export class ToolError extends Error {
  constructor(
    readonly tool: string,
    readonly error: PublicError,
  ) {
    super(`${tool} failed: ${error.code}: ${error.message}`);
  }
}

export interface CallOptions {
  onprogress?: (progress: Progress) => void;
  timeoutMs?: number;
}

export class McpDriver {
  private constructor(
    private readonly client: Client,
    /** The server process when this driver started it (stdio). */
    readonly pid: number | null,
  ) {}

  /** Starts `node dist/src/cli.js --config FILE` with `env` and connects over stdio; its stderr goes to `onStderr`. */
  static async stdio(configPath: string, env: Record<string, string>, onStderr: (chunk: string) => void = () => {}): Promise<McpDriver> {
    const transport = new StdioClientTransport({ command: process.execPath, args: [SERVER_ENTRY, '--config', configPath], env, stderr: 'pipe' });
    transport.stderr?.on('data', (chunk: Buffer) => onStderr(chunk.toString('utf8')));
    const client = new Client({ name: 'droid-mcp-driver', version: '1.0.0' });
    await client.connect(transport);
    return new McpDriver(client, transport.pid ?? null);
  }

  /** Connects to a running instance's `/mcp` endpoint with its bearer token. */
  static async http(url: string, token: string): Promise<McpDriver> {
    const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { authorization: `Bearer ${token}` } } });
    const client = new Client({ name: 'droid-mcp-driver', version: '1.0.0' });
    await client.connect(transport);
    return new McpDriver(client, null);
  }

  async listTools(): Promise<string[]> {
    return (await this.client.listTools()).tools.map((t) => t.name);
  }

  async call(name: string, args: Record<string, unknown> = {}, options: CallOptions = {}): Promise<ToolReply> {
    const result = await this.client.callTool({ name, arguments: args }, undefined, {
      timeout: options.timeoutMs ?? 120_000,
      ...(options.onprogress && { onprogress: options.onprogress, resetTimeoutOnProgress: true }),
    });
    const content = (result.content as Array<{ type: string; text?: string }> | undefined) ?? [];
    const text = content.map((c) => c.text ?? '').join('');
    // Rejections travel as {error: {...}} JSON text (src/mcp/server.ts).
    if (result.isError === true) return { ok: false, error: (JSON.parse(text) as { error: PublicError }).error };
    return { ok: true, value: (result.structuredContent as Record<string, unknown> | undefined) ?? {} };
  }

  /** The structured result of a successful call; throws a ToolError otherwise. */
  async ok<T>(name: string, args: Record<string, unknown> = {}, options: CallOptions = {}): Promise<T> {
    const reply = await this.call(name, args, options);
    if (!reply.ok) throw new ToolError(name, reply.error);
    return reply.value as T;
  }

  /**
   * Waits (bounded) until no turn holds a run slot, so closing does not
   * interrupt anything, then closes. A stdio server exits when its stdin ends.
   */
  async close(idleWithinMs = 30_000): Promise<void> {
    const end = Date.now() + idleWithinMs;
    try {
      while (Date.now() < end) {
        const ws = await this.ok<{ capacity: { active: number } }>('droid_list_workspaces');
        if (ws.capacity.active === 0) break;
        await sleep(100);
      }
    } catch {
      // Closing anyway.
    }
    await this.client.close();
  }
}

/** Live (non-zombie) processes whose environment holds NAME=VALUE; empty where /proc does not exist. */
export function processesTagged(name: string, value: string): number[] {
  const want = `${name}=${value}`;
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return [];
  }
  const out: number[] = [];
  for (const entry of entries) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      if (!readFileSync(`/proc/${entry}/environ`, 'latin1').split('\0').includes(want)) continue;
      const stat = readFileSync(`/proc/${entry}/stat`, 'latin1');
      const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
      if (state !== 'Z' && state !== 'X') out.push(Number(entry));
    } catch {
      // gone, or not ours to read
    }
  }
  return out;
}

/** Polls until no process carries the tag; returns those still alive at the deadline. */
export async function waitUntilNoneTagged(name: string, value: string, withinMs: number): Promise<number[]> {
  const end = Date.now() + withinMs;
  for (;;) {
    const left = processesTagged(name, value);
    if (left.length === 0 || Date.now() >= end) return left;
    await sleep(50);
  }
}

/** `process.hrtime`-free elapsed seconds, for transcripts. */
export function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`;
}
