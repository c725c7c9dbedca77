#!/usr/bin/env node
// Checks the reply-back route of this host without any model prompt or Amp
// message: what a given droid CLI does with the configured Amp MCP endpoint
// when a session is created with it, resumed without it, re-attached, and
// created without it (run `npm run build` first).
//
//   node scripts/verify-route.mjs --config /abs/config.json [--droid /abs/droid] [--model ID]
//
// The endpoint is the config's ampMcp url (the real one needs the service
// user's Factory MCP OAuth for exactly that url). Output: one line per check
// and the droid version, on stderr; no session ids, no credentials. Exit 0
// when every check passed, 1 when one failed, 2 on bad usage.
import { execFileSync } from 'node:child_process';
import { parseArgs } from 'node:util';
import { loadConfig } from '../dist/src/config/load.js';
import { verifyRoute } from '../dist/src/ops/verify-route.js';
import { sandboxSpecFor } from '../dist/src/sandbox/sandbox.js';

const USAGE = 'usage: node scripts/verify-route.mjs --config /absolute/config.json [--droid /absolute/droid] [--model MODEL_ID]';

let args;
try {
  args = parseArgs({ options: { config: { type: 'string' }, droid: { type: 'string' }, model: { type: 'string' } }, strict: true }).values;
} catch (err) {
  console.error(`${err.message}\n${USAGE}`);
  process.exit(2);
}
if (!args.config) {
  console.error(USAGE);
  process.exit(2);
}
let config;
try {
  config = await loadConfig(args.config);
} catch (err) {
  console.error(`verify-route: ${err.message}`);
  process.exit(2);
}
if (!config.ampMcp) {
  console.error('verify-route: the config has no "ampMcp": reply-back is off, there is no route to verify');
  process.exit(2);
}
// Every droid here runs in the host's sandbox, as turns do.
if (config.sandbox.mode === 'bwrap' && config.sandbox.bwrapPath === null) {
  console.error('verify-route: the sandbox is "bwrap" but no bwrap executable was found on PATH; install bubblewrap or set "bwrapPath"');
  process.exit(2);
}
const sandbox = config.sandbox.mode === 'bwrap' ? sandboxSpecFor(config.sandbox.bwrapPath, config.stateDirectory, config.tokenFile) : { mode: 'off' };
const droidPath = args.droid ?? config.droidPath;
let version = 'unknown';
try {
  version = execFileSync(droidPath, ['--version'], { encoding: 'utf8', timeout: 10_000 }).trim();
} catch {
  // reported below by the checks themselves
}
console.error(`verify-route: droid ${version} at ${droidPath}; endpoint ${config.ampMcp.url}`);
const checks = await verifyRoute({ droidPath, url: config.ampMcp.url, env: process.env, sandbox, ...(args.model && { modelId: args.model }) });
for (const c of checks) console.error(`${c.ok ? 'ok  ' : 'FAIL'} ${c.name}: ${c.detail}`);
const failed = checks.filter((c) => !c.ok).length;
console.error(failed === 0 ? 'verify-route: all checks passed' : `verify-route: ${failed} check(s) failed`);
process.exit(failed === 0 ? 0 : 1);
