/**
 * An HTTP/1.1 client that costs as little as a client can, for the rows
 * that measure the server alone (http-status.ts, no goal): one
 * keep-alive TCP socket per lane, the request bytes built once, one request
 * in flight per socket, and an answer read by its status line and
 * Content-Length alone. node:http's client parses and builds objects per
 * call (0.35-0.5 ms of CPU per call here), which on a 2-core host takes CPU
 * from the server it is meant to measure.
 *
 * It understands exactly the answers droid-mcp sends (Content-Length, no
 * chunked encoding) and fails loudly on anything else.
 */
import { connect, type Socket } from 'node:net';

const HEADER_END = Buffer.from('\r\n\r\n');

export interface RawHttpLane {
  /** Sends the prebuilt request and resolves with the answer's status and body. */
  call(): Promise<{ status: number; body: string }>;
  close(): void;
}

/** The request bytes of one POST, built once per lane. */
export function postBytes(port: number, path: string, headers: Record<string, string>, body: string): Buffer {
  const head = [`POST ${path} HTTP/1.1`, `Host: 127.0.0.1:${port}`, `Content-Length: ${Buffer.byteLength(body)}`];
  for (const [name, value] of Object.entries(headers)) head.push(`${name}: ${value}`);
  return Buffer.concat([Buffer.from(`${head.join('\r\n')}\r\n\r\n`), Buffer.from(body)]);
}

export function rawHttpLane(port: number, request: Buffer): Promise<RawHttpLane> {
  return new Promise((resolve, reject) => {
    const socket: Socket = connect({ host: '127.0.0.1', port, noDelay: true });
    let pending: { resolve(a: { status: number; body: string }): void; reject(e: Error): void } | undefined;
    let buffered: Buffer = Buffer.alloc(0);
    const fail = (err: Error) => {
      const p = pending;
      pending = undefined;
      p?.reject(err);
    };
    socket.on('data', (chunk: Buffer) => {
      buffered = buffered.length === 0 ? chunk : Buffer.concat([buffered, chunk]);
      const end = buffered.indexOf(HEADER_END);
      if (end < 0) return;
      const head = buffered.subarray(0, end).toString('latin1');
      const length = /\r\ncontent-length: *(\d+)/i.exec(head);
      if (!length) return fail(new Error(`an answer without Content-Length: ${head.slice(0, 200)}`));
      const total = end + 4 + Number(length[1]);
      if (buffered.length < total) return;
      const body = buffered.subarray(end + 4, total).toString('utf8');
      buffered = buffered.subarray(total);
      const p = pending;
      pending = undefined;
      p?.resolve({ status: Number(head.slice(9, 12)), body });
    });
    socket.on('error', (err) => fail(err));
    socket.on('close', () => fail(new Error('the server closed the connection')));
    socket.once('connect', () =>
      resolve({
        call: () =>
          new Promise((res, rej) => {
            if (pending) return rej(new Error('one request at a time per lane'));
            pending = { resolve: res, reject: rej };
            socket.write(request);
          }),
        close: () => socket.destroy(),
      }),
    );
    socket.once('error', reject);
  });
}
