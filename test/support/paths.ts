/**
 * Where things are, from the repository root, so this support code works
 * both from its TypeScript source and compiled under dist/ (benchmarks).
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, isAbsolute, join } from 'node:path';
import { fileURLToPath } from 'node:url';

function findRepoRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const pkg = join(dir, 'package.json');
    if (existsSync(pkg) && (JSON.parse(readFileSync(pkg, 'utf8')) as { name?: string }).name === 'droid-mcp') return dir;
    const parent = dirname(dir);
    if (parent === dir) throw new Error('droid-mcp repository root not found');
    dir = parent;
  }
}

export const REPO_ROOT = findRepoRoot();
/** The droid CLI pinned as a dev dependency. */
const PINNED_DROID_PATH = join(REPO_ROOT, 'node_modules/@factory/cli-linux-x64/bin/droid');
/** Names another droid binary for the whole test bed (`npm run test:compat` sets it). */
const TEST_DROID_VAR = 'DROID_MCP_TEST_DROID';

function testDroidPath(): string {
  const chosen = process.env[TEST_DROID_VAR];
  if (chosen === undefined || chosen === '') return PINNED_DROID_PATH;
  if (!isAbsolute(chosen) || !existsSync(chosen)) {
    throw new Error(`${TEST_DROID_VAR}=${chosen} is not an absolute path to an existing droid binary; unset it to use the pinned CLI`);
  }
  return chosen;
}

/** The real droid CLI the tests run: $DROID_MCP_TEST_DROID, else the pinned one. */
export const DROID_PATH = testDroidPath();
/** The built server and worker (`npm run build`). */
export const SERVER_ENTRY = join(REPO_ROOT, 'dist/src/cli.js');
export const WORKER_ENTRY = join(REPO_ROOT, 'dist/src/worker/child/main.cjs');
export const MOCK_DROID = join(REPO_ROOT, 'test/support/mock-droid.mjs');
