/**
 * Reads a request body under a byte cap and a deadline. A declared length
 * over the cap is refused before anything is read; a streamed body is
 * counted and abandoned the moment it passes the cap or the deadline.
 */
import type { IncomingMessage } from 'node:http';

export type BodyResult =
  | { kind: 'ok'; body: Buffer }
  | { kind: 'too_large' }
  | { kind: 'timeout' }
  /** The client went away or the stream failed; there is nobody to answer. */
  | { kind: 'aborted' };

export interface BodyLimits {
  maxBytes: number;
  deadlineMs: number;
}

/** True when the declared Content-Length alone is over the cap. */
export function declaredTooLarge(req: IncomingMessage, maxBytes: number): boolean {
  const declared = req.headers['content-length'];
  // Node's parser has already refused malformed or conflicting lengths.
  return declared !== undefined && Number(declared) > maxBytes;
}

export function readBody(req: IncomingMessage, limits: BodyLimits): Promise<BodyResult> {
  if (declaredTooLarge(req, limits.maxBytes)) return Promise.resolve({ kind: 'too_large' });
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const finish = (result: BodyResult) => {
      clearTimeout(timer);
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onAbort);
      req.off('close', onAbort);
      // Stop pulling bytes off the socket; the caller closes the connection.
      if (result.kind !== 'ok') req.pause();
      resolve(result);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limits.maxBytes) finish({ kind: 'too_large' });
      else chunks.push(chunk);
    };
    const onEnd = () => finish({ kind: 'ok', body: Buffer.concat(chunks, size) });
    const onAbort = () => finish({ kind: 'aborted' });
    const timer = setTimeout(() => finish({ kind: 'timeout' }), limits.deadlineMs);
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onAbort);
    req.on('close', onAbort);
  });
}
