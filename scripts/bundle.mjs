/**
 * Bundles the compiled worker (dist/src/worker/child/main.js and everything it
 * imports, zod and ajv included) into one file in its place. Every turn forks
 * a fresh worker, and Node's ESM loader spent about 1.5 ms on each of the
 * ~165 files it loaded: the one file is imported in ~100 ms instead of
 * ~300 ms on this host (issue 12, a cold turn start). The other compiled
 * modules stay as they are. The server is not bundled: measured here, its
 * bundle started ~150 ms of CPU sooner but answered HTTP status calls with
 * ~40% more CPU per call (0.39 vs 0.28 ms). Runs after tsc (npm run build).
 */
import { build } from 'esbuild';
import { fileURLToPath } from 'node:url';

const main = fileURLToPath(new URL('../dist/src/worker/child/main.js', import.meta.url));
await build({
  entryPoints: [main],
  outfile: main,
  allowOverwrite: true,
  bundle: true,
  platform: 'node',
  target: 'node20',
  format: 'esm',
  // Bundled CommonJS packages (ajv) call require(); an ES module has none of its own.
  banner: { js: "import { createRequire as __droidMcpRequire } from 'node:module'; const require = __droidMcpRequire(import.meta.url);" },
  legalComments: 'none',
  logLevel: 'warning',
});
