/**
 * What the checkout unit tests share: a private folder with a repository
 * (`repo`, with a subfolder `sub`) and an empty checkouts directory, git
 * without the user's config, and checkouts made the controller's way.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach } from 'vitest';
import type { CheckoutRecord } from '../../src/shared/checkout-types.js';
import { inspectRepository, makeCheckout } from '../../src/worktree/checkout.js';
import { plannedCheckout } from '../../src/worktree/plan.js';
import { gitRepo } from './git-repo.js';

export const HOST = { sandbox: { mode: 'off' as const }, droidEnv: {} };

export const git = (cwd: string, ...args: string[]) =>
  execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', ...args], {
    cwd,
    encoding: 'utf8',
    env: { ...process.env, GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null' },
  }).trim();

export interface Fixture {
  root: string;
  repo: string;
  dir: string;
}

/** A fresh fixture for each test (handed to `take`), removed after it. */
export function useFixture(take: (fixture: Fixture) => void): void {
  let root: string | null = null;
  beforeEach(() => {
    const fixture = fixtureRepo();
    root = fixture.root;
    take(fixture);
  });
  afterEach(() => {
    if (root) rmSync(root, { recursive: true, force: true });
  });
}

function fixtureRepo(): Fixture {
  const root = realpathSync(mkdtempSync(join(tmpdir(), 'checkout-unit-')));
  const repo = join(root, 'repo');
  const dir = join(root, 'checkouts');
  mkdirSync(join(repo, 'sub'), { recursive: true });
  mkdirSync(dir);
  gitRepo(repo, { 'README.md': 'base\n', 'sub/a.txt': 'a\n' });
  return { root, repo, dir };
}

/** The checkout of session `id` in `dir`, made from `workspace` as a first turn makes it. */
export async function makeIn(dir: string, id: string, workspace: string): Promise<CheckoutRecord> {
  const r = (await inspectRepository(HOST, workspace))!;
  return makeCheckout(HOST, plannedCheckout(id, dir, r), workspace);
}

export function commitIn(path: string, file: string, message: string): void {
  writeFileSync(join(path, file), `${message}\n`);
  git(path, 'add', file);
  git(path, 'commit', '-q', '-m', message);
}
