/**
 * The turn sandbox (bubblewrap) with the real droid CLI at autonomy `high`,
 * where droid itself asks nothing and would write anywhere its user can.
 * Every check looks at the host, never at droid's words.
 */
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { script } from '../../../src/testbed/scripted-model.js';
import { pidsWithEnvTag, waitForNoProcesses } from '../../support/processes.js';
import { prestartWorker } from '../../../src/worker/parent/prestart.js';
import { startPooledWorker } from '../../../src/worker/parent/warm-pool.js';
import { WORKER_ENTRY } from '../../support/paths.js';
import { groupRunning } from '../../../src/worker/parent/process-group.js';
import { newTag, realDroidSpec, runWorkerTurn, useRealDroid } from '../../support/wire-harness.js';
import type { TurnSpec } from '../../../src/worker/contract/protocol.js';
import { sandboxLauncher } from '../../../src/sandbox/sandbox.js';
import { prepareTurnPaths } from '../../../src/sandbox/turn-paths.js';
import { handFd3 } from '../../../src/util/child-fd3.js';

const BWRAP = execFileSync('sh', ['-c', 'command -v bwrap'], { encoding: 'utf8' }).trim();

let root: string;
let workspace: string;
let sibling: string;
let otherRoot: string;
let stateDir: string;
let tokenFile: string;
let tag: string;
const TOKEN = `tok-${randomUUID()}`;

const real = useRealDroid();

function spec(over: Partial<TurnSpec>): TurnSpec {
  tag = newTag();
  root = realpathSync(mkdtempSync(join(tmpdir(), 'sandbox-')));
  workspace = join(root, 'approved', 'project');
  sibling = join(root, 'approved', 'sibling');
  otherRoot = join(root, 'other-root');
  stateDir = join(root, 'state');
  for (const dir of [workspace, sibling, otherRoot, stateDir]) mkdirSync(dir, { recursive: true });
  writeFileSync(join(stateDir, 'state.jsonl'), 'other sessions\n');
  tokenFile = join(root, 'token');
  writeFileSync(tokenFile, TOKEN, { mode: 0o600 });
  const s = realDroidSpec(real.bed, tag, { workspace, autonomy: 'high', ...over });
  s.sandbox = { mode: 'bwrap', bwrapPath: BWRAP, hiddenDirs: [stateDir], hiddenFiles: [tokenFile] };
  return s;
}

afterEach(async () => {
  await waitForNoProcesses(tag, 10_000);
  rmSync(root, { recursive: true, force: true });
});

/** Host processes whose command line contains `needle`. */
function hostProcesses(needle: string): number[] {
  const out = spawnSync('pgrep', ['-f', needle], { encoding: 'utf8' }).stdout.trim();
  return out === ''
    ? []
    : out
        .split('\n')
        .map(Number)
        .filter((pid) => pid !== process.pid);
}

const create = (file_path: string) => ({ name: 'Create', arguments: { file_path, content: 'written\n' } });
const execute = (command: string) => ({ name: 'Execute', arguments: { command, riskLevel: 'low', riskLevelReason: 'test' } });

