import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { NotificationFrame } from '../../../src/droid/frames.js';
import { sessionNotification } from '../../../src/droid/notifications.js';
import { TurnCollector, type ProgressEvent } from '../../../src/droid/turn-collector.js';
import { droidStop } from '../../../src/worker/child/run-turn.js';
import { judgeStop } from '../../../src/shared/turn-stop.js';

/** droid's end reason as the worker judges it: the stop it makes (droidStop), then its verdict. */
function fromReason(reason: string, collector: TurnCollector) {
  const { outcome, reason: end, error } = judgeStop(droidStop(reason, collector), true);
  return { outcome, reason: end, error };
}

const FIXTURES = new URL('../../fixtures/droid-cli-0.225.2/', import.meta.url);
/** Recorded on droid 0.215.0, the previous CLI version we support. */
const FIXTURES_0215 = new URL('../../fixtures/droid-cli-0.215.0/', import.meta.url);

/** Feeds droid's recorded notifications of one real transcript to a collector. */
function replay(name: string, turnId = 'turn-1', fixtures = FIXTURES) {
  const events: ProgressEvent[] = [];
  const collector = new TurnCollector(turnId, (e) => events.push(e));
  for (const line of readFileSync(new URL(name, fixtures), 'utf8').split('\n')) {
    if (!line.trim()) continue;
    const { dir, msg } = JSON.parse(line) as { dir: string; msg: NotificationFrame };
    if (dir !== 'in' || msg.type !== 'notification') continue;
    const n = sessionNotification(msg);
    if (n) collector.handle(n);
  }
  return { collector, events };
}

describe('TurnCollector on recorded real transcripts', () => {
  it('happy create: final text, one span per tool use, turn completed', async () => {
    const { collector } = replay('happy-create.jsonl');
    await expect(collector.ended).resolves.toMatchObject({ reason: 'completed' });
    const spans = collector.transcript.filter((e) => e.kind === 'tool');
    expect(spans).toHaveLength(1);
    expect(spans[0]).toMatchObject({ name: 'Create', status: 'done', isError: false });
    expect(collector.finalText).not.toBe('');
    // The user's prompt is echoed by droid but never collected.
    expect(JSON.stringify(collector.transcript)).not.toContain('Please create file hello');
  });

  it('takes usage the provider reported from the terminal notification', () => {
    const { collector } = replay('happy-create.jsonl');
    expect(collector.usage).toMatchObject({ inputTokens: 20, outputTokens: 10, factoryCredits: null });
  });

  it('all-zero usage from a provider that reported nothing is not usage', () => {
    const { collector } = replay('spec-mode.jsonl');
    expect(collector.usage).toBeNull();
  });

  it('a declined AskUser still completes; the tool span records the error', async () => {
    const { collector } = replay('ask-user-declined.jsonl');
    await expect(collector.ended).resolves.toMatchObject({ reason: 'completed' });
    expect(collector.transcript.find((e) => e.kind === 'tool')).toMatchObject({ name: 'AskUser', isError: true });
    expect(collector.finalText).toBe('tool said: Error: AskUser failed');
  });

  it('auth failure ends with its reason and keeps droid error text', async () => {
    const { collector } = replay('auth-failed.jsonl');
    await expect(collector.ended).resolves.toMatchObject({ reason: 'model_authentication_failed' });
    expect(collector.droidErrors[0]).toEqual({ name: 'AuthenticationError', text: 'AuthenticationError: No access token available' });
  });

  it('interrupted transcript ends cancelled', async () => {
    const { collector } = replay('interrupted.jsonl');
    await expect(collector.ended).resolves.toMatchObject({ reason: 'cancelled' });
  });

  it('another turn id never ends the turn', () => {
    const { collector, events } = replay('happy-create.jsonl', 'some-other-turn');
    expect(collector.end).toBeUndefined();
    expect(events.some((e) => e.kind === 'ignored_turn_end')).toBe(true);
  });

  it('open spans are closed with a note when droid dies mid-tool', () => {
    const collector = new TurnCollector('t1');
    collector.handle({ type: 'tool_call', toolUse: { id: 'u1', name: 'Execute', input: { command: 'sleep 9' } } });
    collector.abortOpenSpans('droid exited');
    expect(collector.transcript[0]).toMatchObject({ status: 'aborted', isError: true, result: 'droid exited' });
  });

  it('usage is taken from the terminal notification', async () => {
    const collector = new TurnCollector('t1');
    collector.handle({ type: 'agent_turn_completed', turnId: 't1', reason: 'completed', tokenUsage: { inputTokens: 12, outputTokens: 3, factoryCredits: 0 } });
    await expect(collector.ended).resolves.toEqual({
      reason: 'completed',
      usage: { inputTokens: 12, outputTokens: 3, cacheCreationTokens: 0, cacheReadTokens: 0, thinkingTokens: 0, factoryCredits: null },
    });
  });
});

describe('fromReason: how droid 0.215.0 and 0.225.2 turn ends become verdicts', () => {
  const AUTH = { outcome: 'failed', error: { code: 'droid_auth_failed', retryable: false } };

  it('0.225.2: a missing login ends model_authentication_failed, which is droid_auth_failed', async () => {
    const { collector } = replay('auth-failed.jsonl');
    const end = await collector.ended;
    expect(fromReason(end.reason, collector)).toMatchObject({ ...AUTH, reason: 'model_authentication_failed' });
  });

  it('0.215.0: a missing login ends with reason error after an AuthenticationError, which is droid_auth_failed too', async () => {
    const { collector } = replay('auth-failed.jsonl', 'turn-1', FIXTURES_0215);
    const end = await collector.ended;
    expect(end.reason).toBe('error');
    expect(collector.droidErrors).toEqual([{ name: 'AuthenticationError', text: 'AuthenticationError: No access token available' }]);
    const verdict = fromReason(end.reason, collector);
    expect(verdict).toMatchObject({ ...AUTH, reason: 'error' });
    expect(verdict.error!.message).toContain('droid /login');
  });

  it("reason error without an AuthenticationError stays droid_turn_failed, quoting droid's last error", () => {
    const collector = new TurnCollector('t1');
    collector.handle({ type: 'error', message: 'socket hang up', error: { name: 'NetworkError', message: 'socket hang up' } });
    expect(fromReason('error', collector)).toMatchObject({
      outcome: 'failed',
      reason: 'error',
      error: { code: 'droid_turn_failed', message: 'droid ended the turn with reason error (NetworkError: socket hang up)' },
    });
  });

  it('an AuthenticationError does not turn another reason into an auth failure', () => {
    const collector = new TurnCollector('t1');
    collector.handle({ type: 'error', error: { name: 'AuthenticationError', message: 'expired' } });
    expect(fromReason('structured_output_missing', collector).error).toMatchObject({ code: 'droid_turn_failed' });
    expect(fromReason('completed', collector)).toEqual({ outcome: 'succeeded', reason: 'completed', error: null });
  });

  it('a reason that names an Object property is not an outcome', () => {
    expect(fromReason('constructor', new TurnCollector('t1'))).toMatchObject({ outcome: 'failed', error: { code: 'droid_turn_failed' } });
  });
});
