/**
 * Shared set-up for end-to-end tests: a real droid home with the scripted
 * model, private approved roots and state, and the built server.
 */
import { mkdirSync, realpathSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { makeDroidBed, type DroidBed } from './droid-home.js';
import { privateDir, startServer, writeConfig, type RunningServer } from './mcp-server.js';
import { aheadPids, pidsWithEnvTag, waitForNoProcesses } from './processes.js';
import { readFileSync } from 'node:fs';
import { afterAll, afterEach, beforeAll } from 'vitest';

export interface E2EContext {
  bed: DroidBed;
  root: string;
  stateDir: string;
  tag: string;
  env: Record<string, string>;
  config(extra?: Record<string, unknown>): string;
  start(extra?: Record<string, unknown>): Promise<RunningServer>;
  workspace(name: string): string;
  cleanup(): Promise<void>;
}

export async function makeContext(tag: string): Promise<E2EContext> {
  const bed = await makeDroidBed();
  const base = privateDir('droid-mcp-e2e-');
  const root = realpathSync(base);
  const approved = join(root, 'approved');
  mkdirSync(approved, { recursive: true });
  const stateDir = join(root, 'state');
  const configDir = join(root, 'config');
  mkdirSync(configDir, { mode: 0o700 });
  const env = { ...bed.home.env, DROID_MCP_TEST_TAG: tag, DROID_MCP_LOG_LEVEL: 'info' };
  const config = (extra: Record<string, unknown> = {}) =>
    writeConfig(configDir, {
      approvedDirectories: [approved],
      stateDirectory: stateDir,
      droidPath: bed.droidPath,
      defaultModel: bed.modelId,
      ...extra,
    });
  return {
    bed,
    root: approved,
    stateDir,
    tag,
    env,
    config,
    start: (extra) => startServer(config(extra), env),
    workspace(name: string) {
      const dir = join(approved, name);
      mkdirSync(dir, { recursive: true });
      return dir;
    },
    async cleanup() {
      await bed.cleanup();
      rmSync(root, { recursive: true, force: true });
    },
  };
}

/**
 * Live `droid exec` processes of turns started under this tag (not workers,
 * not the server, not a droid booted for a session's next turn that has not
 * come: aheadPids). A child droid forks shows droid's command line until
 * it execs, so processes whose parent is itself a droid are not counted.
 */
export function liveDroids(tag: string): number[] {
  const droids = droidProcesses(tag);
  const ahead = aheadPids(tag);
  return [...droids.keys()].filter((pid) => !droids.has(droids.get(pid)!) && !ahead.has(pid));
}

/**
 * Every live process of this tag with droid's `stream-jsonrpc` arguments, and
 * its parent: droid itself, droid's forks, and bwrap's two halves when turns
 * are sandboxed (bwrap's command line carries droid's).
 */
export function droidProcesses(tag: string): Map<number, number> {
  const droids = new Map<number, number>();
  for (const pid of pidsWithEnvTag(tag)) {
    try {
      if (!readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('stream-jsonrpc')) continue;
      // The command name may contain spaces or parentheses: fields after the last ')' are fixed.
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      droids.set(pid, Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {
      // The process ended while we looked.
    }
  }
  return droids;
}

/** Waits until no droid process of this tag is alive (the server itself may be). */
export async function waitForNoDroids(tag: string, timeoutMs: number): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (liveDroids(tag).length > 0) {
    if (Date.now() > end) throw new Error(`droid processes still alive: ${liveDroids(tag).join(', ')}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** The teardown of a file with one server: no droid left after each test; the server, every tagged process and the context gone after the last. */
export function tearDownEach(tag: string, parts: () => { server: RunningServer | undefined; ctx: E2EContext | undefined }): void {
  afterEach(async () => {
    await waitForNoDroids(tag, 15_000);
  });
  afterAll(async () => {
    const { server, ctx } = parts();
    await server?.close();
    await waitForNoProcesses(tag, 15_000);
    await ctx?.cleanup();
  });
}

/**
 * The lifecycle of a file whose tests each start their own server: the
 * context made before the first test, the server closed (and every tagged
 * process gone) after each, the context removed after the last. `take`
 * hands over the test's server and forgets it.
 */
export function serverPerTest(
  tag: string,
  made: (ctx: E2EContext) => void,
  parts: () => { ctx: E2EContext | undefined; take(): RunningServer | undefined },
): void {
  beforeAll(async () => made(await makeContext(tag)));
  afterEach(async () => {
    await parts().take()?.close();
    await waitForNoProcesses(tag, 15_000);
  });
  afterAll(async () => {
    await parts().ctx?.cleanup();
  });
}
