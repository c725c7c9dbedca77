/**
 * Bundles the compiled worker into two CommonJS files in place. Every turn
 * forks a fresh worker, and Node's ESM loader spent about 1.5 ms on each of
 * the ~165 files it loaded: one file is loaded in ~100 ms instead of ~300 ms
 * on this host (issue 12, a cold turn start).
 *  - dist/src/worker/child/worker.cjs: the worker proper and everything it
 *    imports, zod included (ajv is left to Node: output-schema.ts loads it
 *    at its first use), and beside it worker.cjs.cache, V8's code cache for
 *    it, written by a fresh Node as a worker starts (load-worker.ts).
 *  - dist/src/worker/child/main.cjs: the entry, which spawns a cold turn's
 *    droid before it loads worker.cjs (main.ts); a few small modules.
 * CommonJS because Node reached a CommonJS entry's first line ~7 ms sooner
 * than an ES module's (no ESM loader to start), and only a CommonJS body can
 * be compiled from a code cache on Node 20. The compiled main.js and
 * worker.js are removed: nothing loads them.
 * The other compiled modules stay as they are. The server is not bundled:
 * measured here, its bundle started ~150 ms of CPU sooner but answered HTTP
 * status calls with ~40% more CPU per call (0.39 vs 0.28 ms). Runs after
 * tsc (npm run build).
 */
import { build } from 'esbuild';
import { execFileSync } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const inPlace = (name) => fileURLToPath(new URL(`../dist/src/worker/child/${name}`, import.meta.url));
const common = {
  bundle: true,
  platform: 'node',
  target: 'node20',
  format: 'cjs',
  legalComments: 'none',
  logLevel: 'warning',
  // A module's own URL (output-schema.ts finds ajv from it, load-worker.ts node:crypto).
  define: { 'import.meta.url': '__droidMcpUrl' },
  // Strict, as the ES modules it is made of were: the banner comes before esbuild's own directive.
  banner: { js: "'use strict'; const __droidMcpUrl = require('node:url').pathToFileURL(__filename).href;" },
};
/**
 * A warning means code that would misbehave only at run time (an `import.meta`
 * field the banner does not supply, say): the build fails instead. So does a
 * dynamic import(), which a body run by node:vm cannot make.
 */
async function bundle(entry, outfile) {
  const { warnings } = await build({ ...common, entryPoints: [inPlace(entry)], outfile: inPlace(outfile) });
  if (warnings.length > 0) throw new Error(`bundle: ${outfile}: ${warnings.length} esbuild warning(s), see above`);
  if (/\bimport\(/.test(readFileSync(inPlace(outfile), 'utf8'))) throw new Error(`bundle: ${outfile} makes a dynamic import()`);
}
await bundle('worker.js', 'worker.cjs');
// The entry stays small: the worker proper is loaded at run time, from its own bundle.
await bundle('main.js', 'main.cjs');
for (const name of ['main.js', 'main.js.map', 'worker.js', 'worker.js.map']) rmSync(inPlace(name), { force: true });
// A fresh Node without flags, as the runner forks a worker (V8 rejects a cache made under other flags).
const loader = new URL('../dist/src/worker/child/load-worker.js', import.meta.url).href;
execFileSync(
  process.execPath,
  ['--input-type=module', '-e', `(await import(${JSON.stringify(loader)})).writeCodeCache(${JSON.stringify(inPlace('worker.cjs'))})`],
  {
    stdio: ['ignore', 'ignore', 'inherit'],
    env: { PATH: process.env.PATH ?? '' },
  },
);
