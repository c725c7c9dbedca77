import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { ProgressEvent } from '../../../../src/droid/turn-collector.js';
import { parseParentMessage, parseWorkerMessage, runEnvelopeSchema } from '../../../../src/worker/contract/ipc.js';
import { failedResult, stoppedResult, type TurnResult, type TurnSpec } from '../../../../src/worker/contract/protocol.js';

const success: TurnResult = {
  ...stoppedResult({ kind: 'ended', end: 'completed' }),
  outcome: 'succeeded',
  reason: 'completed',
  submitted: true,
  droidSessionId: 'd-1',
  error: null,
  finalText: 'done',
  usage: { inputTokens: 3, outputTokens: 1, cacheCreationTokens: 0, cacheReadTokens: 0, thinkingTokens: 0, factoryCredits: null },
  transcript: [
    { kind: 'assistant', text: 'hi' },
    { kind: 'tool', toolUseId: 't1', name: 'Create', input: '{}', status: 'done', isError: false, result: 'ok' },
    { kind: 'tool', toolUseId: 't2', name: 'Execute', input: '{}', status: 'open', isError: false },
  ],
  permissionsDeclined: [{ tool: 'Execute', summary: 'rm -rf x' }],
  questions: [{ topic: 't', question: 'q?', options: ['a', 'b'] }],
};

const spec: TurnSpec = {
  runId: 'r1',
  workspace: '/tmp/ws',
  droidPath: '/usr/bin/droid',
  droidEnv: { HOME: '/tmp/h' },
  session: { mode: 'create' },
  sandbox: { mode: 'off' },
  model: 'm',
  autonomy: 'low',
  prompt: 'p',
  timeoutMs: 1000,
  graceMs: 100,
};

const problemOf = (raw: unknown): string => {
  const parsed = parseWorkerMessage(raw);
  if (parsed.ok) throw new Error(`expected ${JSON.stringify(raw)} to be invalid`);
  return parsed.problem;
};

