/**
 * The warm pool against the real droid CLI (issue 12): a turn that takes a
 * warm worker, whose droid was spawned earlier in a neutral private folder,
 * must be indistinguishable to the turn from a cold one spawned in the
 * workspace: tools run in the session's cwd, AGENTS.md and the project's
 * `.factory/` are loaded, a session resumes, Spec mode stays read-only, and
 * a sandboxed turn never gets an unconfined warm droid.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readlinkSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { makeDroidBed, type DroidBed } from '../../support/droid-home.js';
import { messageText, script } from '../../../src/testbed/scripted-model.js';
import type { RecordedRequest } from '../../../src/testbed/model-server.js';
import { pidsWithEnvTag, waitForNoProcesses } from '../../support/processes.js';
import { WORKER_ENTRY } from '../../support/paths.js';
import { baseSpec, newTag, runWorkerTurn } from '../../support/wire-harness.js';
import type { TurnResult, TurnSpec } from '../../../src/worker/contract/protocol.js';
import { startPooledWorker, WarmPool } from '../../../src/worker/parent/warm-pool.js';
import { killGroupAndWait, runningMembers } from '../../../src/worker/parent/process-group.js';

const BWRAP = execFileSync('sh', ['-c', 'command -v bwrap || true'], { encoding: 'utf8' }).trim();

let bed: DroidBed;
let root: string;
let tag: string;
const pools: WarmPool[] = [];

beforeAll(async () => {
  bed = await makeDroidBed();
});
afterAll(async () => {
  await bed?.cleanup();
});
afterEach(async () => {
  for (const pool of pools.splice(0)) await pool.close();
  await waitForNoProcesses(tag, 10_000);
  rmSync(root, { recursive: true, force: true });
});

/** A workspace with an AGENTS.md and (unless `factory` is false) project `.factory/` settings, each carrying a marker. */
function project(factory = true): { workspace: string; markers: Record<string, string> } {
  root = realpathSync(mkdtempSync(join(tmpdir(), 'warm-')));
  const workspace = join(root, 'project');
  mkdirSync(workspace);
  const markers = { agents: `agents-${randomUUID()}`, droid: `droid-${randomUUID()}`, skill: `skill-${randomUUID()}` };
  writeFileSync(join(workspace, 'AGENTS.md'), `# Project notes\n\nThe project marker is ${markers.agents}.\n`);
  if (!factory) return { workspace, markers: { agents: markers.agents } };
  mkdirSync(join(workspace, '.factory', 'droids'), { recursive: true });
  mkdirSync(join(workspace, '.factory', 'skills', 'probe'), { recursive: true });
  writeFileSync(
    join(workspace, '.factory', 'droids', 'probe.md'),
    `---\nname: probe-droid\ndescription: A project droid; its marker is ${markers.droid}\nmodel: inherit\n---\n\nYou probe.\n`,
  );
  writeFileSync(
    join(workspace, '.factory', 'skills', 'probe', 'SKILL.md'),
    `---\nname: probe-skill\ndescription: A project skill; its marker is ${markers.skill}\n---\n\nProbe things.\n`,
  );
  writeFileSync(join(workspace, '.factory', 'settings.json'), JSON.stringify({ includeCoAuthoredByDroid: false }));
  return { workspace, markers };
}

function spec(workspace: string, over: Partial<TurnSpec> = {}): TurnSpec {
  return baseSpec(tag, bed.home.env, { droidPath: bed.droidPath, model: bed.modelId, workspace, ...over });
}

/** A pool of one warm worker for this test's tag, resolved once the worker is ready; by default it does not refill during a test. */
async function readyPool(s: TurnSpec, droid = true, refill = { refillDelayMs: 60_000, refillAfterSubmitMs: 60_000 }): Promise<WarmPool> {
  const pool = new WarmPool({
    size: 1,
    droid: droid ? { droidPath: s.droidPath, droidEnv: s.droidEnv } : null,
    env: { ...process.env, DROID_MCP_TEST_TAG: tag },
    workerEntry: WORKER_ENTRY,
    ...refill,
  });
  pools.push(pool);
  pool.start();
  const end = Date.now() + 20_000;
  while (pool.counts.ready < 1) {
    if (Date.now() > end) throw new Error('the warm worker did not become ready');
    await new Promise((r) => setTimeout(r, 20));
  }
  // Let the warm droid finish loading, as it would while waiting for a turn.
  await new Promise((r) => setTimeout(r, 1_500));
  return pool;
}

