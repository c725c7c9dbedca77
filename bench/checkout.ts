/**
 * What one session checkout of a 10,000-file repository costs (issue 21),
 * and the measurements behind the choice of a local clone that borrows the
 * repository's objects (`git clone --shared`) over a `git worktree`:
 *  - time and disk of making one checkout with the controller's own code
 *    (src/worktree/checkout.ts: the branch, then the clone, each git call
 *    in bwrap), with the sandbox on and off, beside a bare `git worktree add`
 *    and a bare `git clone --shared`; medians of RUNS;
 *  - bringing a turn's commit back into the repository after the turn (the
 *    clone's only extra cost per turn);
 *  - in bwrap, with the narrowest binds that still let a turn commit: what
 *    a hostile turn can then do to the repository, each way.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sandboxSpecFor } from '../src/sandbox/sandbox.js';
import { makeCheckout } from '../src/worktree/checkout.js';
import { syncBranch } from '../src/worktree/sync.js';
import type { GitHost } from '../src/worktree/confined-git.js';
import { diskUsage } from '../src/worktree/inventory.js';
import { plannedCheckout } from '../src/worktree/plan.js';
import { makeRepo } from './evidence.js';

const RUNS = 5;
const BWRAP = '/usr/bin/bwrap';
const ENV = { ...process.env, GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null' };

const git = (cwd: string, ...args: string[]) =>
  execFileSync('git', ['-c', 'core.hooksPath=/dev/null', '-c', 'user.name=b', '-c', 'user.email=b@b', '-c', 'gc.auto=0', ...args], {
    cwd,
    env: ENV,
    encoding: 'utf8',
  }).trim();
const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[sorted.length >> 1]!;
}

async function timed(fn: () => Promise<unknown> | unknown): Promise<number> {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
}

/** Median time and disk of `make(i)`, which returns the folders it made. */
async function row(name: string, make: (i: number) => Promise<string[]> | string[]): Promise<void> {
  const times: number[] = [];
  let bytes = 0;
  for (let i = 0; i < RUNS; i++) {
    let made: string[] = [];
    times.push(await timed(async () => (made = await make(i))));
    bytes = 0;
    for (const dir of made) bytes += (await diskUsage(dir)).bytes;
  }
  console.log(`  ${name.padEnd(52)} ${median(times).toFixed(0).padStart(6)} ms   ${mib(bytes).padStart(10)}`);
}

/** Runs `sh -c command` in bwrap with everything read-only but `binds`; true when it exited 0. */
function inBwrap(binds: string[], cwd: string, command: string): boolean {
  const args = ['--die-with-parent', '--unshare-user', '--unshare-pid', '--cap-drop', 'ALL', '--ro-bind', '/', '/', '--dev', '/dev', '--proc', '/proc'];
  for (const b of binds) args.push('--bind', b, b);
  return spawnSync(BWRAP, [...args, '--chdir', cwd, '--', 'sh', '-c', command], { env: ENV, stdio: 'ignore' }).status === 0;
}

function attacks(repo: string, binds: string[], cwd: string): string {
  const g = join(repo, '.git');
  const other = () => git(repo, 'rev-parse', 'droid/other');
  const before = other();
  const commit = inBwrap(binds, cwd, 'echo x >> d0/f0.txt && git -c user.name=t -c user.email=t@t commit -qam turn');
  inBwrap(binds, cwd, 'git update-ref refs/heads/droid/other HEAD');
  inBwrap(binds, cwd, `echo evil > ${g}/hooks/post-commit`);
  inBwrap(binds, cwd, `rm -f ${g}/objects/pack/*.pack`);
  const packs = spawnSync('sh', ['-c', `ls ${g}/objects/pack/*.pack`], { stdio: 'ignore' }).status === 0;
  const intact = spawnSync('git', ['-C', repo, 'fsck', '--connectivity-only', '--no-progress'], { env: ENV, stdio: 'ignore' }).status === 0;
  const yes = (b: boolean) => (b ? 'yes' : 'no');
  return `turn commits: ${yes(commit)} | moved another branch: ${yes(other() !== before)} | wrote hooks: ${yes(existsSync(join(g, 'hooks', 'post-commit')))} | deleted the packs: ${yes(!packs)} | repository intact after: ${yes(intact)}`;
}

