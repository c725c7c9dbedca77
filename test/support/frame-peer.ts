// Raw stdio peer for tests that must see droid's frames exactly as sent,
// independent of the project's own wire client under src/droid.
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';

export type Frame = Record<string, unknown> & {
  type?: string;
  id?: unknown;
  method?: string;
  params?: Record<string, unknown>;
  result?: Record<string, unknown>;
  error?: { code: number; message: string };
};

export type FramePeer = {
  child: ChildProcessWithoutNullStreams;
  /** Every parsed stdout line, in order. */
  frames: Frame[];
  /** stdout lines that were not JSON. */
  junk: string[];
  stderr(): string;
  /** Writes one line; objects get jsonrpc/factoryApiVersion filled in unless given. */
  send(frame: Record<string, unknown> | string): void;
  /** Sends a request and resolves with its first response frame. */
  request(method: string, params: Record<string, unknown>, timeoutMs?: number): Promise<Frame>;
  /** Resolves with the first frame (from index `from`) matching `pred`. */
  waitFor(pred: (f: Frame) => boolean, timeoutMs?: number, from?: number): Promise<Frame>;
  /** Resolves when the process has exited and its stdio is drained. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
};

/** The session notification inside a frame, if it is one. */
export function notification(f: Frame): Record<string, unknown> | undefined {
  if (f.method !== 'droid.session_notification') return undefined;
  const n = f.params?.notification;
  return typeof n === 'object' && n !== null ? (n as Record<string, unknown>) : undefined;
}

export function spawnPeer(command: string, args: string[], opts: { env: Record<string, string>; cwd: string }): FramePeer {
  const child = spawn(command, args, { env: opts.env, cwd: opts.cwd, stdio: ['pipe', 'pipe', 'pipe'] });
  const frames: Frame[] = [];
  const junk: string[] = [];
  const waiters = new Set<() => void>();
  let err = '';
  let buf = '';
  let nextId = 0;
  child.stdin.on('error', () => undefined); // EPIPE after exit is expected in crash tests
  child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
  child.stdout.setEncoding('utf8').on('data', (d: string) => {
    buf += d;
    let nl: number;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      if (!line.trim()) continue;
      try {
        frames.push(JSON.parse(line) as Frame);
      } catch {
        junk.push(line);
      }
    }
    for (const w of waiters) w();
  });
  let closed = false;
  // 'close' (not 'exit'): stdout may still hold frames when 'exit' fires.
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('close', (code, signal) => {
      closed = true;
      resolve({ code, signal });
      for (const w of waiters) w();
    }),
  );

  const send = (frame: Record<string, unknown> | string) => {
    const line = typeof frame === 'string' ? frame : JSON.stringify({ jsonrpc: '2.0', factoryApiVersion: '1.0.0', ...frame });
    child.stdin.write(`${line}\n`);
  };

  const waitFor = (pred: (f: Frame) => boolean, timeoutMs = 20_000, from = 0) =>
    new Promise<Frame>((resolve, reject) => {
      const check = () => {
        const hit = frames.slice(from).find(pred);
        if (hit) {
          cleanup();
          resolve(hit);
        } else if (closed) {
          cleanup();
          reject(new Error(`process exited before the awaited frame; stderr: ${err.slice(-1000)}`));
        }
      };
      const timer = setTimeout(() => {
        cleanup();
        reject(new Error(`no matching frame within ${timeoutMs} ms; last frames: ${JSON.stringify(frames.slice(-5)).slice(0, 2000)}`));
      }, timeoutMs);
      const cleanup = () => {
        clearTimeout(timer);
        waiters.delete(check);
      };
      waiters.add(check);
      check();
    });

  const request = (method: string, params: Record<string, unknown>, timeoutMs?: number) => {
    const id = `t${++nextId}`;
    send({ type: 'request', id, method, params });
    return waitFor((f) => f.type === 'response' && f.id === id, timeoutMs);
  };

  return { child, frames, junk, stderr: () => err, send, request, waitFor, exited };
}
