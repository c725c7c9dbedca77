/**
 * Starts the built droid-mcp server with `transport: "http"` as its own
 * process and talks to it with the MCP SDK's Streamable HTTP client, the
 * way a remote agent behind the proxy would. Nothing of ours is mocked.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { privateDir, SERVER_ENTRY, toolCaller, type RunningServer } from './mcp-server.js';

export interface RunningHttpServer extends RunningServer {
  port: number;
  url: string;
  token: string;
  /** Stops the process (SIGTERM) and waits for it to exit. */
  stop(): Promise<void>;
}

/** A private token file made the documented way (umask 077, 32 random bytes). */
export function writeTokenFile(token = randomBytes(32).toString('base64url'), mode = 0o600): { path: string; token: string; remove(): void } {
  const dir = privateDir('droid-mcp-token-');
  const path = join(dir, 'token');
  writeFileSync(path, `${token}\n`, { mode });
  return { path, token, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/**
 * A port that was free a moment ago. The config refuses port 0 (the listener
 * itself accepts it, see the unit tests), so the e2e server gets a real one;
 * startHttpServer retries if another process takes it first.
 */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      probe.close(() => resolve(port));
    });
  });
}

interface ReadyLine {
  msg?: string;
  transport?: string;
  port?: number;
}

/** Resolves with the bound port from the JSON "ready" line on stderr, or rejects with stderr when the process exits first. */
function waitUntilReady(child: ChildProcess, stderr: () => string, timeoutMs: number): Promise<number> {
  return new Promise((resolve, reject) => {
    let scanned = 0;
    const onData = () => {
      const text = stderr();
      const lines = text.slice(scanned).split('\n');
      const complete = lines.slice(0, -1);
      scanned += complete.reduce((n, l) => n + l.length + 1, 0);
      for (const line of complete) {
        let parsed: ReadyLine;
        try {
          parsed = JSON.parse(line) as ReadyLine;
        } catch {
          continue;
        }
        if (parsed.msg === 'droid-mcp ready' && parsed.transport === 'http' && typeof parsed.port === 'number') {
          done();
          resolve(parsed.port);
          return;
        }
      }
    };
    const onExit = (code: number | null) => {
      done();
      reject(new Error(`droid-mcp exited (${code}) before it was ready:\n${stderr()}`));
    };
    const timer = setTimeout(() => {
      done();
      reject(new Error(`droid-mcp was not ready within ${timeoutMs} ms:\n${stderr()}`));
    }, timeoutMs);
    const done = () => {
      clearTimeout(timer);
      child.stderr?.off('data', onData);
      child.off('exit', onExit);
    };
    child.stderr?.on('data', onData);
    child.once('exit', onExit);
  });
}

function stopProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const kill = setTimeout(() => child.kill('SIGKILL'), 20_000);
    child.once('exit', () => {
      clearTimeout(kill);
      resolve();
    });
    child.kill('SIGTERM');
  });
}

/**
 * `configFor` writes a config with the given extra keys (e.g. E2EContext.config);
 * transport, port and tokenFile are filled in here.
 */
export async function startHttpServer(
  configFor: (extra: Record<string, unknown>) => string,
  env: Record<string, string>,
  extra: Record<string, unknown> = {},
): Promise<RunningHttpServer> {
  const { path: tokenFile, token, remove } = writeTokenFile();
  for (let attempt = 1; ; attempt++) {
    const configPath = configFor({ transport: 'http', port: await freePort(), tokenFile, ...extra });
    const child = spawn(process.execPath, [SERVER_ENTRY, '--config', configPath], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
      if (stderr.length > 200_000) stderr = stderr.slice(-100_000);
    });
    let port: number;
    try {
      port = await waitUntilReady(child, () => stderr, 30_000);
    } catch (err) {
      await stopProcess(child);
      if (attempt < 3 && stderr.includes('already in use')) continue;
      remove();
      throw err;
    }
    try {
      return await connectClient(child, port, token, () => stderr, remove);
    } catch (err) {
      await stopProcess(child);
      remove();
      throw err;
    }
  }
}

async function connectClient(
  child: ChildProcess,
  port: number,
  token: string,
  stderr: () => string,
  removeToken: () => void,
): Promise<RunningHttpServer> {
  const url = `http://127.0.0.1:${port}/mcp`;
  const client = new Client({ name: 'droid-mcp-e2e-http', version: '0.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
  const { call, ok } = toolCaller(client);
  const stop = async () => {
    await client.close();
    await stopProcess(child);
    removeToken();
  };
  return {
    client,
    pid: child.pid ?? -1,
    port,
    url,
    token,
    stderr,
    call,
    ok,
    close: stop,
    stop,
  };
}
