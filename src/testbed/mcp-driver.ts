/**
 * Drives a droid-mcp server the way an MCP client does, through the MCP SDK
 * client: the built server as its own process over stdio, or a running
 * instance over Streamable HTTP (server-process.ts starts one). The one
 * driver of the demo, the verification commands, bench/ and the tests;
 * nothing here is part of the server itself.
 */
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Progress } from '@modelcontextprotocol/sdk/types.js';
import type { PublicError } from '../shared/public-error.js';

/**
 * The built server entry (dist/src/cli.js): beside this module's own build
 * output, or under dist/ when this module runs from source (vitest).
 */
export const SERVER_ENTRY = fileURLToPath(new URL(import.meta.url.endsWith('.ts') ? '../../dist/src/cli.js' : '../cli.js', import.meta.url));

/** A tool call's result as it came back; a rejection's `structured` is its `{error: {...}}`. */
export interface ToolOutcome {
  isError: boolean;
  structured: Record<string, unknown>;
  text: string;
}

interface CallOptions {
  onprogress?: (progress: Progress) => void;
  timeoutMs?: number;
}

export class McpDriver {
  private constructor(
    readonly client: Client,
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

  async call(name: string, args: Record<string, unknown> = {}, options: CallOptions = {}): Promise<ToolOutcome> {
    const result = await this.client.callTool({ name, arguments: args }, undefined, {
      timeout: options.timeoutMs ?? 120_000,
      ...(options.onprogress && { onprogress: options.onprogress, resetTimeoutOnProgress: true }),
    });
    const content = (result.content as Array<{ type: string; text?: string }> | undefined) ?? [];
    const text = content.map((c) => c.text ?? '').join('');
    const isError = result.isError === true;
    // Rejections travel as {error: {...}} JSON text (src/mcp/server.ts).
    const structured = isError ? (JSON.parse(text) as Record<string, unknown>) : ((result.structuredContent as Record<string, unknown> | undefined) ?? {});
    return { isError, structured, text };
  }

  /** The structured result of a successful call; throws naming the rejection otherwise. */
  async ok<T = Record<string, unknown>>(name: string, args: Record<string, unknown> = {}, options: CallOptions = {}): Promise<T> {
    const outcome = await this.call(name, args, options);
    if (outcome.isError) {
      const error = outcome.structured.error as PublicError;
      throw new Error(`${name} failed: ${error.code}: ${error.message}`);
    }
    return outcome.structured as T;
  }

  /**
   * Waits (bounded) until no turn holds a run slot, so closing does not
   * interrupt anything, then closes. A stdio server exits when its stdin ends.
   */
  async closeWhenIdle(withinMs = 30_000): Promise<void> {
    const end = Date.now() + withinMs;
    try {
      while (Date.now() < end) {
        const ws = await this.ok<{ capacity: { active: number } }>('droid_list_workspaces');
        if (ws.capacity.active === 0) break;
        await sleep(100);
      }
    } catch {
      // Closing anyway.
    }
    await this.close();
  }

  close(): Promise<void> {
    return this.client.close();
  }
}