describe('sandbox: a writer turn at high writes only its workspace', () => {
  it('Create lands in the workspace; to /etc, a sibling, another root and the state directory it fails', async () => {
    const etc = `/etc/droid-mcp-${randomUUID()}`;
    const s = spec({});
    const targets = [etc, join(sibling, 'x.txt'), join(otherRoot, 'x.txt'), join(stateDir, 'x.txt')];
    s.prompt = `write ${script({ steps: [create(join(workspace, 'in.txt')), ...targets.map(create)] })}`;
    const model = real.bed.model.requests.length;
    const result = await runWorkerTurn(s, tag).done;
    expect(result.outcome).toBe('succeeded');
    expect(real.bed.model.requests.length - model).toBe(6);
    expect(readFileSync(join(workspace, 'in.txt'), 'utf8')).toBe('written\n');
    for (const target of targets) expect(existsSync(target), target).toBe(false);
  });

  it.each([
    ['a cold worker, before it has loaded', false],
    ['a pool worker (no droid held), before it has validated the turn', true],
  ])("bwrap and droid are spawned by %s, and are the turn's (the runner's launch is the worker's)", async (_what, warm) => {
    const s = spec({});
    s.prompt = `write ${script({ steps: [create(join(workspace, 'early.txt')), create(join(sibling, 'early.txt'))] })}`;
    const turn = runWorkerTurn(s, tag, warm);
    const result = await turn.done;
    expect(result.outcome).toBe('succeeded');
    expect(turn.stages.droid_spawned).toBeLessThan(turn.stages.spec_received!);
    // The early droid is as confined as any: the workspace took the write, its sibling did not.
    expect(readFileSync(join(workspace, 'early.txt'), 'utf8')).toBe('written\n');
    expect(existsSync(join(sibling, 'early.txt'))).toBe(false);
  });

  it('a droid started early for a waiting turn that never runs goes with its worker, and so do its private folders', async () => {
    const s = spec({});
    const early = prestartWorker(null, s, { workerEntry: WORKER_ENTRY })!;
    expect(early).not.toBeNull();
    const pid = early.worker.child.pid!;
    // droid (in bwrap) runs in the worker's group, on the turn's own private folders.
    await vi.waitFor(() => expect(pidsWithEnvTag(tag).length).toBeGreaterThan(0), { timeout: 10_000 });
    const folders = [early.confined.sessions.dir, early.confined.tmp.turnTmp];
    for (const dir of folders) expect(existsSync(dir)).toBe(true);
    await early.dispose();
    expect(await groupRunning(pid)).toBe(false);
    await waitForNoProcesses(tag, 5_000);
    await vi.waitFor(() => expect(folders.filter((dir) => existsSync(dir))).toEqual([]));
  });

  it('a turn whose early worker died while the turn waited runs on another, in the same private folders', async () => {
    const s = spec({ timeoutMs: 20_000 });
    s.prompt = `hi ${script({ text: 'on another worker' })}`;
    const env = { ...process.env, DROID_MCP_TEST_TAG: tag };
    const early = prestartWorker(null, s, { workerEntry: WORKER_ENTRY, env })!;
    await vi.waitFor(() => expect(pidsWithEnvTag(tag).length).toBeGreaterThan(0), { timeout: 10_000 });
    const exited = new Promise((resolve) => early.worker.child.once('exit', resolve));
    process.kill(-early.worker.child.pid!, 'SIGKILL');
    await exited;
    const handle = startPooledWorker(null, s, { workerEntry: WORKER_ENTRY, env }, early);
    const result = await handle.result;
    handle.acknowledge();
    await handle.cleanedUp;
    expect(result).toMatchObject({ outcome: 'succeeded', finalText: 'on another worker' });
  });

  it('shell commands cannot write outside, remount /, change a kernel setting, or read the token and state', async () => {
    const s = spec({});
    const tmpTarget = join(tmpdir(), `droid-mcp-${randomUUID()}`);
    const outside = [`/etc/droid-mcp-${randomUUID()}`, join(sibling, 'y'), join(otherRoot, 'y'), join(stateDir, 'y'), tmpTarget];
    const command = [
      `echo a > ${join(workspace, 'sh.txt')}`,
      `echo t > "$TMPDIR/t" && echo TMPDIR-OK`,
      ...outside.map((p) => `(echo x > ${p}) 2>/dev/null && echo WROTE || echo DENIED`),
      'mount -o remount,rw,bind / 2>/dev/null && echo REMOUNTED || echo NO-REMOUNT',
      '(echo 1 > /proc/sys/vm/swappiness) 2>/dev/null && echo SYSCTL-CHANGED || echo NO-SYSCTL',
      `echo token-bytes=$(cat ${tokenFile} | wc -c)`,
      `echo state-entries=$(ls -A ${stateDir} | wc -l)`,
    ].join('; ');
    s.prompt = `run ${script({ tool: execute(command) })}`;
    const swappiness = readFileSync('/proc/sys/vm/swappiness', 'utf8');
    const result = await runWorkerTurn(s, tag).done.finally(() => {
      // Should the sandbox ever fail here, put the host's setting back.
      if (readFileSync('/proc/sys/vm/swappiness', 'utf8') !== swappiness) writeFileSync('/proc/sys/vm/swappiness', swappiness);
    });
    expect(result.outcome).toBe('succeeded');
    expect(readFileSync(join(workspace, 'sh.txt'), 'utf8')).toBe('a\n');
    for (const target of outside) expect(existsSync(target), target).toBe(false);
    expect(readFileSync('/proc/sys/vm/swappiness', 'utf8')).toBe(swappiness);
    expect(readFileSync(join(stateDir, 'state.jsonl'), 'utf8')).toBe('other sessions\n');
    const said = result.finalText;
    expect(said).toContain('TMPDIR-OK');
    expect(said).not.toContain('WROTE');
    expect(said.match(/DENIED/g)).toHaveLength(outside.length);
    expect(said).toContain('NO-REMOUNT');
    expect(said).toContain('NO-SYSCTL');
    expect(said).toContain('token-bytes=0');
    expect(said).toContain('state-entries=0');
    expect(said).not.toContain(TOKEN);
  });
});

