/**
 * What the controller runs outside every sandbox: droid-mcp's own install
 * (its code and node_modules, which the controller and every worker load),
 * Node, and droid (its version probe and the operator's commands run it
 * unconfined). A writer turn whose approved root holds one of them can
 * rewrite it, and the next worker (or start) runs the turn's code
 * unconfined: measured, a bwrap turn appended to the worker bundle of an
 * install inside its root, and the next worker wrote a file outside.
 */
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export interface UnconfinedProgram {
  /** How the refusal names it. */
  what: string;
  path: string;
}

/** The nearest folder above this module holding a package.json: the repository, or the installed package. */
export function installRoot(): string {
  const start = dirname(fileURLToPath(import.meta.url));
  for (let dir = start; ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'package.json'))) return dir;
    if (dirname(dir) === dir) return start;
  }
}

/** Unresolved; the caller resolves each path. `install` and `node` default to this process's own. */
export function unconfinedPrograms(droidPath: string, over: { install?: string | undefined; node?: string | undefined } = {}): UnconfinedProgram[] {
  return [
    { what: "droid-mcp's install", path: over.install ?? installRoot() },
    { what: 'the Node.js executable', path: over.node ?? process.execPath },
    { what: 'the droid executable', path: droidPath },
  ];
}
