/**
 * Per-session checkouts (issue 21) end to end: the built server over stdio,
 * real workers in the sandbox, the real droid CLI, the scripted model. Two
 * writer sessions of one repository run at the same time and commit on
 * their own branches while the repository's own checkout stays as it was;
 * archiving refuses while work would be lost and removes the checkout (never
 * the branch) once it is committed; a controller kill -9 mid-turn keeps the
 * checkout; what may not have a checkout is refused with nothing recorded.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { messageText, script } from '../../../src/testbed/scripted-model.js';
import { gitRepo } from '../../support/git-repo.js';
import type { RunningServer } from '../../support/mcp-server.js';
import { makeContext, tearDownEach, waitForNoDroids, type E2EContext } from '../../support/e2e-context.js';

const TAG = `e2e-worktree-${process.pid}-${Date.now()}`;
let ctx: E2EContext;
let server: RunningServer;
let checkouts: string;

/** Sleeps, writes `<name>.txt` and commits it (the sleep makes two turns overlap). */
const WORK = [
  'set -e',
  'sleep "$2"',
  'echo "$1" > "$1.txt"',
  'git add "$1.txt"',
  'git -c user.name=droid -c user.email=droid@example.com commit -q -m "work $1"',
  'echo "DONE $1"',
].join('\n');
/** Commits whatever is in the work tree. */
const SAVE = ['set -e', 'git add -A', 'git -c user.name=droid -c user.email=droid@example.com commit -q -m "save $1"', 'echo SAVED'].join('\n');

const execute = (command: string) => ({ name: 'Execute', arguments: { command, riskLevel: 'low', riskLevelReason: 'test' } });
const turn = (command: string) => `work ${script({ steps: [execute(command)] })}`;

interface Commits {
  branch: string;
  ahead: number;
  commits: Array<{ sha: string; subject: string }>;
  truncated: number;
  inRepository: boolean;
}
interface Status {
  session: string;
  agentState: string;
  workspace: string;
  checkout?: { isolation: string; path: string; branch: string; base: string | null; repository: string; state: string };
  latestRun: {
    run: string;
    state: string;
    startedAt: string | null;
    endedAt: string | null;
    error: { code: string } | null;
    changes: { added: string[] } | null;
    commits?: Commits | null;
  };
}

