#!/usr/bin/env node
/**
 * `npm run smoke -- --droid PATH --model ID --workspace DIR`: a two-turn
 * session lifecycle through MCP against the caller's droid login, with
 * disposable private state. Prints assertions and versions only.
 */
import { parseArgs } from 'node:util';
import { lifecycle } from './lifecycle.js';
import { SHARED_ARGS, verifyOptions } from './verify.js';

const USAGE = 'Usage: npm run smoke -- --droid /abs/droid --model ID --workspace /abs/approved/dir [--reasoning low] [--autonomy low] [--no-sandbox] [--timeout 300]';

try {
  const { values } = parseArgs({ options: SHARED_ARGS, strict: true });
  process.exit(await lifecycle('smoke', verifyOptions(values, USAGE), false));
} catch (err) {
  process.stderr.write(`smoke: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(2);
}
