#!/usr/bin/env node
// Runs the wire and end-to-end suites against an older droid CLI (default
// 0.215.0, the previous version we support next to the pinned one). The CLI
// is installed once into a private cache folder with npm, never into this
// repository's node_modules, and handed to the test bed via DROID_MCP_TEST_DROID.
//
//   npm run test:compat                      # wire + e2e on 0.215.0
//   npm run test:compat -- test/e2e/mcp/http.test.ts   # only these files
// Env: DROID_MCP_COMPAT_VERSION (default 0.215.0), DROID_MCP_COMPAT_CACHE
// (default <os tmp>/droid-mcp-compat-cli-<version>).
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const PACKAGE = '@factory/cli-linux-x64';
const version = process.env.DROID_MCP_COMPAT_VERSION || '0.215.0';
const cache = process.env.DROID_MCP_COMPAT_CACHE || join(tmpdir(), `droid-mcp-compat-cli-${version}`);
const root = fileURLToPath(new URL('..', import.meta.url));
const packageDir = join(cache, 'node_modules', ...PACKAGE.split('/'));
const droid = join(packageDir, 'bin', 'droid');

function fail(message) {
  console.error(`test:compat: ${message}`);
  process.exit(1);
}

function run(command, args, options = {}) {
  const result = spawnSync(command, args, { stdio: 'inherit', cwd: root, ...options });
  if (result.error) fail(`could not run ${command}: ${result.error.message}`);
  return result.status ?? 1;
}

function installedVersion() {
  try {
    return JSON.parse(readFileSync(join(packageDir, 'package.json'), 'utf8')).version;
  } catch {
    return undefined;
  }
}

if (installedVersion() !== version || !existsSync(droid)) {
  console.error(`test:compat: installing ${PACKAGE}@${version} into ${cache}`);
  mkdirSync(cache, { recursive: true, mode: 0o700 });
  const code = run('npm', ['install', '--prefix', cache, '--no-save', '--no-audit', '--no-fund', '--ignore-scripts', `${PACKAGE}@${version}`]);
  if (code !== 0 || installedVersion() !== version) fail(`npm could not install ${PACKAGE}@${version} into ${cache} (exit ${code}); check registry access`);
}

const reported = spawnSync(droid, ['--version'], { encoding: 'utf8', env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: cache } });
if (reported.status !== 0 || reported.stdout.trim() !== version) {
  fail(`${droid} --version printed ${JSON.stringify(reported.stdout.trim())} (exit ${reported.status}), expected ${version}; delete ${cache} to reinstall`);
}
console.error(`test:compat: droid ${version} at ${droid}`);

// The e2e suites run the built server and worker from dist/.
if (run('npm', ['run', 'build']) !== 0) fail('npm run build failed');

const files = process.argv.slice(2);
const code = run('npx', ['vitest', 'run', ...(files.length ? files : ['test/wire', 'test/e2e'])], {
  env: { ...process.env, DROID_MCP_TEST_DROID: droid },
});
process.exit(code);
