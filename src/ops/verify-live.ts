#!/usr/bin/env node
/**
 * scripts/verify-live: bounded authenticated verification with disposable
 * private state: two exact results, same-session continuation, cancellation
 * of a third turn, then process cleanup. It only ever uses (and removes) a
 * state directory it created. Prints assertions and versions only.
 */
import { parseArgs } from 'node:util';
import { lifecycle } from './lifecycle.js';
import { SHARED_ARGS, verifyOptions } from './verify.js';

const USAGE =
  'Usage: node scripts/verify-live.mjs --droid /abs/droid --model ID --workspace /abs/approved/dir [--reasoning low] [--autonomy low] [--state /abs/new/dir] [--no-sandbox] [--timeout 300]';

try {
  const { values } = parseArgs({ options: SHARED_ARGS, strict: true });
  process.exit(await lifecycle('verify-live', verifyOptions(values, USAGE), true));
} catch (err) {
  process.stderr.write(`verify-live: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(2);
}
