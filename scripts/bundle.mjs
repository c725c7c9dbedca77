/**
 * Bundles the compiled worker (dist/src/worker/main.js and everything it
 * imports, zod and ajv included) into one file next to it. Every turn forks a
 * fresh worker, and Node's ESM loader spent about 1.5 ms per file on the ~165
 * files the worker loads: one file starts it about 190 ms sooner on this host
 * (issue 12, turn start without the pool). Runs after tsc (npm run build).
 */
import { build } from 'esbuild';
import { fileURLToPath } from 'node:url';

const dist = fileURLToPath(new URL('../dist/src/', import.meta.url));
await build({
  entryPoints: [`${dist}worker/main.js`],
  outfile: `${dist}worker/worker.bundle.mjs`,
  bundle: true,
  platform: 'node',
  target: 'node20',
  format: 'esm',
  // Bundled CommonJS packages (ajv) call require(); ESM has none of its own.
  banner: { js: "import { createRequire as __droidMcpRequire } from 'node:module'; const require = __droidMcpRequire(import.meta.url);" },
  legalComments: 'none',
  logLevel: 'warning',
});
