/**
 * config.example.json (top level) holds every config key with the reference
 * host's values, and the real loader accepts it once its paths point at
 * things that exist (here: private temporary stand-ins).
 */
import { chmod, mkdir, mkdtemp, readFile, realpath, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/config/load.js';
import { CONFIG_KEYS } from '../../../src/config/schema.js';
import { REPO_ROOT } from '../../support/paths.js';

let tmp: string;

beforeEach(async () => {
  tmp = await realpath(await mkdtemp(join(tmpdir(), 'droid-mcp-example-')));
});
afterEach(async () => {
  await rm(tmp, { recursive: true, force: true });
});

async function example(): Promise<Record<string, unknown>> {
  return JSON.parse(await readFile(join(REPO_ROOT, 'config.example.json'), 'utf8')) as Record<string, unknown>;
}

async function executable(path: string): Promise<string> {
  await writeFile(path, '#!/bin/sh\nexit 0\n');
  await chmod(path, 0o755);
  return path;
}

describe('config.example.json', () => {
  it('names every config key, and nothing else', async () => {
    expect(Object.keys(await example()).sort()).toEqual([...CONFIG_KEYS['']!].sort());
  });

  it('loads through the real loader with its values intact once its paths exist', async () => {
    const file = await example();
    // Every absolute path moves under the private temp folder; every other value stays as written.
    const moved = (p: unknown) => join(tmp, String(p));
    const roots = (file.approvedDirectories as string[]).map(moved);
    for (const root of roots) await mkdir(root, { recursive: true });
    const worktrees = file.worktrees as { directory: string; maxCheckouts: number };
    await mkdir(moved(worktrees.directory), { mode: 0o700 });
    await mkdir(join(tmp, 'home/droid/.local/bin'), { recursive: true });
    await mkdir(join(tmp, 'usr/bin'), { recursive: true });
    const config = {
      ...file,
      approvedDirectories: roots,
      stateDirectory: moved(file.stateDirectory),
      droidPath: await executable(moved(file.droidPath)),
      bwrapPath: await executable(moved(file.bwrapPath)),
      tokenFile: moved(file.tokenFile),
      worktrees: { ...worktrees, directory: moved(worktrees.directory) },
    };
    const path = join(tmp, 'config.json');
    await writeFile(path, JSON.stringify(config), { mode: 0o600 });
    const loaded = await loadConfig(path, { platform: 'linux', pathEnv: '', home: tmp });
    expect(loaded).toEqual({
      approvedDirectories: roots,
      stateDirectory: config.stateDirectory,
      droidPath: config.droidPath,
      transport: 'stdio',
      defaultModel: 'claude-opus-5-5',
      reasoningEffort: 'high',
      maxAutonomy: 'high',
      defaultAutonomy: 'high',
      excludeModelIds: [],
      maxConcurrentRuns: 4,
      warmPoolSize: 1,
      runTimeoutMs: 3_600_000,
      cancelGraceMs: 5_000,
      ceilings: { maxTurnTokens: 20_000_000, maxTurnCredits: 500, maxSessionCredits: 2000 },
      autoCompactAt: 0.8,
      modelCacheTtlMs: 60_000,
      sandbox: { mode: 'bwrap', bwrapPath: config.bwrapPath },
      port: 8787,
      tokenFile: config.tokenFile,
      publicUrl: 'https://droid.example.com/mcp',
      ampMcp: { url: 'https://ampcode.com/mcp?profile=puck' },
      worktrees: { directory: config.worktrees.directory, maxCheckouts: 16 },
      network: { mode: 'proxy', allow: ['registry.npmjs.org', '*.github.com'] },
      sandboxReadable: ['/home/droid/.nvm'],
    });
  });
});
