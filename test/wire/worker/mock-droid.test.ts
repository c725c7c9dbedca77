/**
 * Faults the real CLI will not produce on demand, through the protocol-peer
 * mock droid: crashes, malformed output, foreign turn ids, silence, slow
 * setup, and the permission answers the real CLI never asks for at `high`.
 */
import { fork } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { pidsWithEnvTag, waitForNoProcesses } from '../../support/processes.js';
import { RENAME_SKIPPED, type TurnSpec } from '../../../src/worker/contract/protocol.js';
import { warmPoolOn } from '../../support/warm-pool.js';
import { baseSpec, newTag, runWorkerTurn } from '../../support/wire-harness.js';
import { until } from '../../support/fault-harness.js';
import { turnTimeline } from '../../../src/worker/contract/timeline.js';

let tag: string;
let dir: string;
let log: string;

beforeEach(() => {
  tag = newTag();
  dir = mkdtempSync(join(tmpdir(), 'mock-droid-'));
  log = join(dir, 'frames.jsonl');
});

afterEach(async () => {
  await waitForNoProcesses(tag, 10_000);
  rmSync(dir, { recursive: true, force: true });
});

function spec(over: Partial<TurnSpec>, env: Record<string, string> = {}): TurnSpec {
  const s = baseSpec(tag, {}, { workspace: dir, ...over });
  s.droidEnv = { ...s.droidEnv, PATH: process.env.PATH ?? '', MOCK_DROID_LOG: log, ...env };
  return s;
}

/** Every frame the mock received. */
function frames(): Array<{ type?: string; method?: string }> {
  if (!existsSync(log)) return [];
  return readFileSync(log, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l));
}

/** What the worker answered to the mock's own requests. */
function answers(): Array<{ id?: string; result?: unknown; error?: { code: number } }> {
  return readFileSync(log, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l))
    .filter((f) => f.type === 'response');
}