/** Every droid process of this tag, with its process cwd. */
function droids(): Array<{ pid: number; cwd: string }> {
  const out: Array<{ pid: number; cwd: string }> = [];
  for (const pid of pidsWithEnvTag(tag)) {
    try {
      if (readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('stream-jsonrpc')) out.push({ pid, cwd: readlinkSync(`/proc/${pid}/cwd`) });
    } catch {
      // gone
    }
  }
  return out;
}

interface Observed {
  result: TurnResult;
  /** droid processes while the turn ran. */
  during: Array<{ pid: number; cwd: string }>;
  /** droid processes the pool held before the take (none for a cold turn). */
  before: Array<{ pid: number; cwd: string }>;
  requests: RecordedRequest[];
}

/** The turn ran on the droid the pool had spawned before the turn was known. */
function ranWarm(seen: Observed): boolean {
  return seen.before.length === 1 && /\/droid-mcp-warm-[^/]+$/.test(seen.before[0]!.cwd) && seen.during.some((d) => d.pid === seen.before[0]!.pid);
}

async function runPooled(pool: WarmPool, s: TurnSpec): Promise<Observed> {
  const before = bed.model.requests.length;
  const warmPid = pool.pids[0];
  const held = droids();
  let during: Observed['during'] = [];
  const handle = startPooledWorker(pool, s, { onStarted: () => (during = droids()) });
  expect(handle.pid).toBe(warmPid);
  const result = await handle.result;
  handle.acknowledge();
  await handle.cleanedUp;
  return { result, during, before: held, requests: bed.model.requests.slice(before) };
}

async function runCold(s: TurnSpec): Promise<Observed> {
  const before = bed.model.requests.length;
  const turn = runWorkerTurn(s, tag, false);
  let during: Observed['during'] = [];
  void turn.started.then(() => (during = droids()));
  const result = await turn.done;
  return { result, during, before: [], requests: bed.model.requests.slice(before) };
}

/** What droid told the model, with what legitimately differs between two sessions made uniform. */
function normalized(request: RecordedRequest): string {
  return JSON.stringify(request.body)
    .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi, 'UUID')
    .replace(/\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z?/g, 'TIME')
    .replace(/<<script:.*?>>/g, 'SCRIPT');
}

/** Where two strings first differ, with some context; null when equal. */
function firstDifference(a: string, b: string): string | null {
  if (a === b) return null;
  let i = 0;
  while (i < a.length && a[i] === b[i]) i++;
  return `at ${i}: …${a.slice(Math.max(0, i - 150), i + 150)}… vs …${b.slice(Math.max(0, i - 150), i + 150)}…`;
}

const execute = (command: string) => ({ name: 'Execute', arguments: { command, riskLevel: 'low', riskLevelReason: 'test' } });