/** The narrowest writable binds with which a turn in a `git worktree` can still commit (measured: fewer and the commit fails). */
async function securityRows(root: string): Promise<void> {
  const fresh = (name: string) => {
    const repo = join(root, name);
    mkdirSync(repo);
    makeRepo(repo);
    git(repo, 'gc', '-q');
    git(repo, 'branch', 'droid/other');
    return repo;
  };
  const wtRepo = fresh('sec-worktree');
  const wt = join(root, 'sec-wt');
  git(wtRepo, 'worktree', 'add', '-q', '-b', 'droid/s1', wt);
  const g = join(wtRepo, '.git');
  mkdirSync(join(g, 'logs', 'refs', 'heads', 'droid'), { recursive: true });
  const narrow = [wt, join(g, 'worktrees', 'sec-wt'), join(g, 'objects'), join(g, 'refs', 'heads', 'droid'), join(g, 'logs', 'refs', 'heads', 'droid')];
  console.log(`  git worktree, binds: the worktree, .git/worktrees/<name>, .git/objects, .git/refs/heads/droid, .git/logs/refs/heads/droid`);
  console.log(`    ${attacks(wtRepo, narrow, wt)}`);
  const clRepo = fresh('sec-clone');
  const cl = join(root, 'sec-clone-checkout');
  git(root, 'clone', '-q', '--shared', '--branch', 'droid/other', join(clRepo, '.git'), cl);
  console.log(`  git clone --shared, binds: the clone only`);
  console.log(`    ${attacks(clRepo, [cl], cl)}`);
}

export async function main(): Promise<void> {
  const root = realpathSync(mkdtempSync(join(tmpdir(), 'droid-mcp-bench-checkout-')));
  try {
    const repo = join(root, 'repo');
    mkdirSync(repo);
    makeRepo(repo);
    git(repo, 'gc', '-q');
    const gitDir = join(repo, '.git');
    const dir = join(root, 'checkouts');
    mkdirSync(dir, { mode: 0o700 });
    mkdirSync(join(root, 'home', '.factory'), { recursive: true });
    console.log(
      `repository: ${git(repo, 'ls-files').split('\n').length} files, work tree + .git ${mib((await diskUsage(repo)).bytes)} (.git ${mib((await diskUsage(gitDir)).bytes)}); median of ${RUNS}: time, disk of what one checkout adds`,
    );
    const droidEnv = { HOME: join(root, 'home') };
    const hosts: Array<[string, GitHost]> = [['sandbox off', { sandbox: { mode: 'off' }, droidEnv }]];
    if (existsSync(BWRAP)) hosts.unshift(['in bwrap', { sandbox: sandboxSpecFor(BWRAP, join(root, 'state'), null), droidEnv }]);
    let last = plannedCheckout('none', dir, { top: repo, gitDir, prefix: '' });
    for (const [label, host] of hosts) {
      await row(`controller checkout (branch + clone --shared), ${label}`, async (i) => {
        last = await makeCheckout(host, plannedCheckout(`${label.replace(/ /g, '-')}-${i}`, dir, { top: repo, gitDir, prefix: '' }), repo);
        return [last.path];
      });
    }
    await row('bare git clone --shared', (i) => (git(root, 'clone', '-q', '--shared', gitDir, join(root, `clone-${i}`)), [join(root, `clone-${i}`)]));
    await row('bare git worktree add (+ its .git/worktrees entry)', (i) => {
      git(repo, 'worktree', 'add', '-q', '-b', `wt-${i}`, join(root, `wt-${i}`));
      return [join(root, `wt-${i}`), join(gitDir, 'worktrees', `wt-${i}`)];
    });
    const syncs: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      writeFileSync(join(last.path, `turn-${i}.txt`), 'work\n');
      git(last.path, 'add', '-A');
      git(last.path, 'commit', '-q', '-m', `turn ${i}`);
      const host = hosts[0]![1];
      syncs.push(await timed(() => syncBranch(host, last)));
    }
    console.log(`  bring one turn's commit back into the repository (${hosts[0]![0]}, per writer turn): ${median(syncs).toFixed(0)} ms`);
    if (existsSync(BWRAP)) {
      console.log('what a hostile turn can do to the repository (bwrap, narrowest binds that still commit):');
      await securityRows(root);
    }
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await main();