describe('worker → controller messages', () => {
  it('accepts every message the worker sends', () => {
    const events: ProgressEvent[] = [
      { kind: 'assistant_text', text: 'a' },
      { kind: 'assistant_partial', text: 'b' },
      { kind: 'tool_started', tool: 'Create', input: '{}' },
      { kind: 'tool_finished', tool: 'Create', isError: true, result: 'no' },
      { kind: 'droid_error', message: 'AuthenticationError: x' },
      { kind: 'ignored_turn_end', turnId: 't', reason: 'completed' },
    ];
    const messages = [
      { type: 'started', droidSessionId: 'd-1', submittedAt: new Date().toISOString() },
      ...events.map((event) => ({ type: 'progress', event })),
      { type: 'terminal', result: success },
      { type: 'terminal', result: failedResult({ code: 'worker_failed', message: 'x', retryable: false }) },
      { type: 'terminal', result: { ...success, durationMs: -3 } }, // a clock stepped back loses no result
      { type: 'rename', outcome: { title: 'T', ok: false, error: 'refused' } },
    ];
    for (const m of messages) expect(parseWorkerMessage(m)).toEqual({ ok: true, message: m });
  });

  it('refuses wrong shapes, naming the message type and the field, never its content', () => {
    expect(problemOf({ type: 'started', droidSessionId: '', submittedAt: new Date().toISOString() })).toMatch(/^type=started: droidSessionId: /);
    expect(problemOf({ type: 'started', droidSessionId: 'd', submittedAt: 'soon' })).toMatch(/^type=started: submittedAt: /);
    expect(problemOf({ type: 'progress', event: { kind: 'tool_started', tool: 'x' } })).toMatch(/^type=progress: event\.input: /);
    expect(problemOf({ type: 'progress', event: { kind: 'telepathy' } })).toMatch(/^type=progress: event\.kind: /);
    expect(problemOf({ type: 'rename', outcome: { title: 'T', ok: true } })).toMatch(/^type=rename: outcome\.error: /);
    expect(problemOf({ type: 'shutdown' })).toMatch(/^type=shutdown: type: /);
    expect(problemOf({ droidSessionId: 'x' })).toMatch(/^no type: /);
    expect(problemOf('started')).toMatch(/^not an object \(string\): /);
    expect(problemOf(undefined)).toMatch(/^not an object \(undefined\): /);
    const secret = 'prompt-secret-zz9';
    expect(problemOf({ type: 'terminal', result: { ...success, finalText: secret, outcome: 'won' } })).not.toContain(secret);
  });

  it('refuses extra fields anywhere (strict), so a result from another build is not half-understood', () => {
    expect(problemOf({ type: 'terminal', result: success, extra: 1 })).toMatch(/^type=terminal: \(message\): Unrecognized key/);
    expect(problemOf({ type: 'terminal', result: { ...success, verdict: 'ok' } })).toMatch(/^type=terminal: result: Unrecognized key/);
    expect(problemOf({ type: 'terminal', result: { ...success, usage: { ...success.usage, dollars: 1 } } })).toMatch(/result\.usage/);
    expect(problemOf({ type: 'progress', event: { kind: 'assistant_text', text: 'a', extra: 1 } })).toMatch(/^type=progress: event/);
  });

  it('refuses a result missing fields, with a bad outcome, or negative usage', () => {
    const { transcript: _t, ...noTranscript } = success;
    expect(problemOf({ type: 'terminal', result: noTranscript })).toMatch(/result\.transcript/);
    expect(problemOf({ type: 'terminal', result: { ...success, outcome: 'won' } })).toMatch(/result\.outcome/);
    expect(problemOf({ type: 'terminal', result: { ...success, usage: { ...success.usage, inputTokens: -1 } } })).toMatch(/result\.usage\.inputTokens/);
    expect(problemOf({ type: 'terminal', result: { ...success, transcript: [{ kind: 'tool', toolUseId: 't' }] } })).toMatch(/result\.transcript\.0/);
  });

  it('refuses a "succeeded" result that carries an error, names no droid session, or was never submitted', () => {
    const bad = [
      { ...success, error: { code: 'x', message: 'y', retryable: false } },
      { ...success, droidSessionId: null },
      { ...success, submitted: false },
    ];
    for (const result of bad) expect(problemOf({ type: 'terminal', result })).toContain('a succeeded result must be submitted');
  });

  it("refuses a result whose outcome is not its stop's: the controller records the stop, so a second verdict is a broken worker", () => {
    const failed = { kind: 'failed', error: { code: 'droid_exited', message: 'gone', retryable: false }, end: null };
    expect(problemOf({ type: 'terminal', result: { ...success, stop: failed } })).toMatch(
      /^type=terminal: result\.outcome: the result's outcome is not its stop's/,
    );
    expect(problemOf({ type: 'terminal', result: { ...success, stop: { kind: 'interrupted', by: 'cancel', end: null } } })).toMatch(/not its stop's/);
    expect(problemOf({ type: 'terminal', result: { ...success, stop: { kind: 'teleported' } } })).toMatch(/result\.stop/);
  });

  it('never throws, and bounds the problem text, whatever arrives', () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.constantFrom('started', 'progress', 'terminal', 'rename', 'x'.repeat(100)), (value, type) => {
        for (const raw of [value, { type, result: value, event: value, outcome: value }]) {
          const parsed = parseWorkerMessage(raw);
          if (!parsed.ok) expect(parsed.problem.length).toBeLessThanOrEqual(520);
        }
      }),
    );
  });
});