describe('warm pool + real droid CLI: a warm droid is a cold droid to the turn', () => {
  it('tools run in the workspace, AGENTS.md is loaded, and droid sends the model the same request', async () => {
    tag = newTag();
    const { workspace, markers } = project(false);
    const prompt = `where ${script({ tool: execute('pwd') })}`;
    const cold = await runCold(spec(workspace, { autonomy: 'high', prompt }));
    const s = spec(workspace, { autonomy: 'high', prompt });
    const warm = await runPooled(await readyPool(s), s);

    for (const seen of [cold, warm]) {
      expect(seen.result.outcome).toBe('succeeded');
      expect(seen.result.finalText).toContain(`tool said: ${workspace}`);
    }
    // droid moves its own process into the session's cwd: a warm one ends up where a cold one started.
    expect(cold.during.map((d) => d.cwd)).toEqual([workspace]);
    expect(ranWarm(warm)).toBe(true);
    expect(warm.during.map((d) => d.cwd)).toEqual([workspace]);

    // The first model request carries the project's context, and is the same either way.
    const coldFirst = JSON.stringify(cold.requests[0]!.body);
    const warmFirst = JSON.stringify(warm.requests[0]!.body);
    expect(coldFirst).toContain(markers.agents);
    expect(warmFirst).toContain(markers.agents);
    for (const marker of Object.values(markers)) expect(warmFirst.includes(marker), marker).toBe(coldFirst.includes(marker));
    expect(firstDifference(normalized(warm.requests[0]!), normalized(cold.requests[0]!))).toBeNull();
    expect(warm.requests).toHaveLength(cold.requests.length);
  });

  it('a workspace with project .factory/ settings starts droid cold, and droid sends the model the same request', async () => {
    // Measured on 0.225.2: droid reads whether project custom droids exist from its process cwd at start
    // (the Task tool's description), so a droid spawned elsewhere would tell the model something else.
    tag = newTag();
    const { workspace, markers } = project(true);
    const prompt = `where ${script({ tool: execute('pwd') })}`;
    const cold = await runCold(spec(workspace, { autonomy: 'high', prompt }));
    const s = spec(workspace, { autonomy: 'high', prompt });
    const pooled = await runPooled(await readyPool(s), s);
    expect(ranWarm(pooled)).toBe(false);
    expect(pooled.result.outcome).toBe('succeeded');
    const first = JSON.stringify(pooled.requests[0]!.body);
    for (const marker of Object.values(markers)) expect(first).toContain(marker);
    expect(firstDifference(normalized(pooled.requests[0]!), normalized(cold.requests[0]!))).toBeNull();
  });

  it('a user-level settings change after the warm droid started makes the turn start droid cold', async () => {
    // droid reads its settings once, at start: a warm droid spawned before the change would run on the old ones.
    tag = newTag();
    const { workspace } = project(false);
    const s = spec(workspace, { prompt: `hi ${script({ text: 'ok' })}` });
    const pool = await readyPool(s);
    const settings = join(bed.home.dir, '.factory', 'settings.json');
    const original = readFileSync(settings, 'utf8');
    try {
      writeFileSync(settings, JSON.stringify({ ...(JSON.parse(original) as object), cloudSessionSync: false }, null, 2));
      const pooled = await runPooled(pool, s);
      expect(pooled.result.outcome).toBe('succeeded');
      expect(ranWarm(pooled)).toBe(false);
    } finally {
      writeFileSync(settings, original);
    }
  });

  it('resumes a session recorded in the workspace (load_session) on a warm droid', async () => {
    tag = newTag();
    const { workspace } = project(false);
    const nonce = `first-${randomUUID()}`;
    const first = await runCold(spec(workspace, { autonomy: 'high', prompt: `remember ${script({ text: `noted: ${nonce}` })}` }));
    expect(first.result.outcome).toBe('succeeded');
    const s = spec(workspace, {
      autonomy: 'high',
      session: { mode: 'resume', droidSessionId: first.result.droidSessionId! },
      prompt: `again ${script({ tool: execute('pwd') })}`,
    });
    const warm = await runPooled(await readyPool(s), s);
    expect(warm.result.outcome).toBe('succeeded');
    expect(warm.result.droidSessionId).toBe(first.result.droidSessionId);
    expect(warm.result.finalText).toContain(`tool said: ${workspace}`);
    expect(ranWarm(warm)).toBe(true);
    // The earlier turn is in the model's context.
    expect(warm.requests[0]!.messages.some((m) => messageText(m).includes(nonce))).toBe(true);
  });

  it('refuses, on a warm droid too, to resume a session recorded elsewhere, submitting nothing', async () => {
    tag = newTag();
    const { workspace } = project(false);
    const other = join(root, 'other');
    mkdirSync(other);
    const first = await runCold(spec(other, { prompt: `elsewhere ${script({ text: 'ok' })}` }));
    const s = spec(workspace, { session: { mode: 'resume', droidSessionId: first.result.droidSessionId! }, prompt: 'never sent' });
    const warm = await runPooled(await readyPool(s), s);
    expect(warm.result).toMatchObject({ outcome: 'failed', submitted: false, error: { code: 'resume_cwd_mismatch' } });
  });

  it('at autonomy off (Spec mode) a warm droid writes nothing, like a cold one', async () => {
    tag = newTag();
    const { workspace } = project(false);
    const file = join(workspace, 'spec-mode.txt');
    const prompt = `write ${script({ tool: { name: 'Create', arguments: { file_path: file, content: 'no\n' } } })}`;
    const cold = await runCold(spec(workspace, { autonomy: 'off', prompt }));
    const s = spec(workspace, { autonomy: 'off', prompt });
    const warm = await runPooled(await readyPool(s), s);
    expect(ranWarm(warm)).toBe(true);
    expect(existsSync(file)).toBe(false);
    expect(warm.result.outcome).toBe(cold.result.outcome);
    expect(warm.result.permissionsDeclined.length).toBe(cold.result.permissionsDeclined.length);
    expect(warm.result.transcript.map((e) => e.kind)).toEqual(cold.result.transcript.map((e) => e.kind));
  });

  it('a workspace reached through a symlink runs in its canonical path, on a warm droid as on a cold one', async () => {
    tag = newTag();
    const { workspace } = project(false);
    const link = join(root, 'link');
    symlinkSync(workspace, link);
    const prompt = `where ${script({ tool: execute('pwd -P; pwd') })}`;
    // The controller canonicalizes the spelling before a worker sees it; a symlink spelling that reaches a worker is refused.
    const spelled = spec(link, { autonomy: 'high', prompt });
    const refused = await runPooled(await readyPool(spelled), spelled);
    expect(refused.result).toMatchObject({ outcome: 'failed', submitted: false, error: { code: 'workspace_changed' } });
    const cold = await runCold(spec(realpathSync(link), { autonomy: 'high', prompt }));
    const s = spec(realpathSync(link), { autonomy: 'high', prompt });
    const warm = await runPooled(await readyPool(s), s);
    expect(ranWarm(warm)).toBe(true);
    expect(warm.result.finalText).toBe(cold.result.finalText);
    expect(warm.result.finalText).toContain(workspace);
  });

  it.skipIf(!BWRAP)('a sandboxed turn never runs on an unconfined warm droid: it starts droid cold inside bubblewrap', async () => {
    tag = newTag();
    const { workspace } = project(false);
    const outside = join(root, 'outside.txt');
    const s = spec(workspace, {
      autonomy: 'high',
      prompt: `write ${script({ steps: [execute(`echo in > ${join(workspace, 'in.txt')}`), execute(`echo out > ${outside}`)] })}`,
    });
    s.sandbox = { mode: 'bwrap', bwrapPath: BWRAP, hiddenDirs: [], hiddenFiles: [] };
    // A pool whose worker holds an unconfined droid (the controller never builds one under bwrap).
    const warm = await runPooled(await readyPool(s), s);
    expect(warm.result.outcome).toBe('succeeded');
    expect(readFileSync(join(workspace, 'in.txt'), 'utf8')).toBe('in\n');
    expect(existsSync(outside)).toBe(false);
    expect(warm.during.some((d) => d.pid === warm.before[0]!.pid)).toBe(false);
  });
});

