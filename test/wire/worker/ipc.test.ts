/**
 * IPC messages crossing the worker ↔ controller boundary are validated on
 * both sides: an invalid one is counted and reported, never acted on.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import type { ProgressEvent } from '../../../src/droid/turn-collector.js';
import type { TurnResult } from '../../../src/worker/contract/protocol.js';
import { forkWorker, startWorker } from '../../../src/worker/parent/runner.js';
import { WORKER_ENTRY } from '../../support/paths.js';
import { waitForNoProcesses } from '../../support/processes.js';
import { baseSpec, newTag } from '../../support/wire-harness.js';

const FAKE_WORKER = fileURLToPath(new URL('./fake-worker.mjs', import.meta.url));
let tag = newTag();

afterEach(async () => {
  await waitForNoProcesses(tag, 10_000);
  tag = newTag();
});

function runFake(scenario: string) {
  const started: string[] = [];
  const progress: ProgressEvent[] = [];
  const renames: unknown[] = [];
  const invalid: string[] = [];
  const catalogs: Array<{ models: unknown[]; answeredAt: number }> = [];
  const handle = startWorker(baseSpec(tag, {}, {}), {
    workerEntry: FAKE_WORKER,
    env: { ...process.env, DROID_MCP_TEST_TAG: tag, FAKE_WORKER_SCENARIO: scenario },
    onStarted: (id) => started.push(id),
    onProgress: (e) => progress.push(e),
    onRename: (r) => renames.push(r),
    onInvalidMessage: (p) => invalid.push(p),
    onCatalog: (models, answeredAt) => catalogs.push({ models, answeredAt }),
  });
  const done = handle.result.then(async (result: TurnResult) => {
    handle.acknowledge();
    await handle.cleanedUp;
    return result;
  });
  return { done, started, progress, renames, invalid, catalogs };
}

describe('controller side (runner)', () => {
  it('an invalid terminal is not the result: the turn ends worker_failed, counted as submitted, with the problems as diagnostics', async () => {
    const run = runFake('invalid-terminal');
    const result = await run.done;
    expect(result).toMatchObject({ outcome: 'failed', submitted: true, droidSessionId: null, finalText: '', error: { code: 'worker_failed' } });
    expect(result.error!.message).toContain('without a valid result (it sent 3 invalid IPC message(s)');
    expect(run.started).toEqual([]);
    expect(run.progress).toEqual([{ kind: 'assistant_text', text: 'hello' }]);
    expect(run.invalid).toHaveLength(3);
    expect(result.diagnostics).toEqual(run.invalid);
    expect(result.diagnostics[0]).toMatch(/^ipc_invalid_message #1 from the worker, ignored: type=started: droidSessionId: /);
    expect(result.diagnostics[2]).toMatch(/^ipc_invalid_message #3 .*type=terminal: result\./);
    expect(JSON.stringify(result)).not.toContain('forged answer');
  });

  it('malformed messages of every sort are ignored; the later valid terminal is the result, with them as diagnostics', async () => {
    const run = runFake('invalid-then-valid');
    const result = await run.done;
    expect(result).toMatchObject({ outcome: 'succeeded', finalText: 'real answer', droidSessionId: 'sess-1', error: null });
    expect(run.started).toEqual(['sess-1']);
    expect(run.renames).toEqual([]);
    // Only the well-formed catalog reaches the controller, with its time; nothing of the others.
    expect(run.catalogs).toEqual([{ models: [{ id: 'real-model', isNew: true }], answeredAt: Date.parse('2030-01-02T03:04:05.000Z') }]);
    expect(JSON.stringify(run.catalogs)).not.toContain('forged-model');
    expect(run.invalid.map((p) => p.replace(/^ipc_invalid_message #\d+ from the worker, ignored: /, '').split(':')[0])).toEqual([
      'not an object (string)',
      'not an object (null)',
      'not an object (array)',
      'type=rename',
      'type=catalog',
      'type=catalog',
      'type=terminal',
      'type=terminal',
    ]);
    expect(result.diagnostics).toEqual(['from the worker', ...run.invalid]);
  });
});

describe('worker side (main)', () => {
  it('ignores invalid controller messages (an ack or cancel with extra fields is neither), and answers a run without a spec with turn_spec_invalid', async () => {
    const child = fork(WORKER_ENTRY, [], { env: { ...process.env, DROID_MCP_TEST_TAG: tag }, stdio: ['ignore', 'ignore', 'pipe', 'ipc'] });
    let stderr = '';
    child.stderr!.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    const terminal = new Promise<TurnResult>((resolve) =>
      child.on('message', (m: { type?: string; result?: TurnResult }) => {
        if (m.type === 'terminal') resolve(m.result!);
      }),
    );
    child.send({ type: 'ack', now: true });
    child.send({ type: 'cancel', reason: 'x' });
    child.send({ type: 'launch' });
    child.send({ type: 'run' });
    const result = await terminal;
    expect(result).toMatchObject({ outcome: 'failed', error: { code: 'turn_spec_invalid' } });
    const ignored = () => stderr.split('\n').filter((l) => l.startsWith('worker: ignored invalid IPC message from the controller'));
    for (let i = 0; i < 200 && ignored().length < 3; i++) await new Promise((r) => setTimeout(r, 10));
    expect(ignored()).toHaveLength(3);
    expect(ignored()[0]).toContain('type=ack');
    // Had the invalid ack counted, the worker would have exited right after its result.
    const early = await Promise.race([exited, new Promise((r) => setTimeout(() => r('still running'), 500))]);
    expect(early).toBe('still running');
    child.send({ type: 'ack' });
    expect(await exited).toBe(0);
  });
});

/** Sends one message to a forked worker, acknowledges its result if one comes; its exit code and stderr once it has exited. */
async function runToExit(child: ChildProcess, message: Record<string, unknown>): Promise<{ code: number | null; stderr: string }> {
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  child.on('message', (m: { type?: string }) => {
    if (m.type === 'terminal') child.send({ type: 'ack' });
  });
  child.send(message);
  const code = await exited;
  return { code, stderr };
}

