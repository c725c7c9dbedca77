#!/usr/bin/env node
/**
 * Removes compiled files whose source is gone, so that a build over an older
 * checkout's dist/ leaves no module from a layout that no longer exists (an
 * old entry point would load and then fail on the new modules beside it).
 * tsc only adds and overwrites; it never deletes. Runs after tsc (npm run build).
 */
import { existsSync, readdirSync, rmSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const dist = join(root, 'dist');
let removed = 0;

function prune(dir) {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) {
      prune(path);
      if (readdirSync(path).length === 0) rmSync(path, { recursive: true });
      continue;
    }
    const compiled = /\.js(\.map)?$/.exec(name);
    if (!compiled) continue;
    const source = join(root, relative(dist, path)).replace(/\.js(\.map)?$/, '.ts');
    if (!existsSync(source)) {
      rmSync(path);
      removed++;
    }
  }
}

if (existsSync(dist)) prune(dist);
if (removed > 0) console.error(`prune-dist: removed ${removed} compiled file(s) whose source is gone`);
