/**
 * Time the changed-files evidence adds to a turn, printed as medians of 10:
 *  - "before": the snapshot taken while droid starts (overlaps droid's own
 *    start-up, so it costs wall time only when it is the slower of the two);
 *  - "after": the snapshot and diff after the turn ended (always added);
 * in a folder that is not a git work tree, and in a git repository of 10,000
 * committed files where a turn changed 3 of them; each unconfined and inside
 * the bubblewrap sandbox (git runs there when the sandbox is on).
 * get_context_stats is one request to the already running droid (≈ ms) and
 * runs in parallel with the "after" snapshot.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, realpathSync, rmSync, unlinkSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { changesSince, snapshotTree, type Launcher } from '../src/evidence/git.js';
import { sandboxLauncher } from '../src/sandbox/sandbox.js';
import { median } from './stats.js';

const RUNS = 10;
const FILES = 10_000;
const BWRAP = '/usr/bin/bwrap';

export function makeRepo(dir: string): void {
  const git = (...args: string[]) =>
    execFileSync('git', ['-c', 'core.hooksPath=/dev/null', '-c', 'gc.autoDetach=false', '-c', 'user.name=b', '-c', 'user.email=b@b', ...args], {
      cwd: dir,
      env: { ...process.env, GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null' },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
  git('init', '-q', '-b', 'main');
  for (let d = 0; d < 100; d++) {
    mkdirSync(join(dir, `d${d}`));
    for (let f = 0; f < FILES / 100; f++) writeFileSync(join(dir, `d${d}`, `f${f}.txt`), `file ${d}/${f}\n`);
  }
  git('add', '-A');
  git('commit', '-q', '-m', 'base');
  // A repository in use has an index newer than its files; one written in the
  // same second as them is "racily clean" and git re-reads every file.
  execFileSync('sleep', ['1.1']);
  git('update-index', '--refresh', '-q');
}

async function measure(workspace: string, launcher: Launcher | null, row: number): Promise<{ before: number; after: number; changed: number | null }> {
  const before: number[] = [];
  const after: number[] = [];
  let changed: number | null = null;
  for (let i = 0; i < RUNS; i++) {
    const t0 = performance.now();
    const state = await snapshotTree({ workspace, launcher, deadline: Date.now() + 30_000 });
    const t1 = performance.now();
    // The "turn": one file added, one modified, one deleted.
    writeFileSync(join(workspace, `added-${row}-${i}.txt`), 'new\n');
    mkdirSync(join(workspace, 'd1'), { recursive: true });
    writeFileSync(join(workspace, 'd1', 'f1.txt'), `changed ${row} ${i}\n`);
    const victim = join(workspace, `d${2 + row}`, `f${i}.txt`);
    if (existsSync(victim)) unlinkSync(victim);
    const t2 = performance.now();
    const changes = state ? await changesSince(state, { workspace, launcher, deadline: Date.now() + 30_000 }, false) : null;
    const t3 = performance.now();
    before.push(t1 - t0);
    after.push(t3 - t2);
    changed = changes ? changes.added.length + changes.modified.length + changes.deleted.length : null;
  }
  return { before: median(before), after: median(after), changed };
}

export async function main(): Promise<void> {
  const root = realpathSync(mkdtempSync(join(tmpdir(), 'droid-mcp-bench-evidence-')));
  try {
    const plain = join(root, 'plain');
    mkdirSync(plain);
    const repo = join(root, 'repo');
    mkdirSync(repo);
    makeRepo(repo);
    // The private temp root (the turn TMPDIR's parent) may not hold the workspaces (sandbox.ts checkConfinement).
    const turnTmp = join(root, 'private', 'tmp');
    const factoryDir = join(root, 'home', '.factory');
    mkdirSync(turnTmp, { recursive: true });
    mkdirSync(factoryDir, { recursive: true });
    const sandboxed = (workspace: string): Launcher | null =>
      existsSync(BWRAP)
        ? sandboxLauncher(BWRAP, {
            workspace: { path: workspace, writable: false },
            factoryDir,
            factoryEntries: [],
            sessionsCopy: null,
            turnTmp,
            runtimeDir: null,
            hiddenDirs: [],
            hiddenFiles: [],
          })
        : null;
    const rows: Array<[string, string, Launcher | null]> = [
      ['not a git work tree, unconfined', plain, null],
      [`git repo of ${FILES} files, unconfined`, repo, null],
    ];
    if (existsSync(BWRAP)) {
      rows.push(['not a git work tree, in bwrap', plain, sandboxed(plain)]);
      rows.push([`git repo of ${FILES} files, in bwrap`, repo, sandboxed(repo)]);
    }
    console.log(`median of ${RUNS} (ms): before-snapshot (overlaps droid start-up) | after-snapshot + diff (added to every turn)`);
    for (const [row, [name, workspace, launcher]] of rows.entries()) {
      const m = await measure(workspace, launcher, row);
      console.log(
        `  ${name.padEnd(40)} before ${m.before.toFixed(1).padStart(7)}  after ${m.after.toFixed(1).padStart(7)}  (paths seen: ${m.changed ?? 'null'})`,
      );
    }
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await main();