describe('warm pool: life of the pool itself', () => {
  it('a warm droid that dies is replaced, and close leaves no process behind', async () => {
    tag = newTag();
    const { workspace } = project(false);
    const s = spec(workspace);
    const pool = await readyPool(s);
    const firstPid = pool.pids[0]!;
    const droidPid = pidsWithEnvTag(tag).find((pid) => readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('stream-jsonrpc'))!;
    process.kill(droidPid, 'SIGKILL');
    const end = Date.now() + 20_000;
    while (!(pool.counts.ready === 1 && pool.pids[0] !== firstPid)) {
      if (Date.now() > end) throw new Error(`the pool was not rebuilt: ${JSON.stringify(pool.counts)}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(pool.counts.held).toBe(1);
    await pool.close();
    await waitForNoProcesses(tag, 5_000);
  });

  it('a warm worker holding no droid (a sandboxed pool) leaves nothing in its group from warming its spawn path', async () => {
    tag = newTag();
    project(false); // the bed every test here cleans up after
    const pool = new WarmPool({ size: 1, droid: null, env: { ...process.env, DROID_MCP_TEST_TAG: tag }, workerEntry: WORKER_ENTRY });
    pools.push(pool);
    pool.start();
    const end = Date.now() + 20_000;
    while (pool.counts.ready !== 1) {
      if (Date.now() > end) throw new Error(`no warm worker got ready: ${JSON.stringify(pool.counts)}`);
      await new Promise((r) => setTimeout(r, 5));
    }
    const pid = pool.pids[0]!;
    await new Promise((r) => setTimeout(r, 1_000));
    expect(await runningMembers(pid)).toEqual([pid]);
  });

  it('retires a warm worker past its age bound and replaces it', async () => {
    tag = newTag();
    const { workspace } = project(false);
    const s = spec(workspace);
    const events: string[] = [];
    const pool = new WarmPool({
      size: 1,
      droid: { droidPath: s.droidPath, droidEnv: s.droidEnv },
      env: { ...process.env, DROID_MCP_TEST_TAG: tag },
      workerEntry: WORKER_ENTRY,
      maxAgeMs: 1_500,
      onEvent: (e) => events.push(e.kind),
    });
    pools.push(pool);
    pool.start();
    const firstPid = pool.pids[0]!;
    const end = Date.now() + 20_000;
    while (!(pool.counts.ready === 1 && pool.pids[0] !== firstPid)) {
      if (Date.now() > end) throw new Error('the aged worker was not replaced');
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(events).toContain('retired');
    expect(pool.counts.held).toBe(1);
  });

  it("after a take the pool refills only once the turn's droid has its prompt, not during droid's start", async () => {
    tag = newTag();
    const { workspace } = project(false);
    // The model answers after 4 s: the turn is still running when the refill is due.
    const s = spec(workspace, { prompt: `refill ${script({ text: 'ok', slowMs: 4_000 })}` });
    // A Node-only warm worker, as under the sandbox: the turn's droid starts after the take. The cap is far beyond this test's waits.
    const pool = await readyPool(s, false, { refillDelayMs: 30_000, refillAfterSubmitMs: 300 });
    const end = Date.now() + 20_000;
    let heldAtStart = -1;
    const handle = startPooledWorker(pool, s, { onStarted: () => (heldAtStart = pool.counts.held) });
    const heldAtTake = pool.counts.held;
    let ended = false;
    void handle.result.then(() => (ended = true));
    while (pool.counts.ready < 1) {
      if (Date.now() > end) throw new Error('the pool did not refill after the turn had its prompt');
      await new Promise((r) => setTimeout(r, 20));
    }
    // Nothing forked while droid started (take → prompt submitted); the refill came after that, before the turn's end and long before the cap.
    expect([heldAtTake, heldAtStart, ended]).toEqual([0, 0, false]);
    const result = await handle.result;
    handle.acknowledge();
    await handle.cleanedUp;
    expect(result.outcome).toBe('succeeded');
  });

  it('a dropped worker still being killed counts toward the size: no refill until its group is gone', async () => {
    tag = newTag();
    project(false); // the bed every test here cleans up after
    let gone: () => void = () => undefined;
    const killed: number[] = [];
    const pool = new WarmPool({
      size: 1,
      droid: null, // a Node-only warm worker is enough: the rule is the pool's, not droid's
      env: { ...process.env, DROID_MCP_TEST_TAG: tag },
      workerEntry: WORKER_ENTRY,
      maxAgeMs: 1_000,
      // The group is killed at once, but reported gone only when the test says so.
      killGroup: (pid) => {
        killed.push(pid);
        if (killed.length > 1) return killGroupAndWait(pid); // the refilled one, at close
        process.kill(-pid, 'SIGKILL');
        return new Promise<void>((resolve) => (gone = resolve));
      },
    });
    pools.push(pool);
    pool.start();
    const firstPid = pool.pids[0]!;
    const end = Date.now() + 20_000;
    while (!killed.includes(firstPid)) {
      if (Date.now() > end) throw new Error('the aged worker was not retired');
      await new Promise((r) => setTimeout(r, 25));
    }
    await new Promise((r) => setTimeout(r, 500));
    expect(pool.counts.held).toBe(0);
    gone();
    while (!(pool.counts.ready === 1 && pool.pids[0] !== firstPid)) {
      if (Date.now() > end) throw new Error('the pool did not refill once the group was gone');
      await new Promise((r) => setTimeout(r, 25));
    }
    expect(pool.counts.held).toBe(1);
  });
});