describe('sandbox: a read-only turn writes nothing', () => {
  it("the read-only sandbox refuses every write from a shell, the workspace and droid's home included, while TMPDIR and the sessions copy stay writable", async () => {
    const s = spec({ autonomy: 'off' });
    const factoryDir = join(real.bed.home.env.HOME!, '.factory');
    const sessionsCopy = mkdtempSync(join(tmpdir(), 'droid-mcp-sessions-'));
    const { turnTmp, factoryEntries, dispose } = prepareTurnPaths(factoryDir);
    try {
      const launcher = sandboxLauncher(BWRAP, {
        workspace: { path: s.workspace, writable: false },
        factoryDir,
        factoryEntries,
        sessionsCopy,
        turnTmp,
        runtimeDir: null,
        hiddenDirs: [stateDir],
        hiddenFiles: [tokenFile],
      });
      const outside = [
        join(workspace, 'f'),
        `/etc/droid-mcp-${randomUUID()}`,
        join(sibling, 'z'),
        join(otherRoot, 'z'),
        join(stateDir, 'z'),
        join(tmpdir(), `droid-mcp-${randomUUID()}`),
        join(factoryDir, 'settings.json'),
        `/dev/droid-mcp-${randomUUID()}`,
      ];
      const script = [
        ...outside.map((p) => `(echo x >> ${p}) 2>/dev/null && echo WROTE || echo DENIED`),
        `echo y > ${join(factoryDir, 'sessions', 'probe')} && echo SESSIONS-OK`,
        'echo z > "$TMPDIR/z" && echo TMP-OK',
      ].join('; ');
      const settings = readFileSync(join(factoryDir, 'settings.json'), 'utf8');
      const child = spawn(launcher.command, [...launcher.args, '/bin/sh', '-c', script], { stdio: ['ignore', 'pipe', 'inherit', 'pipe'] });
      handFd3(child, launcher.fd3);
      let stdout = '';
      child.stdout!.setEncoding('utf8').on('data', (d: string) => (stdout += d));
      await new Promise((resolve) => child.once('close', resolve));
      expect(stdout).not.toContain('WROTE');
      expect(stdout.match(/DENIED/g)).toHaveLength(outside.length);
      expect(stdout).toContain('SESSIONS-OK');
      expect(stdout).toContain('TMP-OK');
      for (const target of outside.filter((p) => !p.endsWith('settings.json'))) expect(existsSync(target), target).toBe(false);
      expect(readFileSync(join(factoryDir, 'settings.json'), 'utf8')).toBe(settings);
      expect(readFileSync(join(sessionsCopy, 'probe'), 'utf8')).toBe('y\n');
    } finally {
      dispose();
      rmSync(sessionsCopy, { recursive: true, force: true });
    }
  });

  it('an off turn with the real droid writes nothing and droid still saves its session (it resumes)', async () => {
    const s = spec({ autonomy: 'off' });
    s.prompt = `write ${script({ tool: create(join(workspace, 'no.txt')) })}`;
    const first = await runWorkerTurn(s, tag).done;
    expect(first.outcome).toBe('succeeded');
    expect(existsSync(join(workspace, 'no.txt'))).toBe(false);
    const again = realDroidSpec(real.bed, tag, {
      workspace,
      autonomy: 'off',
      session: { mode: 'resume', droidSessionId: first.droidSessionId! },
      prompt: `again ${script({ text: 'resumed fine' })}`,
    });
    again.sandbox = s.sandbox;
    const second = await runWorkerTurn(again, tag).done;
    expect(second).toMatchObject({ outcome: 'succeeded', droidSessionId: first.droidSessionId, finalText: 'resumed fine' });
  });
});

