#!/usr/bin/env node
// Static checks beyond the type checker. stdout is the MCP channel in stdio
// mode, so nothing under src/ may write to it directly.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

const problems = [];

function walk(dir) {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) walk(path);
    else if (path.endsWith('.ts')) scan(path);
  }
}

function scan(path) {
  const lines = readFileSync(path, 'utf8').split('\n');
  lines.forEach((line, i) => {
    if (/\bconsole\.(log|info|debug)\(|process\.stdout\.write\(/.test(line)) {
      problems.push(`${path}:${i + 1}: writes to stdout (use the stderr logger)`);
    }
  });
}

walk('src');

// docs/TOOLS.md must match the registered schemas (needs a fresh build).
const { renderToolsDoc } = await import('../dist/src/mcp/tools-doc.js');
let current = '';
try {
  current = readFileSync(new URL('../docs/TOOLS.md', import.meta.url), 'utf8');
} catch {
  // missing counts as stale
}
if (current !== renderToolsDoc()) problems.push('docs/TOOLS.md is stale: run `npm run docs` and commit it');
if (problems.length) {
  console.error(problems.join('\n'));
  process.exit(1);
}
console.error('check: ok');
