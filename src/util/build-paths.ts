/**
 * Paths of the built entry points (dist/src/cli.js, dist/src/worker/main.js),
 * found from the package root rather than from the calling module's own
 * location: the build bundles each entry point into one file in its place
 * (scripts/bundle.mjs), so a module no longer sits where tsc put it, and
 * paths relative to it would point elsewhere.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const PACKAGE_NAME = 'droid-mcp';

/** The nearest folder at or above this module holding droid-mcp's package.json. */
function packageRoot(): string {
  for (let dir = dirname(fileURLToPath(import.meta.url)); ; dir = dirname(dir)) {
    const manifest = join(dir, 'package.json');
    if (existsSync(manifest)) {
      try {
        if ((JSON.parse(readFileSync(manifest, 'utf8')) as { name?: unknown }).name === PACKAGE_NAME) return dir;
      } catch {
        // not ours (or unreadable): keep looking upwards
      }
    }
    if (dirname(dir) === dir) throw new Error(`droid-mcp: no package.json named ${PACKAGE_NAME} above ${fileURLToPath(import.meta.url)}`);
  }
}

const ROOT = packageRoot();

/** The server's entry point, as operators run it. */
export const CLI_ENTRY = join(ROOT, 'dist/src/cli.js');
/** The worker every turn forks. */
export const WORKER_ENTRY = join(ROOT, 'dist/src/worker/main.js');
