/**
 * Session checkouts (issue 21) against what a hostile turn can do to its own
 * checkout: rig the config a git serving from it reads, swap its .git, and
 * hide work from the check before archive removes it. Real git; the sandbox
 * where the guard is the sandbox's.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { SessionRecord } from '../../../src/shared/records.js';
import { checkConfinement, sandboxSpecFor } from '../../../src/sandbox/sandbox.js';
import { alsoWritableOf } from '../../../src/worktree/plan.js';
import { removalBlocker } from '../../../src/worktree/removal.js';
import { syncBranch } from '../../../src/worktree/sync.js';
import { commitIn, git, HOST, makeIn, useFixture } from '../../support/checkout-fixture.js';

let root: string, repo: string, dir: string;
useFixture((f) => ({ root, repo, dir } = f));
const made = (id = 's1', workspace = repo) => makeIn(dir, id, workspace);

const BWRAP = ['/usr/bin/bwrap', '/bin/bwrap'].find((p) => existsSync(p));

describe.runIf(BWRAP)('bringing a branch back from a checkout whose config the turn rigged', () => {
  /** What of the repository the sync must not change: config, hooks, every file under .git/hooks. */
  const fingerprint = () => [readFileSync(join(repo, '.git', 'config'), 'utf8'), ...readdirSync(join(repo, '.git', 'hooks')).sort()].join('\n');

  it("never runs the checkout's git with the repository writable: a command its config names cannot touch the repository", async () => {
    const host = { sandbox: sandboxSpecFor(BWRAP!, join(root, 'state'), null), droidEnv: { HOME: join(root, 'home') } };
    // Stands in for an older git that runs a command from the serving repository's config (git < 2.39.4 had such paths);
    // this git runs it for any call that reads the checkout (its folder as working directory or named in the arguments).
    const oldGit = join(root, 'old-git');
    writeFileSync(
      oldGit,
      `#!/bin/sh\nfor d in "$PWD" "$@"; do if [ -f "$d/.git/config" ]; then c=$(/usr/bin/git config -f "$d/.git/config" --get test.evil) && sh -c "$c" >/dev/null 2>&1; fi; done\nexec /usr/bin/git "$@"\n`,
      { mode: 0o755 },
    );
    const c = await made();
    commitIn(c.path, 'one.txt', 'one');
    const main = join(repo, '.git');
    writeFileSync(join(root, 'inc'), `[uploadpack]\n\tpackObjectsHook = touch ${root}/hook-ran\n`);
    const poison: Array<[string, string]> = [
      ['test.evil', `echo 'touch ${root}/pwned' > ${main}/hooks/post-checkout; git config -f ${main}/config core.hooksPath ${root}`],
      ['include.path', join(root, 'inc')],
      ['uploadpack.packObjectsHook', `touch ${root}/hook-ran`],
      ['core.alternateRefsCommand', `touch ${root}/hook-ran`],
      ['core.fsmonitor', `touch ${root}/hook-ran`],
      ['remote.origin.promisor', 'true'],
      ['remote.origin.uploadpack', `touch ${root}/hook-ran; git-upload-pack`],
      ['extensions.partialClone', 'origin'],
    ];
    for (const [key, value] of poison) git(c.path, 'config', key, value);
    const before = fingerprint();
    expect(await syncBranch({ ...host, gitPath: oldGit }, c)).toBeNull();
    expect(fingerprint()).toBe(before);
    expect(existsSync(join(root, 'hook-ran'))).toBe(false);
    // The branch did come back.
    expect(git(repo, 'log', '-1', '--format=%s', 'droid/s1')).toBe('one');
  });
});

