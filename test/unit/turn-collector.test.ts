import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { NotificationFrame } from '../../src/droid/frames.js';
import { sessionNotification } from '../../src/droid/notifications.js';
import { TurnCollector, type ProgressEvent } from '../../src/droid/turn-collector.js';

const FIXTURES = new URL('../fixtures/droid-cli-0.225.2/', import.meta.url);

/** Feeds droid's recorded notifications of one real transcript to a collector. */
function replay(name: string, turnId = 'turn-1') {
  const events: ProgressEvent[] = [];
  const collector = new TurnCollector(turnId, (e) => events.push(e));
  for (const line of readFileSync(new URL(name, FIXTURES), 'utf8').split('\n')) {
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
    expect(collector.droidErrors[0]).toContain('AuthenticationError');
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
