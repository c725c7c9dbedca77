/**
 * Reads a file line by line in fixed-size chunks, so a large state file is
 * never held in memory as one string: only the current chunk and the line
 * being handed out exist at a time. Lines are split on the "\n" byte, which
 * never occurs inside a multi-byte UTF-8 sequence.
 */
import { isUtf8 } from 'node:buffer';
import type { Hash } from 'node:crypto';
import type { FileHandle } from 'node:fs/promises';

const READ_CHUNK_BYTES = 1 << 20;
const NEWLINE = 0x0a;

export interface LineScan {
  /** Complete (newline-terminated) lines handed to `onLine`. */
  lines: number;
  /** Bytes follow the last newline: the file ends in a partial line, which was not handed out. */
  partial: boolean;
  /** Bytes read up to and including the last newline: where a partial last line starts. */
  completeBytes: number;
  /** Bytes read in all. */
  totalBytes: number;
}

export interface LineHandlers {
  /**
   * Called for each complete line (without its newline), numbered from 1,
   * with the byte offset where it starts and its length in bytes; may throw to stop.
   */
  onLine(line: string, lineNumber: number, offset: number, bytes: number): void;
  /** The error to throw for a line that is not UTF-8 or is longer than allowed. */
  refuse(lineNumber: number, problem: string): Error;
  /** Longest acceptable first line in bytes (a header); unlimited if absent. */
  firstLineMaxBytes?: number;
  /** Updated with every byte read. */
  hash?: Hash;
  /**
   * Lines handed out; after that many the rest of the file is only read
   * (and hashed), not split, and `lines` counts no further.
   */
  maxLines?: number;
}

/** Reads `handle` from its current position to the end. */
export async function forEachLine(handle: FileHandle, handlers: LineHandlers): Promise<LineScan> {
  const chunk = Buffer.allocUnsafe(READ_CHUNK_BYTES);
  /** Copies of the pieces of a line that spans chunks. */
  let carry: Buffer[] = [];
  let carryBytes = 0;
  let lineNumber = 0;
  let bytesTotal = 0;
  const limitOf = (n: number): number => (n === 1 && handlers.firstLineMaxBytes !== undefined ? handlers.firstLineMaxBytes : Infinity);
  const tooLong = (n: number): Error => handlers.refuse(n, `line ${n} is longer than ${limitOf(n)} bytes`);
  const maxLines = handlers.maxLines ?? Infinity;

  for (;;) {
    const { bytesRead } = await handle.read(chunk, 0, READ_CHUNK_BYTES, null);
    if (bytesRead === 0) break;
    const data = chunk.subarray(0, bytesRead);
    handlers.hash?.update(data);
    const chunkAt = bytesTotal;
    bytesTotal += bytesRead;
    if (lineNumber >= maxLines) continue;
    let start = 0;
    for (let newline = data.indexOf(NEWLINE, start); newline !== -1; newline = data.indexOf(NEWLINE, start)) {
      const n = lineNumber + 1;
      const lineAt = chunkAt + start - carryBytes;
      let bytes = data.subarray(start, newline);
      if (carryBytes > 0) {
        bytes = Buffer.concat([...carry, bytes], carryBytes + bytes.length);
        carry = [];
        carryBytes = 0;
      }
      start = newline + 1;
      if (bytes.length > limitOf(n)) throw tooLong(n);
      if (!isUtf8(bytes)) throw handlers.refuse(n, `line ${n} is not valid UTF-8`);
      lineNumber = n;
      handlers.onLine(bytes.toString('utf8'), n, lineAt, bytes.length);
      if (lineNumber >= maxLines) break;
    }
    if (lineNumber >= maxLines) {
      carry = [];
      carryBytes = 0;
    } else if (start < data.length) {
      // The chunk buffer is reused by the next read: keep a copy.
      carry.push(Buffer.from(data.subarray(start)));
      carryBytes += data.length - start;
      if (carryBytes > limitOf(lineNumber + 1)) throw tooLong(lineNumber + 1);
    }
  }
  return { lines: lineNumber, partial: carryBytes > 0, completeBytes: bytesTotal - carryBytes, totalBytes: bytesTotal };
}
