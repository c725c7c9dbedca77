/**
 * One JSON-RPC conversation with a droid process over its stdio. Knows frames,
 * ids, pending calls and server requests; knows nothing about turns or policy.
 */
import type { Readable, Writable } from 'node:stream';
import { DroidError, DroidRpcError, type RpcErrorBody } from './errors.js';
import { classifyFrame, errorFrame, requestFrame, resultFrame, type Frame, type NotificationFrame } from './frames.js';
import { LineReader, MAX_LINE_CHARS } from './line-reader.js';
import { head } from '../util/text.js';

/** How we answer droid's own requests (permissions, AskUser, …). */
export type ServerRequestHandler = (method: string, params: unknown) => Promise<ServerRequestAnswer> | ServerRequestAnswer;

export type ServerRequestAnswer = { result: unknown } | { error: RpcErrorBody };

export interface Diagnostic {
  /** `stray_line`: not JSON; `line_too_long`: over MAX_LINE_CHARS, dropped up to its newline. */
  kind: 'stray_line' | 'line_too_long' | 'invalid_frame' | 'protocol_error' | 'unmatched_response';
  detail: string;
  at: number;
}

export interface ConnectionOptions {
  input: Readable;
  output: Writable;
  defaultTimeoutMs?: number;
  /** Diagnostics kept for the turn result; older ones are dropped. */
  maxDiagnostics?: number;
  /** Longest frame line accepted (default MAX_LINE_CHARS); longer ones are dropped with a `line_too_long` diagnostic. */
  maxLineChars?: number;
}

interface Pending {
  method: string;
  resolve(value: unknown): void;
  reject(err: Error): void;
  timer: NodeJS.Timeout;
}

const METHOD_NOT_FOUND = -32601;

export class DroidConnection {
  readonly diagnostics: Diagnostic[] = [];
  private readonly pending = new Map<string, Pending>();
  private readonly notificationListeners = new Set<(n: NotificationFrame) => void>();
  private readonly diagnosticListeners = new Set<(d: Diagnostic) => void>();
  private serverRequestHandler: ServerRequestHandler | undefined;
  private nextId = 1;
  private closedWith: Error | undefined;
  private readonly reader: LineReader;
  private readonly defaultTimeoutMs: number;
  private readonly maxDiagnostics: number;

  constructor(private readonly options: ConnectionOptions) {
    this.defaultTimeoutMs = options.defaultTimeoutMs ?? 30_000;
    this.maxDiagnostics = options.maxDiagnostics ?? 50;
    const maxLineChars = options.maxLineChars ?? MAX_LINE_CHARS;
    this.reader = new LineReader(
      {
        value: (value) => this.onValue(value),
        stray: (stray) =>
          stray.reason === 'line_too_long'
            ? this.diagnose('line_too_long', `line of at least ${stray.length} characters dropped (limit ${maxLineChars}): ${stray.head}`)
            : this.diagnose('stray_line', `not JSON: ${stray.head}`),
      },
      { maxLineChars },
    );
    options.input.on('data', (chunk: Buffer) => this.reader.push(chunk));
    options.input.on('end', () => this.reader.end());
    // A write to a dead pipe must surface through `close`, not crash the worker.
    options.output.on('error', (err) => this.close(new DroidError('droid_exited', `droid stdin closed: ${err.message}`)));
  }

  get closed(): Error | undefined {
    return this.closedWith;
  }

  onNotification(listener: (n: NotificationFrame) => void): () => void {
    this.notificationListeners.add(listener);
    return () => this.notificationListeners.delete(listener);
  }

  onDiagnostic(listener: (d: Diagnostic) => void): () => void {
    this.diagnosticListeners.add(listener);
    return () => this.diagnosticListeners.delete(listener);
  }

  setServerRequestHandler(handler: ServerRequestHandler): void {
    this.serverRequestHandler = handler;
  }

  request<T = unknown>(method: string, params: unknown = {}, timeoutMs = this.defaultTimeoutMs): Promise<T> {
    if (this.closedWith) return Promise.reject(this.closedWith);
    const id = `c${this.nextId++}`;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new DroidError('droid_request_timeout', `droid did not answer ${method} within ${timeoutMs} ms`, true));
      }, timeoutMs);
      this.pending.set(id, { method, resolve: resolve as (v: unknown) => void, reject, timer });
      this.send(requestFrame(id, method, params));
    });
  }

  /** Rejects every outstanding call with `reason`; later calls fail at once. */
  close(reason: Error): void {
    if (this.closedWith) return;
    this.closedWith = reason;
    for (const [id, call] of this.pending) {
      clearTimeout(call.timer);
      this.pending.delete(id);
      call.reject(reason);
    }
  }

  private send(frame: Frame): void {
    if (this.closedWith) return;
    this.options.output.write(JSON.stringify(frame) + '\n');
  }

  private diagnose(kind: Diagnostic['kind'], detail: string): void {
    const diagnostic = { kind, detail, at: Date.now() };
    this.diagnostics.push(diagnostic);
    if (this.diagnostics.length > this.maxDiagnostics) this.diagnostics.shift();
    for (const listener of this.diagnosticListeners) listener(diagnostic);
  }

  private onValue(value: unknown): void {
    const frame = classifyFrame(value);
    if ('invalid' in frame) {
      this.diagnose('invalid_frame', `${frame.invalid}: ${head(JSON.stringify(value), 300)}`);
      return;
    }
    switch (frame.type) {
      case 'response':
        return this.onResponse(frame.id, frame.result, frame.error);
      case 'notification':
        for (const listener of this.notificationListeners) listener(frame);
        return;
      case 'request':
        void this.answerServerRequest(frame.id, frame.method, frame.params);
        return;
    }
  }

  private onResponse(id: string | null, result: unknown, error: RpcErrorBody | undefined): void {
    if (id === null) {
      // droid could not parse one of our frames; it cannot say which one.
      this.diagnose('protocol_error', `droid reported ${error?.code ?? '?'} ${error?.message ?? 'unknown error'} for an unidentifiable frame`);
      return;
    }
    const call = this.pending.get(id);
    if (!call) {
      this.diagnose('unmatched_response', `response for unknown id ${head(id, 80)}`);
      return;
    }
    this.pending.delete(id);
    clearTimeout(call.timer);
    if (error) call.reject(new DroidRpcError(call.method, error));
    else call.resolve(result);
  }

  private async answerServerRequest(id: string, method: string, params: unknown): Promise<void> {
    let answer: ServerRequestAnswer;
    try {
      answer = this.serverRequestHandler
        ? await this.serverRequestHandler(method, params)
        : { error: { code: METHOD_NOT_FOUND, message: `Unknown method: ${method}` } };
    } catch (err) {
      // Never leave droid waiting: a failing policy is an error answer.
      answer = { error: { code: -32603, message: err instanceof Error ? err.message : String(err) } };
    }
    this.send('result' in answer ? resultFrame(id, answer.result) : errorFrame(id, answer.error));
  }
}

export const UNKNOWN_METHOD = (method: string): ServerRequestAnswer => ({
  error: { code: METHOD_NOT_FOUND, message: `Unknown method: ${method}` },
});