describe('sandbox: no command outlives its turn', () => {
  const marker = () => `1000.${Math.floor(Math.random() * 1e9)}`;

  it('after a cancel, a running Execute command is gone from the host', async () => {
    const m = marker();
    const s = spec({ graceMs: 500 });
    s.prompt = `run ${script({ tool: execute(`sleep ${m}`) })}`;
    const turn = runWorkerTurn(s, tag);
    await expect.poll(() => hostProcesses(`sleep ${m}`).length, { timeout: 20_000 }).toBeGreaterThan(0);
    turn.handle.cancel();
    const result = await turn.done;
    expect(['interrupted', 'cancelled']).toContain(result.outcome);
    await expect.poll(() => hostProcesses(`sleep ${m}`), { timeout: 2_000 }).toEqual([]);
  });

  it('after the deadline, a running Execute command is gone from the host', async () => {
    const m = marker();
    const s = spec({ graceMs: 500, timeoutMs: 8_000 });
    s.prompt = `run ${script({ tool: execute(`sleep ${m}`) })}`;
    const turn = runWorkerTurn(s, tag);
    await expect.poll(() => hostProcesses(`sleep ${m}`).length, { timeout: 20_000 }).toBeGreaterThan(0);
    const result = await turn.done;
    expect(result.outcome).toBe('timed_out');
    await expect.poll(() => hostProcesses(`sleep ${m}`), { timeout: 2_000 }).toEqual([]);
  });

  it('after the worker is killed, a running Execute command is gone from the host', async () => {
    const m = marker();
    const s = spec({});
    s.prompt = `run ${script({ tool: execute(`sleep ${m}`) })}`;
    const turn = runWorkerTurn(s, tag);
    await expect.poll(() => hostProcesses(`sleep ${m}`).length, { timeout: 20_000 }).toBeGreaterThan(0);
    process.kill(turn.handle.pid, 'SIGKILL');
    const result = await turn.done;
    expect(result).toMatchObject({ outcome: 'failed', error: { code: 'worker_failed' } });
    await expect.poll(() => hostProcesses(`sleep ${m}`), { timeout: 2_000 }).toEqual([]);
  });
});

describe('sandbox: unavailable', () => {
  it('a missing bwrap fails the turn sandbox_unavailable with zero model requests', async () => {
    const s = spec({});
    s.sandbox = { mode: 'bwrap', bwrapPath: join(root, 'no-such-bwrap'), hiddenDirs: [], hiddenFiles: [] };
    s.prompt = `never ${script({ text: 'must not run' })}`;
    const before = real.bed.model.requests.length;
    const result = await runWorkerTurn(s, tag).done;
    expect(result).toMatchObject({ outcome: 'failed', submitted: false, error: { code: 'sandbox_unavailable' } });
    expect(result.error!.message).toContain('bubblewrap');
    expect(real.bed.model.requests.length).toBe(before);
  });
});
