/**
 * The per-turn worker against the real droid CLI, with a scripted
 * OpenAI-compatible model on loopback standing in for the provider.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { realpathSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { DroidClient } from '../../../src/droid/client.js';
import { prose, script } from '../../../src/testbed/scripted-model.js';
import { waitForNoProcesses } from '../../support/processes.js';
import { newTag, realDroidSpec, runWorkerTurn, useRealDroid } from '../../support/wire-harness.js';
import type { TurnSpec } from '../../../src/worker/contract/protocol.js';
import { turnTimeline } from '../../../src/worker/contract/timeline.js';

let workspace: string;
let tag: string;

const real = useRealDroid();

function spec(over: Partial<TurnSpec>): TurnSpec {
  tag = newTag();
  workspace = realpathSync(mkdtempSync(join(tmpdir(), 'droid-ws-')));
  return realDroidSpec(real.bed, tag, { workspace, ...over });
}

afterEach(async () => {
  // No worker or droid process a test started may outlive it.
  await waitForNoProcesses(tag, 10_000);
  rmSync(workspace, { recursive: true, force: true });
});

describe('worker + real droid CLI', () => {
  it('runs a turn whose model creates a file', async () => {
    const s = spec({});
    const file = join(s.workspace, 'hello.txt');
    s.prompt = `make the file ${script({ tool: { name: 'Create', arguments: { file_path: file, content: 'hi there\n' } }, usage: { prompt_tokens: 120, completion_tokens: 30 } })}`;
    const turn = runWorkerTurn(s, tag);
    const result = await turn.done;
    expect(result.outcome).toBe('succeeded');
    expect(result.reason).toBe('completed');
    expect(readFileSync(file, 'utf8')).toBe('hi there\n');
    expect(result.finalText).toContain('tool said:');
    expect(result.usage).toMatchObject({ inputTokens: expect.any(Number), outputTokens: expect.any(Number) });
    expect(result.usage!.inputTokens).toBeGreaterThan(0);
    expect(result.usage!.outputTokens).toBeGreaterThan(0);
    expect(result.transcript.some((e) => e.kind === 'tool' && e.name === 'Create' && e.status === 'done')).toBe(true);
    expect(await turn.started).toBe(result.droidSessionId);
  });

  it('resumes the same droid session in a second worker; both report the catalog droid answered with', async () => {
    const first = spec({ prompt: `remember ${script({ text: 'noted: first-turn-marker' })}` });
    const t1 = runWorkerTurn(first, tag);
    const r1 = await t1.done;
    expect(r1.outcome).toBe('succeeded');
    await waitForNoProcesses(tag, 10_000);
    const before = real.bed.model.requests.length;
    const second = realDroidSpec(real.bed, tag, {
      workspace: first.workspace,
      session: { mode: 'resume', droidSessionId: r1.droidSessionId! },
      prompt: `again ${script({ text: 'second answer' })}`,
    });
    const t2 = runWorkerTurn(second, tag);
    const r2 = await t2.done;
    expect(r2.outcome).toBe('succeeded');
    expect(r2.droidSessionId).toBe(r1.droidSessionId);
    // initialize_session, then load_session: one catalog each, holding the turn's own model (docs/PROTOCOL-NOTES.md part 4),
    // reported after the prompt went (off the start's path) but stamped when droid answered, not when it was sent.
    for (const turn of [t1, t2]) {
      expect(turn.catalogs).toHaveLength(1);
      expect(turn.catalogs[0]!.models.map((m) => m.id)).toContain(real.bed.modelId);
      expect(turn.catalogs[0]!.afterStart).toBe(true);
      expect(turn.catalogs[0]!.answeredAt).toBe(Math.trunc(turn.stages.initialized!));
    }
    expect(t2.catalogs[0]!.models.map((m) => m.id)).toEqual(t1.catalogs[0]!.models.map((m) => m.id));
    expect(r2.finalText).toBe('second answer');
    const seen = JSON.stringify(real.bed.model.requests.slice(before).map((r) => r.messages));
    expect(seen).toContain('first-turn-marker');
  });

  it('refuses to resume a session recorded in another workspace, submitting nothing', async () => {
    const first = spec({ prompt: `hi ${script({ text: 'ok' })}` });
    const r1 = await runWorkerTurn(first, tag).done;
    const other = realpathSync(mkdtempSync(join(tmpdir(), 'droid-ws-other-')));
    const before = real.bed.model.requests.length;
    const refused = runWorkerTurn(
      realDroidSpec(real.bed, tag, {
        workspace: other,
        session: { mode: 'resume', droidSessionId: r1.droidSessionId! },
        prompt: 'must not be sent',
      }),
      tag,
    );
    const r2 = await refused.done;
    rmSync(other, { recursive: true, force: true });
    expect(r2).toMatchObject({ outcome: 'failed', submitted: false, error: { code: 'resume_cwd_mismatch' } });
    expect(real.bed.model.requests.length).toBe(before);
    // A turn that never submits still reports the catalog droid answered its load_session with.
    expect(refused.catalogs.map((c) => c.afterStart)).toEqual([false]);
    expect(refused.catalogs[0]!.models.map((m) => m.id)).toContain(real.bed.modelId);
  });

  it('at autonomy off, a write is refused and the file does not exist', async () => {
    const s = spec({ autonomy: 'off' });
    const file = join(s.workspace, 'forbidden.txt');
    s.prompt = `write ${script({ tool: { name: 'Create', arguments: { file_path: file, content: 'x' } } })}`;
    const result = await runWorkerTurn(s, tag).done;
    expect(existsSync(file)).toBe(false);
    expect(result.outcome).toBe('succeeded');
  });

  it('at low, a command needing permission is declined and recorded, with no side effect', async () => {
    const s = spec({ autonomy: 'low' });
    const marker = join(s.workspace, 'marker');
    s.prompt = `run ${script({ tool: { name: 'Execute', arguments: { command: `touch ${marker}`, riskLevel: 'high', riskLevelReason: 'test' } } })}`;
    const result = await runWorkerTurn(s, tag).done;
    expect(existsSync(marker)).toBe(false);
    expect(result.outcome).toBe('succeeded');
    expect(result.permissionsDeclined).toEqual([{ tool: 'Execute', summary: `touch ${marker}` }]);
  });

  it('at high, the same command runs and nothing is declined', async () => {
    const s = spec({ autonomy: 'high' });
    const marker = join(s.workspace, 'marker');
    s.prompt = `run ${script({ tool: { name: 'Execute', arguments: { command: `touch ${marker}`, riskLevel: 'high', riskLevelReason: 'test' } } })}`;
    const result = await runWorkerTurn(s, tag).done;
    expect(existsSync(marker)).toBe(true);
    expect(result.permissionsDeclined).toEqual([]);
  });

  it('declines AskUser and records the question', async () => {
    const s = spec({ autonomy: 'high' });
    s.prompt = `ask ${script({ tool: { name: 'AskUser', arguments: { questionnaire: '1. [question] Deploy now?\n[topic] Deploy\n[option] yes\n[option] no' } } })}`;
    const result = await runWorkerTurn(s, tag).done;
    expect(result.outcome).toBe('succeeded');
    expect(result.questions).toEqual([{ topic: 'Deploy', question: 'Deploy now?', options: ['yes', 'no'] }]);
    expect(result.transcript.find((e) => e.kind === 'tool')).toMatchObject({ name: 'AskUser', isError: true });
  });

  it('interrupts a slowly streaming turn: droid confirms within the interrupt window, the result comes within the cancel budget', async () => {
    const s = spec({ prompt: `talk ${script({ text: prose(200), slowMs: 30_000 })}` });
    const turn = runWorkerTurn(s, tag);
    await turn.started;
    // Let the stream begin before interrupting.
    await new Promise((r) => setTimeout(r, 700));
    const cancelAt = Date.now();
    turn.handle.cancel();
    const result = await turn.handle.result;
    const elapsed = Date.now() - cancelAt;
    await turn.done;
    const shown = JSON.stringify({ ...result, transcript: undefined });
    // `cancelled` (not interrupt_unconfirmed) means droid confirmed inside the interrupt window (run-turn.ts).
    expect(result, shown).toMatchObject({ outcome: 'interrupted', reason: 'cancelled' });
    // The evidence after a cancel has its own share of that budget (timeline.ts), so the bound is the budget, not the
    // ≈ 50 ms this usually takes: CI once saw 2033 ms on a loaded host, a result still well inside it.
    expect(elapsed, shown).toBeLessThan(turnTimeline(s.timeoutMs, s.graceMs).cancelBackstopMs);
  });

  it('a Factory model without login fails with droid_auth_failed', async () => {
    const probe = DroidClient.spawn({ droidPath: real.bed.droidPath, env: real.bed.home.env });
    const factoryModel = (await probe.listModels()).find((m) => m.isCustom !== true)!;
    await probe.shutdown({ closeMs: 500, exitWaitMs: 1_000 });
    const result = await runWorkerTurn(spec({ model: factoryModel.id, prompt: 'Say hi' }), tag).done;
    expect(result).toMatchObject({ outcome: 'failed', error: { code: 'droid_auth_failed', retryable: false } });
    // 0.225.x ends such a turn model_authentication_failed, 0.215.0 error (after an AuthenticationError).
    expect(['model_authentication_failed', 'error']).toContain(result.reason);
  });

  it('a droid path that does not exist is droid_not_found', async () => {
    const result = await runWorkerTurn(spec({ droidPath: '/nonexistent/droid' }), tag).done;
    expect(result).toMatchObject({ outcome: 'failed', submitted: false, error: { code: 'droid_not_found' } });
    expect(result.error!.message).toContain('Install the Factory droid CLI');
  });
});
