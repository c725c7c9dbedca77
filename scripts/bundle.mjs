/**
 * Bundles the compiled worker into two files in place. Every turn forks a
 * fresh worker, and Node's ESM loader spent about 1.5 ms on each of the
 * ~165 files it loaded: one file is imported in ~100 ms instead of ~300 ms
 * on this host (issue 12, a cold turn start).
 *  - dist/src/worker/child/worker.js: the worker proper and everything it
 *    imports, zod included (ajv is left to Node: output-schema.ts loads it
 *    at its first use).
 *  - dist/src/worker/child/main.cjs: the entry, which spawns a cold turn's
 *    droid before it imports worker.js (main.ts); a few small modules. The
 *    compiled main.js is removed: main.cjs is the only entry.
 * The other compiled modules stay as they are. The server is not bundled:
 * measured here, its bundle started ~150 ms of CPU sooner but answered HTTP
 * status calls with ~40% more CPU per call (0.39 vs 0.28 ms). Runs after
 * tsc (npm run build).
 */
import { build } from 'esbuild';
import { rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const inPlace = (name) => fileURLToPath(new URL(`../dist/src/worker/child/${name}`, import.meta.url));
const common = {
  allowOverwrite: true,
  bundle: true,
  platform: 'node',
  target: 'node20',
  format: 'esm',
  legalComments: 'none',
  logLevel: 'warning',
};
await build({
  ...common,
  entryPoints: [inPlace('worker.js')],
  outfile: inPlace('worker.js'),
  // Bundled CommonJS code calls require(); an ES module has none of its own.
  banner: { js: "import { createRequire as __droidMcpRequire } from 'node:module'; const require = __droidMcpRequire(import.meta.url);" },
});
// The entry stays small: the worker proper is imported at run time, from its own bundle.
// CommonJS, the one entry left: Node reached a CommonJS entry's first line ~7 ms
// sooner than an ES module's (no ESM loader to start), on a cold turn's path to
// spawning droid.
await build({ ...common, format: 'cjs', banner: undefined, entryPoints: [inPlace('main.js')], outfile: inPlace('main.cjs'), external: ['./worker.js'] });
rmSync(inPlace('main.js'));
rmSync(inPlace('main.js.map'), { force: true });