describe("a turn's catalog", () => {
  const entry = {
    id: 'gpt-x',
    displayName: 'GPT X',
    supportedReasoningEfforts: ['low', 'high'],
    defaultReasoningEffort: 'low',
    deprecated: false,
    tokenMultiplier: 0.8,
    isNew: false,
  };
  const at = new Date().toISOString();

  it("accepts droid's entries as droid sent them, unknown fields kept", () => {
    const m = { type: 'catalog', models: [entry, { id: 'custom:Scripted-Model-0', isCustom: true, noImageSupport: true }], answeredAt: at };
    expect(parseWorkerMessage(m)).toEqual({ ok: true, message: m });
  });

  it('refuses an empty list, an entry without an id or with a mistyped field, and a bad time', () => {
    expect(problemOf({ type: 'catalog', models: [], answeredAt: at })).toMatch(/^type=catalog: models: /);
    expect(problemOf({ type: 'catalog', models: [{ displayName: 'x' }], answeredAt: at })).toMatch(/^type=catalog: models\.0\.id: /);
    expect(problemOf({ type: 'catalog', models: [{ ...entry, supportedReasoningEfforts: 'high' }], answeredAt: at })).toMatch(
      /models\.0\.supportedReasoningEfforts/,
    );
    expect(problemOf({ type: 'catalog', models: [{ ...entry, disabled: 'no' }], answeredAt: at })).toMatch(/models\.0\.disabled/);
    expect(problemOf({ type: 'catalog', models: [entry], answeredAt: 'now' })).toMatch(/answeredAt/);
    expect(problemOf({ type: 'catalog', models: { 0: entry }, answeredAt: at })).toMatch(/^type=catalog: models: /);
  });
});

describe('controller → worker messages', () => {
  it('accepts run with a valid spec, cancel and ack', () => {
    for (const m of [{ type: 'run', spec }, { type: 'cancel' }, { type: 'ack' }]) expect(parseParentMessage(m)).toEqual({ ok: true, message: m });
  });

  it('refuses an ack or cancel with extra fields, unknown types and non-objects', () => {
    for (const m of [{ type: 'ack', now: true }, { type: 'cancel', force: 1 }, { type: 'kill' }, 'ack', null]) {
      expect(parseParentMessage(m).ok).toBe(false);
    }
  });

  it('a run with a bad spec fails as a message but keeps its envelope, so the worker can answer turn_spec_invalid', () => {
    const bad = { type: 'run', spec: { ...spec, workspace: 'relative' } };
    const parsed = parseParentMessage(bad);
    expect(parsed.ok).toBe(false);
    expect(!parsed.ok && parsed.problem).toMatch(/^type=run: spec\.workspace: /);
    expect(runEnvelopeSchema.safeParse(bad).success).toBe(true);
    expect(runEnvelopeSchema.safeParse({ type: 'run', spec, extra: 1 }).success).toBe(false);
  });
});

describe('reply-back messages', () => {
  it('accepts the gate request, its decision, send results and unasked Amp calls, with a routed spec', () => {
    const fromWorker = [
      { type: 'reply_call', id: 'g1', call: { toolUseId: 'call_1', input: { action: 'send', params: { conversationID: 'T-x', message: 'm' } } } },
      { type: 'reply_event', event: { kind: 'send_result', toolUseId: 'call_1', ok: true, handle: 'rh-1' } },
      { type: 'reply_event', event: { kind: 'send_result', toolUseId: 'call_2', ok: false, handle: null } },
      { type: 'reply_event', event: { kind: 'bypass', tool: 'amp-puck___puck', toolUseId: 'call_3' } },
    ];
    for (const m of fromWorker) expect(parseWorkerMessage(m)).toEqual({ ok: true, message: m });
    const routed = { ...spec, replyBack: { url: 'http://127.0.0.1:9/mcp', replyTo: 'T-x' } };
    for (const m of [
      { type: 'reply_decision', id: 'g1', approve: true },
      { type: 'run', spec: routed },
    ])
      expect(parseParentMessage(m)).toEqual({ ok: true, message: m });
  });

  it('refuses a decision that is not exactly a yes or no for a named request, and malformed reply events', () => {
    for (const m of [
      { type: 'reply_decision', id: 'g1', approve: 'yes' },
      { type: 'reply_decision', approve: true },
      { type: 'reply_decision', id: '', approve: true },
      { type: 'reply_decision', id: 'g1', approve: true, always: true },
    ]) {
      expect(parseParentMessage(m).ok, JSON.stringify(m)).toBe(false);
    }
    expect(problemOf({ type: 'reply_call', id: 'g1', call: { input: {} } })).toMatch(/^type=reply_call: call\.toolUseId/);
    expect(problemOf({ type: 'reply_event', event: { kind: 'send_result', toolUseId: 'c', ok: true, handle: '' } })).toMatch(/event\.handle/);
    expect(problemOf({ type: 'reply_event', event: { kind: 'approved_everything' } })).toMatch(/event\.kind/);
  });
});
