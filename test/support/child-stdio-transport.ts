/**
 * An MCP client transport over a child process this test spawned itself, so
 * the test keeps the child (its exit code, its stderr) without reaching into
 * the SDK's own stdio transport. Newline-delimited JSON-RPC, read and
 * written with the SDK's public stdio helpers.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { ReadBuffer, serializeMessage } from '@modelcontextprotocol/sdk/shared/stdio.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';

export class ChildStdioTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  readonly child: ChildProcess;
  /** Settles with the child's exit code (null: killed by a signal). */
  readonly exited: Promise<number | null>;
  readonly #buffer = new ReadBuffer();

  constructor(command: string, args: readonly string[], options: { env: NodeJS.ProcessEnv; cwd?: string }) {
    this.child = spawn(command, args, { env: options.env, stdio: ['pipe', 'pipe', 'pipe'], ...(options.cwd && { cwd: options.cwd }) });
    this.exited = new Promise((resolve) => this.child.once('exit', (code) => resolve(code)));
    void this.exited.then(() => this.onclose?.());
  }

  async start(): Promise<void> {
    this.child.on('error', (err) => this.onerror?.(err));
    this.child.stdout!.on('data', (chunk: Buffer) => {
      this.#buffer.append(chunk);
      this.#drain();
    });
  }

  async send(message: JSONRPCMessage): Promise<void> {
    if (this.child.stdin?.writable) this.child.stdin.write(serializeMessage(message));
  }

  /** Ends the child's stdin, as a client going away does; a child still there 10 s later is killed (no test leaves one behind). */
  async close(): Promise<void> {
    this.child.stdin?.end();
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 10_000).unref();
    void this.exited.then(() => clearTimeout(timer));
  }

  /** Every whole line received; a line that is no JSON-RPC message is reported and skipped (the buffer has consumed it). */
  #drain(): void {
    for (;;) {
      let message: JSONRPCMessage | null;
      try {
        message = this.#buffer.readMessage();
      } catch (err) {
        this.onerror?.(err instanceof Error ? err : new Error(String(err)));
        continue;
      }
      if (message === null) return;
      this.onmessage?.(message);
    }
  }
}
