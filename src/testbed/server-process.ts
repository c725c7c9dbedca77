/**
 * The built server as its own process for HTTP: a free port for its config,
 * start it, learn its bound port from the JSON "ready" line it logs on
 * stderr, stop it. (Over stdio, McpDriver.stdio starts it.)
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { SERVER_ENTRY } from './mcp-driver.js';

/** A port that was free a moment ago; a caller that loses it to another process retries. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address();
      probe.close(() => resolve(typeof address === 'object' && address !== null ? address.port : 0));
    });
  });
}

/** `node dist/src/cli.js --config FILE` with `env`; every stderr chunk goes to `onStderr`, which also keeps the pipe drained. */
export function spawnServer(configPath: string, env: Record<string, string>, onStderr: (chunk: string) => void = () => {}): ChildProcess {
  const child = spawn(process.execPath, [SERVER_ENTRY, '--config', configPath], { env, stdio: ['ignore', 'ignore', 'pipe'] });
  child.stderr?.setEncoding('utf8');
  child.stderr?.on('data', onStderr);
  return child;
}

/** Resolves with the port of the "droid-mcp ready" line; rejects when the process exits first or the time is up. */
export function readyPort(child: ChildProcess, timeoutMs = 30_000): Promise<number> {
  return new Promise((resolve, reject) => {
    let partial = '';
    const timer = setTimeout(() => finish(new Error(`not ready within ${timeoutMs / 1000} s`)), timeoutMs);
    const onData = (chunk: string) => {
      const lines = (partial + chunk).split('\n');
      partial = lines.pop()!;
      for (const line of lines) {
        try {
          const parsed = JSON.parse(line) as { msg?: string; port?: number };
          if (parsed.msg === 'droid-mcp ready' && typeof parsed.port === 'number') return finish(null, parsed.port);
        } catch {
          // not a JSON line
        }
      }
    };
    const onExit = (code: number | null) => finish(new Error(`the server exited (${code}) before it was ready`));
    const finish = (err: Error | null, port?: number) => {
      clearTimeout(timer);
      child.stderr?.off('data', onData);
      child.off('exit', onExit);
      if (err) reject(err);
      else resolve(port!);
    };
    child.stderr?.on('data', onData);
    child.once('exit', onExit);
  });
}

/** SIGTERM, then waits up to `graceMs` for the exit; true when it has exited. */
export async function stopServer(child: ChildProcess, graceMs: number): Promise<boolean> {
  if (child.exitCode !== null || child.signalCode !== null) return true;
  const exited = new Promise<true>((resolve) => child.once('exit', () => resolve(true)));
  child.kill('SIGTERM');
  return Promise.race([exited, new Promise<false>((resolve) => setTimeout(() => resolve(false), graceMs).unref())]);
}
