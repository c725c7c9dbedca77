#!/usr/bin/env node
// The layout rules of docs/ARCHITECTURE.md, checked: no import cycle, no
// import from a higher layer, no file in src/ over 400 lines, no function over
// 80, no folder with more than 15 source files. `--graph` prints the room-to-room import edges; `--sizes` the largest
// files and functions. Exits 1 when a rule is broken.
import { readdirSync, readFileSync, statSync, existsSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';

const ROOT = resolve(dirname(new URL(import.meta.url).pathname), '..');
const MAX_FILE_LINES = 400;
const MAX_FUNCTION_LINES = 80;
/** Source files in one folder of src/: a room past this is split by concern (issue 39). */
const MAX_FOLDER_FILES = 15;

// Lower layers first; a module may import only from its own layer or below.
// Rooms on one line share a layer and must not import each other in a cycle.
const LAYERS = [
  ['util'],
  ['droid'],
  ['shared'],
  // The test bed (scripted model, droid home, MCP driver): no server module imports it (scripts/check.mjs).
  ['testbed'],
  // The store's one error type, then its file formats, then the in-memory tables, then the façade and its lifecycle.
  ['store/errors.ts'],
  ['store/formats'],
  ['store/tables'],
  ['store'],
  ['config'],
  ['sandbox', 'worker/contract'],
  ['evidence', 'worktree'],
  ['worker/child', 'worker/parent'],
  ['controller'],
  ['mcp'],
  ['ops', 'demo'],
  // The composition root (loaded by the entry point once stdio answers the handshake), then the entry point.
  ['compose.ts'],
  ['cli.ts'],
];

function roomOf(file) {
  const path = relative(join(ROOT, 'src'), file);
  const rooms = LAYERS.flat().sort((a, b) => b.length - a.length);
  return rooms.find((room) => path === room || path.startsWith(room + '/')) ?? path.split('/')[0];
}

function layerOf(room) {
  return LAYERS.findIndex((rooms) => rooms.includes(room));
}

function walk(dir, out = []) {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) walk(path, out);
    else if (path.endsWith('.ts')) out.push(path);
  }
  return out;
}

function importsOf(file, source) {
  const specifiers = [];
  const visit = (node) => {
    if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier) {
      specifiers.push(node.moduleSpecifier.text);
    } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
      const [arg] = node.arguments;
      if (arg && ts.isStringLiteral(arg)) specifiers.push(arg.text);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return specifiers
    .filter((s) => s.startsWith('.'))
    .map((s) => resolve(dirname(file), s).replace(/\.js$/, '.ts'))
    .filter((target) => existsSync(target));
}

function functionsOf(source) {
  const found = [];
  const visit = (node) => {
    if (
      ts.isFunctionDeclaration(node) ||
      ts.isMethodDeclaration(node) ||
      ts.isArrowFunction(node) ||
      ts.isFunctionExpression(node) ||
      ts.isConstructorDeclaration(node) ||
      ts.isGetAccessor(node)
    ) {
      const start = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
      const end = source.getLineAndCharacterOfPosition(node.getEnd()).line;
      const name = node.name?.getText(source) ?? (ts.isConstructorDeclaration(node) ? 'constructor' : '(anonymous)');
      found.push({ name, line: start + 1, lines: end - start + 1 });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

const files = walk(join(ROOT, 'src'));
const graph = new Map();
const problems = [];
const sizes = [];
const functions = [];
for (const file of files) {
  const text = readFileSync(file, 'utf8');
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.ES2022, true);
  graph.set(file, importsOf(file, source));
  const lines = text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
  sizes.push({ file: relative(ROOT, file), lines });
  if (lines > MAX_FILE_LINES) problems.push(`${relative(ROOT, file)}: ${lines} lines (at most ${MAX_FILE_LINES})`);
  for (const fn of functionsOf(source)) {
    functions.push({ file: relative(ROOT, file), ...fn });
    if (fn.lines > MAX_FUNCTION_LINES) {
      problems.push(`${relative(ROOT, file)}:${fn.line}: function ${fn.name} is ${fn.lines} lines (at most ${MAX_FUNCTION_LINES})`);
    }
  }
}

// Folders that hold too many source files to find one's way in.
const perFolder = new Map();
for (const file of files) perFolder.set(dirname(file), (perFolder.get(dirname(file)) ?? 0) + 1);
for (const [folder, count] of perFolder) {
  if (count > MAX_FOLDER_FILES) problems.push(`${relative(ROOT, folder)}/: ${count} source files (at most ${MAX_FOLDER_FILES}): split it by concern`);
}

// Upward edges and rooms the table does not know.
const roomEdges = new Map();
for (const [file, targets] of graph) {
  const from = roomOf(file);
  if (layerOf(from) < 0) problems.push(`${relative(ROOT, file)}: room ${from} has no layer in scripts/layout.mjs`);
  for (const target of targets) {
    const to = roomOf(target);
    if (from !== to) roomEdges.set(`${from} -> ${to}`, (roomEdges.get(`${from} -> ${to}`) ?? 0) + 1);
    if (layerOf(to) > layerOf(from)) {
      problems.push(`${relative(ROOT, file)}: imports ${relative(ROOT, target)} from a higher layer (${from} -> ${to})`);
    }
  }
}

// Cycles: strongly connected components of the file graph (Tarjan).
let counter = 0;
const index = new Map();
const low = new Map();
const stack = [];
const onStack = new Set();
function connect(node) {
  index.set(node, counter);
  low.set(node, counter++);
  stack.push(node);
  onStack.add(node);
  for (const next of graph.get(node) ?? []) {
    if (!index.has(next)) {
      connect(next);
      low.set(node, Math.min(low.get(node), low.get(next)));
    } else if (onStack.has(next)) low.set(node, Math.min(low.get(node), index.get(next)));
  }
  if (low.get(node) === index.get(node)) {
    const component = [];
    let member;
    do {
      member = stack.pop();
      onStack.delete(member);
      component.push(relative(ROOT, member));
    } while (member !== node);
    const selfLoop = (graph.get(node) ?? []).includes(node);
    if (component.length > 1 || selfLoop) problems.push(`import cycle: ${component.sort().join(' <-> ')}`);
  }
}
for (const file of graph.keys()) if (!index.has(file)) connect(file);

const args = new Set(process.argv.slice(2));
if (args.has('--graph')) {
  for (const edge of [...roomEdges.keys()].sort()) console.log(`${edge}  (${roomEdges.get(edge)})`);
}
if (args.has('--sizes')) {
  sizes.sort((a, b) => b.lines - a.lines);
  functions.sort((a, b) => b.lines - a.lines);
  const total = sizes.reduce((sum, s) => sum + s.lines, 0);
  console.log(`files: ${sizes.length}, lines: ${total}, largest:`);
  for (const s of sizes.slice(0, 5)) console.log(`  ${s.lines}  ${s.file}`);
  console.log(`functions: ${functions.length}, over 60 lines: ${functions.filter((f) => f.lines > 60).length}, longest:`);
  for (const f of functions.slice(0, 5)) console.log(`  ${f.lines}  ${f.file}:${f.line} ${f.name}`);
}
if (problems.length) {
  console.error(problems.join('\n'));
  console.error(`layout: ${problems.length} problem(s)`);
  process.exit(1);
}
console.error(`layout: ok (${files.length} files, no cycle, no upward import)`);
