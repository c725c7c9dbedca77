/**
 * Splits a byte stream into newline-delimited JSON values. Partial lines wait
 * for the rest; lines that are not JSON become diagnostics, never exceptions.
 */
import { StringDecoder } from 'node:string_decoder';

export const MAX_LINE_CHARS = 16 * 1024 * 1024;

export interface LineReaderEvents {
  value(value: unknown): void;
  stray(line: string, reason: string): void;
}

export class LineReader {
  private readonly decoder = new StringDecoder('utf8');
  private buffer = '';
  private discarding = false;

  constructor(private readonly events: LineReaderEvents) {}

  push(chunk: Buffer | string): void {
    this.buffer += typeof chunk === 'string' ? chunk : this.decoder.write(chunk);
    let newline: number;
    while ((newline = this.buffer.indexOf('\n')) >= 0) {
      const line = this.buffer.slice(0, newline);
      this.buffer = this.buffer.slice(newline + 1);
      if (this.discarding) {
        this.discarding = false;
        continue;
      }
      this.emitLine(line);
    }
    // An endless line would grow memory without bound: drop it, say so once.
    if (this.buffer.length > MAX_LINE_CHARS) {
      this.events.stray(this.buffer.slice(0, 200), `line longer than ${MAX_LINE_CHARS} characters dropped`);
      this.buffer = '';
      this.discarding = true;
    }
  }

  /** Flushes a final unterminated line when the stream ends. */
  end(): void {
    this.buffer += this.decoder.end();
    if (this.buffer.length > 0 && !this.discarding) this.emitLine(this.buffer);
    this.buffer = '';
  }

  private emitLine(raw: string): void {
    const line = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
    if (line.trim() === '') return;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      this.events.stray(line, 'not JSON');
      return;
    }
    this.events.value(value);
  }
}
