#!/usr/bin/env node
// Operator entry point: see src/ops/verify-live.ts (built to dist/ by `npm run build`).
import { existsSync } from 'node:fs';

const entry = new URL('../dist/src/ops/verify-live.js', import.meta.url);
if (!existsSync(entry)) {
  process.stderr.write('verify-live: dist/ is missing; run `npm run build` first\n');
  process.exit(2);
}
await import(entry.href);