describe.runIf(BWRAP)('a turn of a subfolder checkout session', () => {
  it("is not started when the checkout's .git (bound writable besides the workspace) is not a real directory of its own", async () => {
    const c = await made('s1', join(repo, 'sub'));
    const session = { workspace: join(repo, 'sub'), checkout: c } as SessionRecord;
    const confinement = (alsoWritable: string[]) => ({
      workspace: { path: c.workspace, writable: true },
      alsoWritable,
      factoryDir: join(root, 'home', '.factory'),
      factoryEntries: [],
      sessionsCopy: null,
      turnTmp: join(root, 'tmp', 'turn'),
      runtimeDir: null,
      hiddenDirs: [],
      hiddenFiles: [],
    });
    expect(() => checkConfinement(BWRAP!, confinement(alsoWritableOf(session)))).not.toThrow();
    // Another session swapped the checkout's .git for a link to the repository's.
    const gitDir = join(c.path, '.git');
    execFileSync('mv', [gitDir, `${gitDir}.moved`]);
    symlinkSync(join(repo, '.git'), gitDir);
    expect(() => checkConfinement(BWRAP!, confinement(alsoWritableOf(session)))).toThrow(/not a real directory/);
    rmSync(gitDir);
    writeFileSync(gitDir, `gitdir: ${join(repo, '.git')}\n`);
    expect(() => checkConfinement(BWRAP!, confinement(alsoWritableOf(session)))).toThrow(/not a real directory/);
  });
});

describe('removal: work a turn hid from the check', () => {
  /** Gone: the checkout s1 and its branch, so the next case starts afresh. */
  const forget = () => {
    rmSync(join(dir, 's1'), { recursive: true, force: true });
    if (git(repo, 'branch', '--list', 'droid/s1')) git(repo, 'branch', '-q', '-D', 'droid/s1');
  };
  /** A synced checkout with nothing to lose, then `hide` run in it; the check must still name what would be lost. */
  async function blockerAfter(hide: (path: string) => void): Promise<string | null> {
    const c = await made();
    commitIn(c.path, 'kept.txt', 'kept');
    expect(await syncBranch(HOST, c)).toBeNull();
    expect(await removalBlocker(HOST, c)).toBeNull();
    hide(c.path);
    return removalBlocker(HOST, c);
  }

  it('a nested repository with its own commits (committed as a gitlink)', async () => {
    expect(
      await blockerAfter((p) => {
        mkdirSync(join(p, 'sub2'));
        git(join(p, 'sub2'), 'init', '-q');
        commitIn(join(p, 'sub2'), 'deep.txt', 'deep');
        git(p, 'add', 'sub2');
        git(p, 'commit', '-q', '-m', 'gitlink');
        git(p, 'push', '-q', 'origin', 'HEAD');
      }),
    ).toContain('nested repository');
  });

  it('edits hidden by assume-unchanged or skip-worktree', async () => {
    for (const flag of ['--assume-unchanged', '--skip-worktree']) {
      forget();
      const reason = await blockerAfter((p) => {
        writeFileSync(join(p, 'README.md'), 'hidden edit\n');
        git(p, 'update-index', flag, 'README.md');
      });
      expect(reason, flag).toContain('README.md');
    }
  });

  it("new files hidden by the checkout's own ignore rules (info/exclude, core.excludesFile)", async () => {
    expect(
      await blockerAfter((p) => {
        writeFileSync(join(p, '.git', 'info', 'exclude'), '*\n');
        writeFileSync(join(p, 'secret-work.txt'), 'new\n');
      }),
    ).toContain('secret-work.txt');
    forget();
    expect(
      await blockerAfter((p) => {
        writeFileSync(join(root, 'ignore-all'), '*\n');
        git(p, 'config', 'core.excludesFile', join(root, 'ignore-all'));
        writeFileSync(join(p, 'more-work.txt'), 'new\n');
      }),
    ).toContain('more-work.txt');
  });

  it('commits only under refs/remotes, an annotated tag, and a detached commit left only in the reflog', async () => {
    const hides: Array<(p: string) => void> = [
      (p) => {
        commitIn(p, 'r.txt', 'remote only');
        git(p, 'update-ref', 'refs/remotes/origin/hidden', 'HEAD');
        git(p, 'reset', '-q', '--hard', 'HEAD~1');
        git(p, 'reflog', 'expire', '--expire=now', '--all');
      },
      (p) => git(p, 'tag', '-a', '-m', 'a release note that is work too', 'v1'),
      (p) => {
        git(p, 'checkout', '-q', '--detach');
        commitIn(p, 'd.txt', 'detached');
        git(p, 'checkout', '-q', 'droid/s1');
      },
    ];
    for (const [i, hide] of hides.entries()) {
      forget();
      expect(await blockerAfter(hide), `case ${i}`).toContain('on none of the repository');
    }
  });
});