function git(dir: string, ...args: string[]): string {
  return execFileSync('git', ['-C', dir, ...args], {
    encoding: 'utf8',
    env: { ...process.env, GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null' },
  }).trim();
}

async function settle(session: string): Promise<Status> {
  for (;;) {
    const waited = await server.ok<{ sessions: Status[]; timedOut: boolean }>('droid_wait_for_sessions', { sessions: [session], timeoutSeconds: 30 });
    if (!waited.timedOut) return waited.sessions[0]!;
  }
}

async function create(key: string, workspace: string, prompt: string, over: Record<string, unknown> = {}): Promise<string> {
  const accepted = await server.ok<{ metadata: { session: string } }>('droid_create_session', {
    requestKey: key,
    workspace,
    prompt,
    replyTo: null,
    autonomy: 'high',
    isolation: 'worktree',
    ...over,
  });
  return accepted.metadata.session;
}

async function send(key: string, session: string, prompt: string): Promise<Status> {
  await server.ok('droid_send_message', { requestKey: key, session, prompt });
  return settle(session);
}

function journal(): string {
  const path = join(ctx.stateDir, 'journal.jsonl');
  return existsSync(path) ? readFileSync(path, 'utf8') : '';
}

let repo: string;
let base: string;

beforeAll(async () => {
  ctx = await makeContext(TAG);
  checkouts = join(ctx.root, 'checkouts');
  mkdirSync(checkouts, { mode: 0o700 });
  repo = ctx.workspace('repo');
  gitRepo(repo, { 'README.md': 'base\n', 'work.sh': WORK, 'save.sh': SAVE });
  base = git(repo, 'rev-parse', 'HEAD');
  server = await ctx.start({ worktrees: { directory: checkouts } });
});
tearDownEach(TAG, () => ({ server, ctx }));

describe('isolation: "worktree"', () => {
  it('two writer sessions of one repository overlap and commit on their own branches; the repository checkout is untouched', async () => {
    // The host offers checkouts, and says so.
    expect((await server.ok<{ policy: { worktrees: boolean } }>('droid_list_workspaces')).policy.worktrees).toBe(true);
    const [a, b] = await Promise.all([create('wt-a', repo, turn('sh work.sh a 3')), create('wt-b', repo, turn('sh work.sh b 3'))]);
    const [sa, sb] = await Promise.all([settle(a), settle(b)]);
    for (const [s, name] of [
      [sa, 'a'],
      [sb, 'b'],
    ] as const) {
      expect(s.latestRun).toMatchObject({ state: 'succeeded', error: null });
      expect(s.checkout).toEqual({
        isolation: 'worktree',
        path: join(checkouts, s.session),
        branch: `droid/${s.session}`,
        base,
        repository: repo,
        state: 'ready',
      });
      expect(s.latestRun.commits).toMatchObject({
        branch: `droid/${s.session}`,
        ahead: 1,
        commits: [{ subject: `work ${name}` }],
        truncated: 0,
        inRepository: true,
      });
      // The branch is in the repository, holding the turn's commit, and only that session's file.
      expect(git(repo, 'log', '-1', '--format=%s', `droid/${s.session}`)).toBe(`work ${name}`);
      expect(git(repo, 'ls-tree', '--name-only', `droid/${s.session}`).split('\n').sort()).toEqual(['README.md', `${name}.txt`, 'save.sh', 'work.sh']);
      expect(s.latestRun.changes?.added).toEqual([`${name}.txt`]);
    }
    // Both turns ran at the same time.
    const span = (s: Status) => [Date.parse(s.latestRun.startedAt!), Date.parse(s.latestRun.endedAt!)] as const;
    const [aStart, aEnd] = span(sa);
    const [bStart, bEnd] = span(sb);
    process.stderr.write(`overlap: a ${sa.latestRun.startedAt} → ${sa.latestRun.endedAt}, b ${sb.latestRun.startedAt} → ${sb.latestRun.endedAt}\n`);
    expect(aStart).toBeLessThan(bEnd);
    expect(bStart).toBeLessThan(aEnd);
    // The repository's own checkout: same HEAD, same branch, nothing changed in its tree.
    expect(git(repo, 'rev-parse', 'HEAD')).toBe(base);
    expect(git(repo, 'symbolic-ref', '--short', 'HEAD')).toBe('main');
    expect(git(repo, 'status', '--porcelain', '--untracked-files=all')).toBe('');
    expect(git(repo, 'rev-parse', 'main')).toBe(base);
  });

  it("two forks of one session run at once in checkouts of their own, on their own branches, each with the source's history (issue 40)", async () => {
    // The source works in the repository itself (reader turn): its conversation is what the forks start from.
    const source = await create('wt-fork-src', repo, `fork-source-zz1 ${script({ text: 'source says hello' })}`, { isolation: 'none', autonomy: 'off' });
    expect((await settle(source)).latestRun.state).toBe('succeeded');
    const fork = (key: string, name: string) =>
      create(key, repo, `fork-${name}-zz2 ${script({ steps: [execute(`sh work.sh ${name} 3`)] })}`, { forkFrom: { session: source } });
    const [fa, fb] = await Promise.all([fork('wt-fork-a', 'fa'), fork('wt-fork-b', 'fb')]);
    const [sa, sb] = await Promise.all([settle(fa), settle(fb)]);
    for (const [s, name] of [
      [sa, 'fa'],
      [sb, 'fb'],
    ] as const) {
      expect(s.latestRun, JSON.stringify(s.latestRun.error)).toMatchObject({ state: 'succeeded', error: null });
      expect(s.checkout).toMatchObject({ path: join(checkouts, s.session), branch: `droid/${s.session}`, base, state: 'ready' });
      expect(git(repo, 'log', '-1', '--format=%s', `droid/${s.session}`)).toBe(`work ${name}`);
      // The fork's turn ran in its checkout, with the source's history.
      const request = ctx.bed.model.requests.find((r) => r.messages.some((m) => m.role === 'user' && messageText(m).includes(`fork-${name}-zz2`)))!;
      expect(request.messages.map(messageText).join('\n')).toContain('fork-source-zz1');
    }
    const overlap = (x: Status, y: Status) => Date.parse(x.latestRun.startedAt!) < Date.parse(y.latestRun.endedAt!);
    expect(overlap(sa, sb) && overlap(sb, sa)).toBe(true);
    // The repository's own checkout is untouched; a fork of a checkout session needs a checkout of its own.
    expect(git(repo, 'status', '--porcelain', '--untracked-files=all')).toBe('');
    const refused = await server.call('droid_create_session', {
      requestKey: 'wt-fork-none',
      workspace: repo,
      prompt: 'x',
      replyTo: null,
      forkFrom: { session: fa },
      isolation: 'none',
    });
    expect((refused.structured.error as { code: string }).code).toBe('fork_isolation_required');
  });

  it('archive refuses while work is uncommitted, removes the checkout once it is committed, and keeps the branch', async () => {
    const s = await create('wt-archive', repo, turn('sh work.sh c 0'));
    const first = await settle(s);
    expect(first.latestRun.state).toBe('succeeded');
    const second = await send('wt-archive-2', s, turn('echo draft > draft.txt && echo WROTE'));
    expect(second.latestRun.state).toBe('succeeded');
    process.stderr.write(`status after two turns: ${JSON.stringify(second, null, 2)}\n`);
    expect(second.latestRun.commits).toMatchObject({ ahead: 1, inRepository: true });
    const path = second.checkout!.path;

    const before = journal();
    const refused = await server.call('droid_update_session', { session: s, archived: true });
    expect(refused.isError).toBe(true);
    expect(refused.structured).toMatchObject({ error: { code: 'checkout_has_unsaved_work', message: expect.stringContaining('draft.txt') } });
    expect(journal()).toBe(before);
    expect(readFileSync(join(path, 'draft.txt'), 'utf8')).toBe('draft\n');

    const third = await send('wt-archive-3', s, turn('sh save.sh draft'));
    expect(third.latestRun.commits).toMatchObject({ ahead: 2, commits: [{ subject: 'save draft' }, { subject: 'work c' }], inRepository: true });
    const archived = await server.ok<{ status: Status }>('droid_update_session', { session: s, archived: true });
    expect(archived.status.checkout).toMatchObject({ state: 'removed', branch: `droid/${s}` });
    expect(existsSync(path)).toBe(false);
    expect(git(repo, 'log', '--format=%s', `droid/${s}`).split('\n').slice(0, 2)).toEqual(['save draft', 'work c']);
    // Gone for good: a follow-up is refused and names the branch.
    const again = await server.call('droid_send_message', { requestKey: 'wt-archive-4', session: s, prompt: 'more' });
    expect(again.structured).toMatchObject({ error: { code: 'checkout_removed', message: expect.stringContaining(`droid/${s}`) } });
  });

  it('refuses a workspace outside any git work tree, a read-only session, and any session in the checkouts directory, recording nothing', async () => {
    const plain = ctx.workspace('not-a-repo');
    const before = journal();
    const branches = git(repo, 'branch', '--list', 'droid/*');
    const notGit = await server.call('droid_create_session', { requestKey: 'wt-plain', workspace: plain, prompt: 'x', replyTo: null, isolation: 'worktree' });
    expect(notGit.structured).toMatchObject({ error: { code: 'isolation_not_a_repository' } });
    const reader = await server.call('droid_create_session', {
      requestKey: 'wt-reader',
      workspace: repo,
      prompt: 'x',
      replyTo: null,
      autonomy: 'off',
      isolation: 'worktree',
    });
    expect(reader.structured).toMatchObject({ error: { code: 'isolation_not_for_readers', action: expect.stringContaining('read-only') } });
    // Not even a session without a checkout may work where the checkouts are (it could rewrite one's .git).
    const over = await server.call('droid_create_session', { requestKey: 'wt-over', workspace: checkouts, prompt: 'x', replyTo: null });
    expect(over.structured).toMatchObject({ error: { code: 'workspace_in_checkouts' } });
    expect(journal()).toBe(before);
    expect(git(repo, 'branch', '--list', 'droid/*')).toBe(branches);
  });

  it('a controller kill -9 mid-turn keeps the checkout, and the restart lists it', async () => {
    const s = await create('wt-crash', repo, turn('sh work.sh d 60'));
    for (;;) {
      const status = (await server.ok<{ status: Status }>('droid_get_session_status', { session: s })).status;
      if (status.latestRun.state === 'running' && status.checkout?.state === 'ready') break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const path = join(checkouts, s);
    process.kill(server.pid, 'SIGKILL');
    await waitForNoDroids(TAG, 15_000);
    server = await ctx.start({ worktrees: { directory: checkouts } });
    const status = (await server.ok<{ status: Status }>('droid_get_session_status', { session: s })).status;
    expect(status.agentState).toBe('unknown');
    expect(status.checkout).toMatchObject({ state: 'ready', path });
    expect(existsSync(join(path, 'work.sh'))).toBe(true);
    for (let i = 0; i < 50 && !server.stderr().includes('kept the checkout'); i++) await new Promise((r) => setTimeout(r, 100));
    expect(server.stderr()).toContain('kept the checkout');
    expect(server.stderr()).toContain(path);
  });
});
