/**
 * Starts the built droid-mcp server with `transport: "http"` as its own
 * process and talks to it with the MCP SDK's Streamable HTTP client, the
 * way a remote agent behind the proxy would, through the test bed's driver
 * and server process helpers (src/testbed/). Nothing of ours is mocked.
 */
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { McpDriver } from '../../src/testbed/mcp-driver.js';
import { freePort, readyPort, spawnServer, stopServer } from '../../src/testbed/server-process.js';
import { privateDir, runningServer, stderrTail, type RunningServer } from './mcp-server.js';

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

/** Stops the process (SIGTERM, SIGKILL after 20 s) and waits for it to exit. */
async function stopProcess(child: ChildProcess): Promise<void> {
  if (await stopServer(child, 20_000)) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGKILL');
  await exited;
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
    // The config refuses port 0 (the listener itself accepts it, see the unit
    // tests), so the server gets a real one; retried if another process takes it first.
    const configPath = configFor({ transport: 'http', port: await freePort(), tokenFile, ...extra });
    const stderr = stderrTail();
    const child = spawnServer(configPath, env, stderr.push);
    let port: number;
    try {
      port = await readyPort(child, 30_000);
    } catch (err) {
      await stopProcess(child);
      if (attempt < 3 && stderr.text().includes('already in use')) continue;
      remove();
      throw new Error(`droid-mcp ${err instanceof Error ? err.message : String(err)}:\n${stderr.text()}`);
    }
    try {
      return await connectClient(child, port, token, stderr.text, remove);
    } catch (err) {
      await stopProcess(child);
      remove();
      throw err;
    }
  }
}

async function connectClient(child: ChildProcess, port: number, token: string, stderr: () => string, removeToken: () => void): Promise<RunningHttpServer> {
  const url = `http://127.0.0.1:${port}/mcp`;
  const mcp = await McpDriver.http(url, token);
  const stop = async () => {
    await mcp.close();
    await stopProcess(child);
    removeToken();
  };
  return { ...runningServer(mcp, child.pid ?? -1, stderr, stop), port, url, token, stop };
}
