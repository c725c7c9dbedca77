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
  // Two buffers: the next chunk is read (on the thread pool) while this one is hashed and split.
  const chunks = [Buffer.allocUnsafe(READ_CHUNK_BYTES), Buffer.allocUnsafe(READ_CHUNK_BYTES)];
  let which = 0;
  let next: Promise<{ bytesRead: number }> | undefined = handle.read(chunks[0]!, 0, READ_CHUNK_BYTES, null);
  try {
    return await scan(handlers, () => {
      const current = next!;
      which ^= 1;
      next = undefined;
      return current.then((r) => {
        // Read ahead only while this read found something (sequentially: the file position is past it now).
        if (r.bytesRead > 0) next = handle.read(chunks[which]!, 0, READ_CHUNK_BYTES, null);
        return { bytesRead: r.bytesRead, data: chunks[which ^ 1]! };
      });
    });
  } finally {
    // A refusal can leave a read in flight; let it end before the caller closes the file.
    await (next as Promise<unknown> | undefined)?.catch(() => undefined);
  }
}

/** forEachLine over the chunks `read` hands out in order (0 bytes: the end). */
async function scan(handlers: LineHandlers, read: () => Promise<{ bytesRead: number; data: Buffer }>): Promise<LineScan> {
  /** Copies of the pieces of a line that spans chunks. */
  let carry: Buffer[] = [];
  let carryBytes = 0;
  let lineNumber = 0;
  let bytesTotal = 0;
  const limitOf = (n: number): number => (n === 1 && handlers.firstLineMaxBytes !== undefined ? handlers.firstLineMaxBytes : Infinity);
  const tooLong = (n: number): Error => handlers.refuse(n, `line ${n} is longer than ${limitOf(n)} bytes`);
  const maxLines = handlers.maxLines ?? Infinity;

  for (;;) {
    const { bytesRead, data: chunk } = await read();
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
