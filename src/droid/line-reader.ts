/**
 * Splits a byte stream into newline-delimited JSON values. Partial lines wait
 * for the rest; lines that are not JSON, or longer than the bound, become
 * named diagnostics, never exceptions.
 *
 * Cost is linear in the input: each chunk is searched for newlines once, and a
 * partial line is kept as a list of pieces joined only when its newline comes.
 * (Appending to one string and searching it from the start made one 16 MB line
 * cost seconds of CPU; see bench/line-reader.ts.)
 */
import { StringDecoder } from 'node:string_decoder';

/** Longest line accepted, in UTF-16 code units (characters), excluding the newline. */
export const MAX_LINE_CHARS = 16 * 1024 * 1024;
/** How much of a rejected line a diagnostic quotes. */
export const STRAY_HEAD_CHARS = 300;

const MERGE_BELOW_CHARS = 8192;

/** Why a line was not delivered as a value. */
export type StrayReason = 'not_json' | 'line_too_long';

export interface StrayLine {
  reason: StrayReason;
  /** The start of the line, at most STRAY_HEAD_CHARS characters. */
  head: string;
  /** For `line_too_long`: characters seen before the line was dropped (the line is at least this long). */
  length?: number;
}

export interface LineReaderEvents {
  value(value: unknown): void;
  stray(stray: StrayLine): void;
}

export interface LineReaderOptions {
  maxLineChars?: number;
}

export class LineReader {
  private readonly decoder = new StringDecoder('utf8');
  private readonly maxLineChars: number;
  /** Pieces of the current, unterminated line. */
  private pieces: string[] = [];
  private pendingChars = 0;
  /** Inside a line already reported too long: drop input up to the next newline. */
  private discarding = false;
  /**
   * Characters searched for a newline so far. Test seam: with linear
   * scanning this equals the characters pushed, however they were chunked.
   */
  scannedChars = 0;

  constructor(
    private readonly events: LineReaderEvents,
    options: LineReaderOptions = {},
  ) {
    this.maxLineChars = options.maxLineChars ?? MAX_LINE_CHARS;
  }

  push(chunk: Buffer | string): void {
    const text = typeof chunk === 'string' ? chunk : this.decoder.write(chunk);
    let start = 0;
    for (;;) {
      const newline = text.indexOf('\n', start);
      // Only the new text is ever searched: everything before `start` was seen.
      this.scannedChars += (newline < 0 ? text.length : newline + 1) - start;
      if (newline < 0) break;
      this.completeLine(text, start, newline);
      start = newline + 1;
    }
    if (start < text.length) this.keep(text.slice(start));
  }

  /** Flushes a final unterminated line when the stream ends. */
  end(): void {
    const rest = this.decoder.end();
    if (rest) this.push(rest);
    if (!this.discarding && this.pendingChars > 0) this.emitLine(this.takePending());
    this.reset();
  }

  /** The line ends at text[newline]; its start may be in earlier pieces. */
  private completeLine(text: string, start: number, newline: number): void {
    if (this.discarding) {
      this.reset();
      return;
    }
    if (this.pendingChars + (newline - start) > this.maxLineChars) {
      this.tooLong(text.slice(start, Math.min(newline, start + STRAY_HEAD_CHARS)), this.pendingChars + newline - start);
      this.reset();
      return;
    }
    const line = this.pieces.length > 0 ? this.takePending() + text.slice(start, newline) : text.slice(start, newline);
    this.reset();
    this.emitLine(line);
  }

  /** Holds the unterminated end of a chunk, or drops it once the line is over the bound. */
  private keep(piece: string): void {
    if (this.discarding) return;
    if (this.pendingChars + piece.length > this.maxLineChars) {
      // An endless line would grow memory without bound: drop it, say so once.
      this.tooLong(piece, this.pendingChars + piece.length);
      this.pieces = [];
      this.pendingChars = 0;
      this.discarding = true;
      return;
    }
    // Tiny chunks are merged so a line in one-byte reads is not millions of pieces.
    const lastIndex = this.pieces.length - 1;
    if (lastIndex >= 0 && this.pieces[lastIndex]!.length < MERGE_BELOW_CHARS) this.pieces[lastIndex] += piece;
    else this.pieces.push(piece);
    this.pendingChars += piece.length;
  }

  private takePending(): string {
    return this.pieces.length === 1 ? this.pieces[0]! : this.pieces.join('');
  }

  private reset(): void {
    this.pieces = [];
    this.pendingChars = 0;
    this.discarding = false;
  }

  /** Reports the current line (held pieces, then `last`) as too long. */
  private tooLong(last: string, length: number): void {
    let head = '';
    for (let i = 0; i <= this.pieces.length && head.length < STRAY_HEAD_CHARS; i++) {
      head += (i < this.pieces.length ? this.pieces[i]! : last).slice(0, STRAY_HEAD_CHARS - head.length);
    }
    this.events.stray({ reason: 'line_too_long', head, length });
  }

  private emitLine(raw: string): void {
    const line = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
    if (line.trim() === '') return;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      this.events.stray({ reason: 'not_json', head: line.slice(0, STRAY_HEAD_CHARS) });
      return;
    }
    this.events.value(value);
  }
}