describe('worker entry (main.ts): the worker proper is compiled from its build-time code cache', () => {
  /** A run without a spec: the worker loads itself, answers turn_spec_invalid and exits. */
  const stderrOfRun = async (child: ChildProcess) => (await runToExit(child, { type: 'run' })).stderr;
  const env = () => ({ ...process.env, DROID_MCP_TEST_TAG: tag });

  it('a worker forked by the runner uses the cache even when the server runs under V8 flags (the runner passes none on)', async () => {
    const own = [...process.execArgv];
    process.execArgv.push('--stack-size=900');
    let child: ChildProcess;
    try {
      child = forkWorker({ workerEntry: WORKER_ENTRY, env: env() });
    } finally {
      process.execArgv.splice(0, process.execArgv.length, ...own);
    }
    expect(await stderrOfRun(child)).not.toContain('code cache');
  });

  it('a worker under other V8 flags says it loaded without the cache, and still runs', async () => {
    const child = fork(WORKER_ENTRY, [], { execArgv: ['--stack-size=900'], env: env(), stdio: ['ignore', 'ignore', 'pipe', 'ipc'] });
    expect(await stderrOfRun(child)).toContain('worker: loaded without its code cache (rejected)');
  });
});

describe('worker entry (main.ts): a cold worker spawns droid before it loads itself', () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });
  const workspace = () => {
    const dir = realpathSync(mkdtempSync(join(tmpdir(), 'early-')));
    dirs.push(dir);
    return dir;
  };
  /** A launch that is not droid: a shell that writes its pid to `marker`, then sleeps. */
  const impostor = (cwd: string, marker: string) => ({
    droidPath: '/bin/sh',
    env: { PATH: '/usr/bin:/bin', DROID_MCP_TEST_TAG: tag },
    cwd,
    launcher: { command: '/bin/sh', args: ['-c', `echo $$ > ${marker}; exec sleep 30`], fd3: '' },
  });
  const alive = (pid: number) => {
    try {
      return !readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.startsWith('Z');
    } catch {
      return false;
    }
  };

  /** Forks the entry and sends one run message; resolves with the result (acknowledged). */
  function runDirect(message: Record<string, unknown>): Promise<{ result: TurnResult }> {
    const child = fork(WORKER_ENTRY, [], { env: { ...process.env, DROID_MCP_TEST_TAG: tag }, stdio: ['ignore', 'ignore', 'pipe', 'ipc'] });
    child.stderr!.resume();
    return new Promise((resolve) => {
      child.on('message', (m: { type?: string; result?: TurnResult }) => {
        if (m.type === 'terminal') {
          child.send({ type: 'ack' });
          resolve({ result: m.result! });
        }
      });
      child.send(message);
    });
  }

  it("the runner's launch is spawned before the worker has its spec, and is the turn's droid", async () => {
    let stages: Record<string, number> = {};
    const handle = startWorker(baseSpec(tag, {}, { workspace: workspace() }), {
      workerEntry: WORKER_ENTRY,
      env: { ...process.env, DROID_MCP_TEST_TAG: tag },
      onStarted: (_id, s) => (stages = { ...s }),
    });
    const result = await handle.result;
    handle.acknowledge();
    await handle.cleanedUp;
    expect(result.outcome).toBe('succeeded');
    expect(stages.droid_spawned).toBeLessThan(stages.spec_received!);
  });

  it('a launch that is not the one the worker makes for the turn is killed unused; the turn runs on its own droid', async () => {
    const ws = workspace();
    const marker = join(ws, 'early.pid');
    const spec = baseSpec(tag, {}, { workspace: ws });
    const { result } = await runDirect({ type: 'run', spec, launch: impostor(ws, marker) });
    expect(result.outcome).toBe('succeeded');
    const pid = Number(readFileSync(marker, 'utf8'));
    expect(pid).toBeGreaterThan(0);
    expect(alive(pid)).toBe(false);
  });

  it('a worker whose stderr is gone (the controller died) keeps running its turn and stops its droid', async () => {
    const child = fork(WORKER_ENTRY, [], { env: { ...process.env, DROID_MCP_TEST_TAG: tag }, stdio: ['ignore', 'ignore', 'pipe', 'ipc'] });
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    const started = new Promise<void>((resolve) => child.on('message', (m: { type?: string }) => m.type === 'started' && resolve()));
    const terminal = new Promise<TurnResult>((resolve) =>
      child.on('message', (m: { type?: string; result?: TurnResult }) => m.type === 'terminal' && resolve(m.result!)),
    );
    child.send({ type: 'run', spec: baseSpec(tag, {}, { workspace: workspace(), prompt: '<<mock:silence>>' }) });
    await started;
    // The read end goes, as when the controller dies: the worker's next stderr line (an invalid message's) meets EPIPE.
    child.stderr!.destroy();
    child.send({ type: 'cancel', reason: 'x' });
    await new Promise((r) => setTimeout(r, 300));
    expect(child.exitCode).toBeNull();
    child.send({ type: 'cancel' });
    expect((await terminal).outcome).toBe('cancelled');
    child.send({ type: 'ack' });
    expect(await exited).toBe(0);
    await waitForNoProcesses(tag, 5_000);
  });

  it('a worker whose bundle cannot be loaded kills the droid it started and exits 1', async () => {
    const ws = workspace();
    const marker = join(ws, 'early.pid');
    // The real entry beside a worker bundle that throws as it loads.
    copyFileSync(WORKER_ENTRY, join(ws, 'main.cjs'));
    writeFileSync(join(ws, 'worker.cjs'), "throw new Error('broken bundle');\n");
    const child = fork(join(ws, 'main.cjs'), [], { env: { ...process.env, DROID_MCP_TEST_TAG: tag }, stdio: ['ignore', 'ignore', 'pipe', 'ipc'] });
    const { code, stderr } = await runToExit(child, { type: 'run', spec: baseSpec(tag, {}, { workspace: ws }), launch: impostor(ws, marker) });
    expect(code).toBe(1);
    expect(stderr).toContain('worker: could not load: broken bundle');
    // The impostor (tagged, `sleep 30`) would outlive a worker that left it.
    await waitForNoProcesses(tag, 3_000);
  });

  it('a launch whose cwd is no longer the directory it names is never spawned', async () => {
    const ws = workspace();
    const link = join(ws, 'link');
    mkdirSync(join(ws, 'real'));
    symlinkSync(join(ws, 'real'), link);
    const marker = join(ws, 'early.pid');
    const spec = baseSpec(tag, {}, { workspace: link });
    const { result } = await runDirect({ type: 'run', spec, launch: impostor(link, marker) });
    expect(result).toMatchObject({ outcome: 'failed', submitted: false, error: { code: 'workspace_changed' } });
    expect(existsSync(marker)).toBe(false);
  });
});
