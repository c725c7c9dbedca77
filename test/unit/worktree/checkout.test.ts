/**
 * Session checkouts (issue 21) below the tools: the git of src/worktree/
 * against real repositories (unconfined here; the wire and e2e tiers run
 * it in bwrap), the pure placement and inventory rules, and the
 * controller's refusals through SessionCheckouts with a stand-in state.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SessionCheckouts } from '../../../src/controller/checkouts/checkouts.js';
import { fingerprint, type Intent } from '../../../src/controller/acceptance/fingerprint.js';
import type { CheckoutRecord } from '../../../src/shared/checkout-types.js';
import { ControllerError } from '../../../src/shared/public-error.js';
import type { SessionRecord } from '../../../src/shared/records.js';
import { commitsAhead, inspectRepository, makeCheckout } from '../../../src/worktree/checkout.js';
import { removalBlocker } from '../../../src/worktree/removal.js';
import { MAX_SYNC_BYTES, syncBranch } from '../../../src/worktree/sync.js';
import { classifyCheckouts } from '../../../src/worktree/inventory.js';
import { alsoWritableOf, placementProblem, plannedCheckout, turnWorkspace } from '../../../src/worktree/plan.js';
import { checkCheckouts, gitVersionProblem } from '../../../src/ops/setup/doctor-checkouts.js';
import { StateStore } from '../../../src/store/store.js';
import { resolveWorkspace } from '../../../src/controller/workspaces.js';
import { acceptedRun } from '../../../src/shared/records.js';
import { gitRepo } from '../../support/git-repo.js';
import { commitIn, git, HOST, makeIn, useFixture } from '../../support/checkout-fixture.js';

let root: string, repo: string, dir: string;
useFixture((f) => ({ root, repo, dir } = f));
const made = (id = 's1', workspace = repo) => makeIn(dir, id, workspace);

describe('a checkout on disk', () => {
  it('is made from HEAD on the session branch, in the same subfolder, with the branch in the repository', async () => {
    const c = await made('s1', join(repo, 'sub'));
    expect(c).toMatchObject({
      state: 'ready',
      base: git(repo, 'rev-parse', 'HEAD'),
      branch: 'droid/s1',
      path: join(dir, 's1'),
      workspace: join(dir, 's1', 'sub'),
    });
    expect(git(repo, 'rev-parse', 'droid/s1')).toBe(c.base);
    expect(git(c.path, 'symbolic-ref', '--short', 'HEAD')).toBe('droid/s1');
    // Only a subfolder workspace needs the checkout's git folder writable besides.
    const session = { workspace: join(repo, 'sub'), checkout: c } as SessionRecord;
    expect(turnWorkspace(session)).toBe(join(dir, 's1', 'sub'));
    expect(alsoWritableOf(session)).toEqual([join(dir, 's1', '.git')]);
    expect(alsoWritableOf({ ...session, checkout: { ...c, workspace: c.path } })).toEqual([]);
  });

  it('never touches a folder already at its place', async () => {
    mkdirSync(join(dir, 's1'));
    writeFileSync(join(dir, 's1', 'keep.txt'), 'mine\n');
    await expect(made('s1')).rejects.toMatchObject({ code: 'checkout_failed' });
    expect(execFileSync('ls', [join(dir, 's1')], { encoding: 'utf8' }).trim()).toBe('keep.txt');
  });

  it('resumes after a crash between making its folder or branch and recording it made', async () => {
    const base = git(repo, 'rev-parse', 'HEAD');
    const planned = plannedCheckout('s1', dir, (await inspectRepository(HOST, repo))!);
    // Crash 1: the folder made, nothing else.
    mkdirSync(planned.path);
    expect(await makeCheckout(HOST, planned, repo)).toMatchObject({ state: 'ready', base });
    // Crash 2: the branch and the clone made, the record still pending; the workspace's HEAD moved on since.
    commitIn(repo, 'later.txt', 'later');
    expect(await makeCheckout(HOST, planned, repo)).toMatchObject({ state: 'ready', base });
    expect(git(planned.path, 'rev-parse', 'HEAD')).toBe(base);
    // Crash 3: only the branch (the folder never made).
    rmSync(planned.path, { recursive: true });
    expect(await makeCheckout(HOST, planned, repo)).toMatchObject({ state: 'ready', base });
  });

  it('brings the branch back by fast-forward only; a diverged repository branch is never overwritten', async () => {
    const c = await made();
    commitIn(c.path, 'one.txt', 'one');
    expect(await syncBranch(HOST, c)).toBeNull();
    expect(await commitsAhead(HOST, c, true)).toMatchObject({ ahead: 1, commits: [{ subject: 'one' }], inRepository: true });
    // A person commits on the session branch in the repository meanwhile.
    git(repo, 'update-ref', 'refs/heads/droid/s1', git(repo, 'commit-tree', '-p', 'droid/s1', '-m', 'theirs', 'droid/s1^{tree}'));
    const theirs = git(repo, 'rev-parse', 'droid/s1');
    commitIn(c.path, 'two.txt', 'two');
    expect(await syncBranch(HOST, c)).toContain('did not take the branch');
    expect(git(repo, 'rev-parse', 'droid/s1')).toBe(theirs);
    expect(await commitsAhead(HOST, c, false)).toMatchObject({ ahead: 2, inRepository: false });
  });

  it('brings back no more than the cap, and says why on the commits it reports', async () => {
    const c = await made();
    execFileSync('sh', ['-c', `head -c ${MAX_SYNC_BYTES + 1024 * 1024} /dev/urandom > ${join(c.path, 'big.bin')}`]);
    git(c.path, 'add', 'big.bin');
    git(c.path, 'commit', '-q', '-m', 'big');
    const problem = await syncBranch(HOST, c);
    expect(problem).toMatch(/take 101\.\d MiB, over the 100\.0 MiB a turn may bring back/);
    expect(git(repo, 'rev-parse', 'droid/s1')).toBe(c.base);
    expect(await commitsAhead(HOST, c, false, problem!)).toMatchObject({ ahead: 1, inRepository: false, notBroughtBack: problem });
  });

  it('brings nothing back from a checkout whose .git was swapped for a gitfile or a link', async () => {
    const c = await made();
    // Another repository whose branch of the same name the turn wants taken as its own.
    const other = join(root, 'other');
    git(root, 'clone', '-q', repo, other);
    git(other, 'checkout', '-q', '-b', 'droid/s1', 'origin/droid/s1');
    commitIn(other, 'planted.txt', 'planted');
    const gitDir = join(c.path, '.git');
    execFileSync('mv', [gitDir, `${gitDir}.moved`]);
    writeFileSync(gitDir, `gitdir: ${join(other, '.git')}\n`);
    expect(await syncBranch(HOST, c)).toContain('not a real directory');
    expect(await removalBlocker(HOST, c)).toContain('not a real directory');
    rmSync(gitDir);
    symlinkSync(join(other, '.git'), gitDir);
    expect(await syncBranch(HOST, c)).toContain('not a real directory');
    expect(git(repo, 'rev-parse', 'droid/s1')).toBe(c.base);
  });

  it("removes a cut-short fetch's temporary objects from the repository, and only those", async () => {
    const c = await made();
    commitIn(c.path, 'one.txt', 'one');
    const pack = join(repo, '.git', 'objects', 'pack');
    writeFileSync(join(pack, 'tmp_pack_someone_elses'), '');
    // A fetch killed half-way: its temporary pack stays behind.
    const dying = join(root, 'dying-git');
    writeFileSync(dying, `#!/bin/sh\ncase " $* " in *" fetch "*) : > ${pack}/tmp_pack_half; exit 137;; esac\nexec /usr/bin/git "$@"\n`, { mode: 0o755 });
    expect(await syncBranch({ ...HOST, gitPath: dying }, c)).toContain('did not take the branch');
    expect(readdirSync(pack).filter((n) => n.startsWith('tmp_'))).toEqual(['tmp_pack_someone_elses']);
  });

  it('blocks removal for uncommitted, untracked or unheld work, and only then allows it', async () => {
    const c = await made();
    expect(await removalBlocker(HOST, c)).toBeNull();
    writeFileSync(join(c.path, 'README.md'), 'edited\n');
    expect(await removalBlocker(HOST, c)).toContain('README.md');
    git(c.path, 'checkout', '-q', '--', 'README.md');
    writeFileSync(join(c.path, 'new.txt'), 'untracked\n');
    expect(await removalBlocker(HOST, c)).toContain('new.txt');
    rmSync(join(c.path, 'new.txt'));
    commitIn(c.path, 'x.txt', 'not yet back');
    expect(await removalBlocker(HOST, c)).toContain('on none of the repository');
    await syncBranch(HOST, c);
    expect(await removalBlocker(HOST, c)).toBeNull();
    // A commit on another branch of the checkout is work too.
    git(c.path, 'checkout', '-q', '-b', 'side');
    commitIn(c.path, 'side.txt', 'side');
    git(c.path, 'checkout', '-q', 'droid/s1');
    expect(await removalBlocker(HOST, c)).toContain('on none of the repository');
    git(c.path, 'branch', '-q', '-D', 'side');
    writeFileSync(join(c.path, 'README.md'), 'stashed\n');
    git(c.path, 'stash', '-q');
    expect(await removalBlocker(HOST, c)).toContain('on none of the repository');
  });
});

describe('where checkouts may go, and what is in the directory', () => {
  it('refuses a workspace inside the checkouts directory or a directory inside the repository', () => {
    const r = { top: repo, gitDir: join(repo, '.git'), prefix: '' };
    expect(placementProblem(repo, r, dir)).toBeNull();
    expect(placementProblem(join(dir, 'x'), { ...r, top: join(dir, 'x') }, dir)).toContain('inside the checkouts directory');
    expect(placementProblem(repo, r, join(repo, 'checkouts'))).toContain('inside this repository');
  });

  it('classifies folders as owned, orphaned, missing or kept', () => {
    const rec = (id: string, state: CheckoutRecord['state']) =>
      ({ id, checkout: { ...plannedCheckout(id, dir, { top: repo, gitDir: join(repo, '.git'), prefix: '' }), state } }) as SessionRecord;
    const sessions = [rec('a', 'ready'), rec('b', 'ready'), rec('gone', 'ready'), rec('old', 'removed'), { id: 'plain' } as SessionRecord];
    expect(classifyCheckouts(dir, ['a', 'b', 'old', 'stray'], sessions, new Set(['b']))).toEqual({
      directory: dir,
      owned: [join(dir, 'a'), join(dir, 'b')],
      orphans: [join(dir, 'old'), join(dir, 'stray')],
      missing: [join(dir, 'gone')],
      kept: [join(dir, 'b')],
    });
  });
});

describe('the controller: who may have a checkout', () => {
  function checkouts(over: { worktrees?: { directory: string; maxCheckouts: number } | null; sessions?: SessionRecord[]; approved?: string[] } = {}) {
    const sessions = new Map((over.sessions ?? []).map((s) => [s.id, s]));
    const deps = {
      sandbox: { mode: 'off' as const },
      droidEnv: {},
      sandboxUnavailable: null,
      worktrees: over.worktrees === undefined ? { directory: dir, maxCheckouts: 2 } : over.worktrees,
      resolveWorkspace: (path: string) => resolveWorkspace(path, over.approved ?? [root]),
    };
    const store = { sessions, runsBySession: () => [] };
    const log = { info: () => undefined, warn: () => undefined } as never;
    return new SessionCheckouts({ store, log, session: (id) => sessions.get(id)!, serialized: (fn) => fn(), commit: async () => undefined }, deps);
  }
  const refusal = (p: Promise<unknown> | (() => unknown)) =>
    (typeof p === 'function' ? Promise.resolve().then(p) : p).then(
      () => null,
      (err: unknown) => (err instanceof ControllerError ? err.code : String(err)),
    );

  it('no isolation asks nothing of the host, even with checkouts off', async () => {
    expect(await checkouts({ worktrees: null }).intent(undefined, 'off', join(root, 'anything'))).toBeNull();
    expect(await checkouts({ worktrees: null }).intent('none', 'high', join(root, 'anything'))).toBeNull();
  });

  it('refuses when the host has checkouts off, for readers, and outside a git work tree', async () => {
    expect(await refusal(checkouts({ worktrees: null }).intent('worktree', 'high', repo))).toBe('isolation_unavailable');
    expect(await refusal(checkouts().intent('worktree', 'off', repo))).toBe('isolation_not_for_readers');
    mkdirSync(join(root, 'plain'));
    expect(await refusal(checkouts().intent('worktree', 'high', join(root, 'plain')))).toBe('isolation_not_a_repository');
    const intent = (await checkouts().intent('worktree', undefined, repo))!;
    // A default autonomy of off is refused once the settings are resolved.
    expect(await refusal(() => checkouts().plan(intent, 's9', 'off'))).toBe('isolation_not_for_readers');
  });

  it('refuses a checkout of a repository whose top or git folder is outside the approved roots', async () => {
    // Approved: only the repository's subfolder; the controller would write branches into the repository's .git above it.
    expect(await refusal(checkouts({ approved: [join(repo, 'sub')] }).intent('worktree', 'high', join(repo, 'sub')))).toBe('isolation_not_possible');
    // A work tree inside the approved root whose .git file points at a repository outside it.
    const elsewhere = join(root, 'elsewhere');
    mkdirSync(elsewhere);
    gitRepo(elsewhere, { 'x.txt': 'x\n' });
    const linked = join(repo, 'sub', 'linked');
    mkdirSync(linked);
    git(elsewhere, 'worktree', 'add', '-q', '-b', 'side', join(linked, 'wt'));
    expect(await refusal(checkouts({ approved: [repo] }).intent('worktree', 'high', join(linked, 'wt')))).toBe('isolation_not_possible');
    expect(await refusal(checkouts({ approved: [repo] }).intent('worktree', 'high', repo))).toBeNull();
  });

  it('refuses any session, checkout or not, whose workspace overlaps the checkouts directory', async () => {
    const c = await made();
    for (const workspace of [dir, root, c.path, join(c.path, 'sub')]) {
      for (const isolation of [undefined, 'none', 'worktree'] as const)
        expect(await refusal(checkouts().intent(isolation, 'high', workspace)), `${workspace} ${isolation}`).toBe('workspace_in_checkouts');
    }
    expect(await refusal(checkouts().intent(undefined, 'high', repo))).toBeNull();
  });

  it("archive takes the checkout's writer lock around the check and the removal, and refuses while a turn holds it", async () => {
    const c = await made();
    const session = { id: 's1', workspace: repo, checkout: c } as SessionRecord;
    const taken: string[] = [];
    let released = 0;
    const lock = (claim: { workspace: string; writer: boolean }) => (taken.push(`${claim.workspace} ${claim.writer}`), () => void released++);
    const removal = await checkouts({ sessions: [session] }).beginRemoval('s1', () => undefined, lock);
    expect(taken).toEqual([`${c.path} true`]);
    expect(removal.checkout?.state).toBe('removed');
    expect(released).toBe(0);
    removal.done();
    expect(released).toBe(1);
    // Another session's turn in the checkout: refused, nothing removed.
    const kept = await made('s2');
    const busyNow = checkouts({ sessions: [{ id: 's2', workspace: repo, checkout: kept } as SessionRecord] }).beginRemoval(
      's2',
      () => undefined,
      () => null,
    );
    expect(await refusal(busyNow)).toBe('session_busy');
    expect(existsSync(kept.path)).toBe(true);
  });

  it('refuses a checkout beyond the host limit; removed ones do not count', async () => {
    const intent = (await checkouts().intent('worktree', 'high', repo))!;
    const session = (id: string, state: CheckoutRecord['state']) => ({ id, checkout: { ...plannedCheckout(id, dir, intent.repo), state } }) as SessionRecord;
    expect(checkouts({ sessions: [session('a', 'ready'), session('b', 'removed')] }).plan(intent, 'c', 'high').state).toBe('pending');
    expect(await refusal(() => checkouts({ sessions: [session('a', 'ready'), session('b', 'pending')] }).plan(intent, 'c', 'high'))).toBe(
      'checkout_limit_reached',
    );
  });

  it('fingerprints isolation only when asked for, so earlier requests replay unchanged', () => {
    const intent: Intent = { kind: 'create', target: repo, prompt: 'p', interrupt: false, replyTo: null, title: null, labels: [] };
    expect(fingerprint({ ...intent })).toBe(fingerprint({ ...intent, isolation: undefined }));
    expect(fingerprint({ ...intent, isolation: 'worktree' })).not.toBe(fingerprint(intent));
  });
});

describe('doctor: session checkouts', () => {
  it('counts the checkouts sessions own, their disk, and names the orphans, from the state as written', async () => {
    const stateDir = join(root, 'state');
    const owned = await made('owned');
    mkdirSync(join(dir, 'stray'));
    writeFileSync(join(dir, 'stray', 'left.txt'), 'x'.repeat(10_000));
    const store = await StateStore.open(stateDir);
    const run = acceptedRun({
      id: 'r1',
      sessionId: 'owned',
      seq: 1,
      kind: 'create',
      requestKey: 'k',
      fingerprint: 'f',
      interrupt: false,
      settings: { model: 'm', autonomy: 'high', reasoningEffort: null },
      acceptedAt: 'now',
    });
    const session: SessionRecord = {
      id: 'owned',
      createdAt: 'now',
      updatedAt: 'now',
      workspace: repo,
      title: null,
      labels: [],
      archived: false,
      replyTo: null,
      droidSessionId: null,
      headRunId: 'r1',
      factoryTitle: null,
      checkout: owned,
    };
    await store.commit({ sessions: [session], runs: [run] });
    await store.close();
    expect(await checkCheckouts(undefined, stateDir)).toBeNull();
    const check = (await checkCheckouts(dir, stateDir))!;
    expect(check).toMatchObject({ status: 'warn', action: expect.stringContaining('remove it by hand') });
    expect(check.detail).toMatch(new RegExp(`^1 checkout\\(s\\) in ${dir}, \\d+\\.\\d MiB in all; 1 orphaned: ${join(dir, 'stray')}$`));
    rmSync(join(dir, 'stray'), { recursive: true });
    expect(await checkCheckouts(dir, stateDir)).toMatchObject({ status: 'ok' });
  });

  it('warns on a git older than the 2024 fixes for repositories a turn controls', () => {
    for (const old of ['git version 2.39.3', 'git version 2.34.1', 'git version 2.45.0', 'git version 2.43.3'])
      expect(gitVersionProblem(old)).toContain('predates');
    for (const ok of ['git version 2.39.5', 'git version 2.45.1', 'git version 2.46.0', 'git version 2.43.4 (Apple Git-1)', 'git version 3.0.0'])
      expect(gitVersionProblem(ok)).toBeNull();
    expect(gitVersionProblem('')).toContain('could not be read');
  });
});