describe('worker + mock droid faults', () => {
  it('a normal turn succeeds with usage', async () => {
    const result = await runWorkerTurn(spec({ prompt: 'plain' }), tag).done;
    expect(result).toMatchObject({ outcome: 'succeeded', finalText: 'mock: plain', usage: { inputTokens: 10, outputTokens: 5 } });
  });

  it('droid crashing mid-turn is failed, with the open tool span closed', async () => {
    const result = await runWorkerTurn(spec({ prompt: '<<mock:crash>>' }), tag).done;
    expect(result.outcome).toBe('failed');
    expect(result.error?.code).toBe('droid_exited');
    expect(result.submitted).toBe(true);
    for (const entry of result.transcript) if (entry.kind === 'tool') expect(entry.status).toBe('aborted');
  });

  it('a malformed line is kept as a diagnostic and the turn still ends correctly', async () => {
    const result = await runWorkerTurn(spec({ prompt: '<<mock:malformed>>' }), tag).done;
    expect(result.outcome).toBe('succeeded');
    expect(result.diagnostics.some((d) => d.startsWith('stray_line'))).toBe(true);
    expect(result.diagnostics.some((d) => d.startsWith('invalid_frame'))).toBe(true);
  });

  it('a terminal notification for another turn id never succeeds: timed_out at the deadline', async () => {
    const started = Date.now();
    const result = await runWorkerTurn(spec({ prompt: '<<mock:wrong-turn>>', timeoutMs: 2_000, graceMs: 500 }), tag).done;
    expect(result.outcome).toBe('timed_out');
    expect(result.error?.code).toBe('run_timed_out');
    expect(Date.now() - started).toBeGreaterThanOrEqual(2_000);
  });

  it('silence never succeeds: timed_out at the deadline', async () => {
    const result = await runWorkerTurn(spec({ prompt: '<<mock:silence>>', timeoutMs: 1_500, graceMs: 500 }), tag).done;
    expect(result.outcome).toBe('timed_out');
  });

  it('a cancel droid never confirms ends cancelled (interrupt_unconfirmed) and droid is killed', async () => {
    const turn = runWorkerTurn(spec({ prompt: '<<mock:silence>>', graceMs: 500 }), tag);
    await turn.started;
    turn.handle.cancel();
    const result = await turn.done;
    expect(result).toMatchObject({ outcome: 'cancelled', submitted: true, error: { code: 'interrupt_unconfirmed' } });
  });

  it('a rewind droid never finishes is never left midway: a cancel waits for it, the backstop ends it, and the outcome is unknown (issue 40)', async () => {
    const env = { MOCK_DROID_STATE_DIR: join(dir, 'state') };
    mkdirSync(env.MOCK_DROID_STATE_DIR);
    const firstSpec = spec({ prompt: 'one' }, env);
    const first = await runWorkerTurn(firstSpec, tag).done;
    expect(first.outcome).toBe('succeeded');
    const undo = { kind: 'rewind' as const, toMessage: firstSpec.runId, undone: [firstSpec.runId], expect: [], unchecked: [] };
    const session = { mode: 'resume' as const, droidSessionId: first.droidSessionId!, before: undo };
    const turn = runWorkerTurn(spec({ session, prompt: 'never sent', graceMs: 500 }, { ...env, MOCK_DROID_REWIND_HANG: '1' }), tag);
    await until(() => frames().some((f) => f.method === 'droid.execute_rewind'), 20_000, 'the rewind under way');
    turn.handle.cancel();
    const result = await turn.done;
    expect(result).toMatchObject({ outcome: 'unknown', submitted: false, error: { code: 'session_power_unconfirmed' } });
    expect(frames().filter((f) => f.method === 'droid.add_user_message')).toHaveLength(1);
  });

  it('a cancel droid does not even answer ends cancelled (interrupt_unconfirmed), not failed, within the timeline', async () => {
    const turn = runWorkerTurn(spec({ prompt: '<<mock:deaf>>', graceMs: 500 }), tag);
    await turn.started;
    const cancelledAt = Date.now();
    turn.handle.cancel();
    const result = await turn.handle.result;
    const tookMs = Date.now() - cancelledAt;
    expect(result).toMatchObject({ outcome: 'cancelled', submitted: true, error: { code: 'interrupt_unconfirmed' } });
    // The worker reports after its interrupt window (G), before the runner's backstop (G + slack).
    expect(tookMs).toBeLessThan(turnTimeline(spec({}).timeoutMs, 500).cancelBackstopMs);
    await turn.done;
  });

  it('a workspace that is no longer its canonical path is refused before droid starts', async () => {
    const real = join(dir, 'real');
    mkdirSync(real);
    const link = join(dir, 'link');
    symlinkSync(real, link);
    const result = await runWorkerTurn(spec({ workspace: link, prompt: 'never' }), tag).done;
    expect(result).toMatchObject({ outcome: 'failed', submitted: false, error: { code: 'workspace_changed' } });
    // droid never opened a session nor got a prompt (cold: it was never spawned; warm: the pre-spawned one was only closed).
    const frames = existsSync(log) ? readFileSync(log, 'utf8') : '';
    expect(frames).not.toMatch(/initialize_session|load_session|add_user_message/);
    if (!warmPoolOn()) expect(existsSync(log)).toBe(false);
  });

  it('a slow initialize past the deadline submits nothing', async () => {
    const result = await runWorkerTurn(spec({ prompt: 'never', timeoutMs: 800, graceMs: 300 }, { MOCK_DROID_INIT_DELAY_MS: '5000' }), tag).done;
    expect(result).toMatchObject({ outcome: 'timed_out', submitted: false });
  });

  it('cancel during a slow initialize submits nothing', async () => {
    const turn = runWorkerTurn(spec({ prompt: 'never' }, { MOCK_DROID_INIT_DELAY_MS: '5000' }), tag);
    setTimeout(() => turn.handle.cancel(), 300);
    const result = await turn.done;
    expect(result).toMatchObject({ outcome: 'cancelled', submitted: false });
  });

  it('at high, an offered single-use permission is answered proceed_once and recorded as approved', async () => {
    const result = await runWorkerTurn(spec({ autonomy: 'high', prompt: '<<mock:permission>>' }), tag).done;
    expect(answers()).toContainEqual(expect.objectContaining({ result: { selectedOption: 'proceed_once' } }));
    expect(result.permissionsDeclined).toEqual([]);
    expect(result.permissionsApproved.length).toBe(1);
  });

  it('at high without a single-use option, and at medium, the answer is cancel', async () => {
    const high = await runWorkerTurn(spec({ autonomy: 'high', prompt: '<<mock:permission-no-once>>' }), tag).done;
    expect(answers().at(-1)).toMatchObject({ result: { selectedOption: 'cancel' } });
    expect(high.permissionsDeclined.length).toBe(1);
    await waitForNoProcesses(tag, 10_000);
    const medium = await runWorkerTurn(spec({ autonomy: 'medium', prompt: '<<mock:permission>>' }), tag).done;
    expect(answers().at(-1)).toMatchObject({ result: { selectedOption: 'cancel' } });
    expect(medium.permissionsDeclined.length).toBe(1);
  });

  it('an unknown droid request is answered -32601 so droid is never left waiting', async () => {
    const result = await runWorkerTurn(spec({ prompt: '<<mock:unknown-request>>' }), tag).done;
    expect(answers()).toContainEqual(expect.objectContaining({ error: expect.objectContaining({ code: -32601 }) }));
    expect(result.outcome).toBe('succeeded');
    expect(result.diagnostics.some((d) => d.includes('droid.some_future_method'))).toBe(true);
  });

  it('a worker killed mid-turn is reported failed and its droid is gone', async () => {
    const turn = runWorkerTurn(spec({ prompt: '<<mock:silence>>' }), tag);
    await turn.started;
    process.kill(turn.handle.pid, 'SIGKILL');
    const result = await turn.done;
    expect(result).toMatchObject({ outcome: 'failed', submitted: true, error: { code: 'worker_failed' } });
  });

  it('when the controller dies, the worker stops droid and exits', async () => {
    const parent = fork(fileURLToPath(new URL('./parent-process.mjs', import.meta.url)), [JSON.stringify(spec({ prompt: '<<mock:silence>>' }))], {
      env: { ...process.env, DROID_MCP_TEST_TAG: tag },
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    });
    await new Promise((resolve) => parent.once('message', resolve));
    expect(pidsWithEnvTag(tag).length).toBeGreaterThanOrEqual(3);
    parent.kill('SIGKILL');
    await waitForNoProcesses(tag, 5_000);
  });

  it('a cold worker starts without NODE_EXTRA_CA_CERTS unless its turn is routed (its Amp preflight opens TLS); droid keeps it', async () => {
    const caFile = join(dir, 'extra-ca.pem');
    writeFileSync(caFile, '');
    const envOf = (pid: number) => readFileSync(`/proc/${pid}/environ`, 'latin1').split('\0');
    const before = process.env.NODE_EXTRA_CA_CERTS;
    process.env.NODE_EXTRA_CA_CERTS = caFile;
    try {
      for (const routed of [false, true]) {
        const turn = runWorkerTurn(
          spec(
            { prompt: '<<mock:silence>>', ...(routed && { replyBack: { url: 'https://ampcode.com/mcp?profile=puck', replyTo: 'T-1' } }) },
            { NODE_EXTRA_CA_CERTS: caFile, MOCK_DROID_INIT_DELAY_MS: '3000' },
          ),
          tag,
          false,
        );
        // Read once the worker's own program runs (before exec, the forked child still has the test's environment).
        const worker = turn.handle.pid;
        await until(() => readFileSync(`/proc/${worker}/cmdline`, 'latin1').includes('main.cjs'));
        // The mock droid once it runs its own program (between fork and exec it still has the worker's environment).
        const isDroid = (pid: number) => pid !== worker && readFileSync(`/proc/${pid}/cmdline`, 'latin1').includes('mock-droid');
        await until(() => pidsWithEnvTag(tag).some(isDroid));
        const droid = pidsWithEnvTag(tag).find(isDroid)!;
        expect(envOf(worker).includes(`NODE_EXTRA_CA_CERTS=${caFile}`), routed ? 'routed worker' : 'detached worker').toBe(routed);
        expect(envOf(droid)).toContain(`NODE_EXTRA_CA_CERTS=${caFile}`);
        turn.handle.cancel();
        expect((await turn.done).submitted).toBe(false);
        await waitForNoProcesses(tag, 10_000);
      }
    } finally {
      if (before === undefined) delete process.env.NODE_EXTRA_CA_CERTS;
      else process.env.NODE_EXTRA_CA_CERTS = before;
    }
  });

  it('a title droid refuses to apply is reported after the result and never changes the outcome', async () => {
    const turn = runWorkerTurn(spec({ prompt: 'plain', renameTo: 'New title' }), tag);
    const result = await turn.done;
    expect(result.outcome).toBe('succeeded');
    expect(turn.renames).toEqual([{ title: 'New title', ok: false, error: expect.stringContaining('-32601') }]);
  });

  // Spec: a slow rename must stay off a follow-up's path; an unfinished rename is retried on the next turn.
  it('a follow-up waiting for the slot makes the worker abandon a rename droid has not answered yet', async () => {
    // Without the skip, the outcome would be droid's late answer or the rename window's timeout, not RENAME_SKIPPED.
    const turn = runWorkerTurn(
      spec({ prompt: 'plain', renameTo: 'New title', timeoutMs: 8_000, graceMs: 1_000 }, { MOCK_DROID_RENAME_DELAY_MS: '60000' }),
      tag,
    );
    await turn.handle.result;
    await expect.poll(() => frames().some((f) => f.method === 'droid.rename_session'), { timeout: 10_000 }).toBe(true);
    turn.handle.skipRename();
    const result = await turn.done;
    expect(result.outcome).toBe('succeeded');
    expect(turn.renames).toEqual([{ title: 'New title', ok: false, error: RENAME_SKIPPED }]);
  });

  it('a steering message accepted while the turn runs means the rename is never sent', async () => {
    const turn = runWorkerTurn(spec({ prompt: '<<mock:slow>>', renameTo: 'New title' }, { MOCK_DROID_RENAME_DELAY_MS: '0' }), tag);
    await turn.started;
    turn.handle.skipRename();
    turn.handle.cancel();
    const result = await turn.done;
    // Interrupted turns are renamed too (spec), unless a follow-up waits.
    expect(result.outcome).toBe('interrupted');
    expect(turn.renames).toEqual([{ title: 'New title', ok: false, error: RENAME_SKIPPED }]);
    expect(frames().filter((f) => f.method === 'droid.rename_session')).toEqual([]);
  });

  it("a follow-up waiting for the slot does not wait out droid's voluntary exit after close_session", async () => {
    const turn = runWorkerTurn(spec({ prompt: 'plain' }, { MOCK_DROID_EXIT_DELAY_MS: '250' }), tag);
    await turn.started;
    turn.handle.skipRename();
    expect((await turn.done).outcome).toBe('succeeded');
    expect(frames().some((f) => f.method === 'droid.close_session')).toBe(true);
    expect(frames().filter((f) => 'exit' in f)).toEqual([]);
  });

  it('without a follow-up waiting, droid may exit by itself after close_session', async () => {
    const turn = runWorkerTurn(spec({ prompt: 'plain' }, { MOCK_DROID_EXIT_DELAY_MS: '50' }), tag);
    expect((await turn.done).outcome).toBe('succeeded');
    expect(frames().filter((f) => 'exit' in f)).toEqual([{ exit: 'voluntary' }]);
  });

  it('without a follow-up waiting, the title is applied', async () => {
    const turn = runWorkerTurn(spec({ prompt: 'plain', renameTo: 'New title' }, { MOCK_DROID_RENAME_DELAY_MS: '0' }), tag);
    expect((await turn.done).outcome).toBe('succeeded');
    expect(turn.renames).toEqual([{ title: 'New title', ok: true, error: null }]);
  });

  it('a missing login as droid 0.215.0 reports it (reason error after AuthenticationError) is droid_auth_failed', async () => {
    const result = await runWorkerTurn(spec({ prompt: '<<mock:auth-error-0215>>' }), tag).done;
    expect(result).toMatchObject({ outcome: 'failed', reason: 'error', submitted: true, error: { code: 'droid_auth_failed', retryable: false } });
    expect(result.transcript).toEqual([]);
  });

  it('an invalid turn spec is a named failure', async () => {
    const bad = spec({});
    (bad as unknown as { workspace: string }).workspace = 'relative/path';
    const result = await runWorkerTurn(bad, tag).done;
    expect(result).toMatchObject({ outcome: 'failed', error: { code: 'turn_spec_invalid' } });
  });
});
