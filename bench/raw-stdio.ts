/**
 * A stdio MCP client that costs as little as a client can (issue 19: "raw
 * clients"): the server spawned with pipes, one initialize, then JSON-RPC
 * lines written as they are and each answer matched to its request by id.
 * No schema checks, no output validation: what the benches measure is the
 * server, not the SDK client (whose own round trip here is a p99 of 3-4 ms).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { stopServer } from '../src/testbed/server-process.js';

export interface RawAnswer {
  id?: number;
  result?: { isError?: boolean; structuredContent?: unknown };
  error?: unknown;
}

export interface RawStdioClient {
  readonly pid: number;
  /** Sends one request; resolves with its answer (result or error), as parsed JSON. */
  request(method: string, params: unknown): Promise<RawAnswer>;
  close(): Promise<void>;
}

/**
 * Spawns `node entry ...args`, initializes it, and sends `initialized`; with
 * `readyLine`, resolves only once the server's stderr has printed it (droid-mcp
 * answers initialize before its state is open: "droid-mcp ready" says it is).
 */
export async function openRawStdio(entry: string, args: readonly string[], env: Record<string, string>, readyLine?: string): Promise<RawStdioClient> {
  const child: ChildProcess = spawn(process.execPath, [entry, ...args], { env, stdio: ['pipe', 'pipe', readyLine === undefined ? 'ignore' : 'pipe'] });
  const ready = readyLine === undefined ? Promise.resolve() : untilPrinted(child, readyLine);
  const waiting = new Map<number, { resolve(a: RawAnswer): void; reject(err: Error): void }>();
  let buffered = '';
  child.stdout!.setEncoding('utf8');
  child.stdout!.on('data', (chunk: string) => {
    buffered += chunk;
    for (let nl = buffered.indexOf('\n'); nl !== -1; nl = buffered.indexOf('\n')) {
      const line = buffered.slice(0, nl);
      buffered = buffered.slice(nl + 1);
      const answer = JSON.parse(line) as RawAnswer;
      const waiter = answer.id === undefined ? undefined : waiting.get(answer.id);
      if (!waiter) continue;
      waiting.delete(answer.id!);
      waiter.resolve(answer);
    }
  });
  child.once('exit', (code, signal) => {
    for (const w of waiting.values()) w.reject(new Error(`the server exited (${code ?? signal})`));
    waiting.clear();
  });
  let next = 0;
  const request = (method: string, params: unknown) =>
    new Promise<RawAnswer>((resolve, reject) => {
      const id = ++next;
      waiting.set(id, { resolve, reject });
      child.stdin!.write(`${JSON.stringify({ jsonrpc: '2.0', id, method, params })}\n`);
    });
  await request('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'bench-raw', version: '0' } });
  child.stdin!.write(`${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' })}\n`);
  await ready;
  return { pid: child.pid!, request, close: async () => void (await stopServer(child, 30_000)) };
}

/** A tools/call whose answer is a result without isError, or the error thrown. */
export async function rawToolCall(client: RawStdioClient, name: string, args: Record<string, unknown>): Promise<RawAnswer> {
  const answer = await client.request('tools/call', { name, arguments: args });
  if (answer.result === undefined || answer.result.isError !== undefined) throw new Error(`${name} failed: ${JSON.stringify(answer).slice(0, 300)}`);
  return answer;
}

function untilPrinted(child: ChildProcess, line: string): Promise<void> {
  return new Promise((resolve, reject) => {
    let tail = '';
    let printed = false;
    child.stderr!.setEncoding('utf8');
    child.stderr!.on('data', (chunk: string) => {
      // Keep reading (and dropping) stderr after the line, so the pipe never fills.
      if (printed) return;
      tail = (tail + chunk).slice(-(line.length + 4096));
      if (tail.includes(line)) {
        printed = true;
        resolve();
      }
    });
    child.once('exit', (code, signal) => reject(new Error(`the server exited (${code ?? signal}) before printing ${line}`)));
  });
}
