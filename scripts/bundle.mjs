/**
 * Bundles each entry point tsc compiled (the server, dist/src/cli.js, and the
 * worker every turn forks, dist/src/worker/main.js) into one file in its
 * place, with everything it imports, zod, ajv and the MCP SDK included.
 * Node's ESM loader spends about 1.5 ms on each file it loads, and these two
 * load ~165 (worker) and ~300 (server) files: one file each starts a cold
 * turn's worker ~190 ms sooner and the server ~100 ms sooner on this host
 * (issue 12). The other compiled modules stay as they are, for tests and
 * benchmarks that import them. Runs after tsc (npm run build).
 */
import { build } from 'esbuild';
import { fileURLToPath } from 'node:url';

const dist = fileURLToPath(new URL('../dist/src/', import.meta.url));
for (const entry of ['cli.js', 'worker/main.js']) {
  await build({
    entryPoints: [`${dist}${entry}`],
    outfile: `${dist}${entry}`,
    allowOverwrite: true,
    bundle: true,
    platform: 'node',
    target: 'node20',
    format: 'esm',
    // Bundled CommonJS packages (ajv, pino) call require(); an ES module has none of its own.
    banner: { js: "import { createRequire as __droidMcpRequire } from 'node:module'; const require = __droidMcpRequire(import.meta.url);" },
    legalComments: 'none',
    logLevel: 'warning',
  });
}
