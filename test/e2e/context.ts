/**
 * Shared set-up for end-to-end tests: a real droid home with the scripted
 * model, private approved roots and state, and the built server.
 */
import { mkdirSync, realpathSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { makeDroidBed, type DroidBed } from '../support/droid-home.js';
import { privateDir, startServer, writeConfig, type RunningServer } from '../support/mcp-server.js';
import { pidsWithEnvTag } from '../support/processes.js';
import { readFileSync } from 'node:fs';

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

/** Live `droid exec` processes started under this tag (not workers, not the server). */
export function liveDroids(tag: string): number[] {
  return pidsWithEnvTag(tag).filter((pid) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('stream-jsonrpc');
    } catch {
      return false;
    }
  });
}
