import { describe, expect, it } from 'vitest';
import { classifyToolUses, decidePermission, decideRoutedPermission, droidAutonomy, recordQuestions } from '../../../src/droid/permission-policy.js';

const offer = (...values: string[]) => ({
  toolUses: [{ toolUse: { name: 'Execute', input: { command: 'rm -rf build', riskLevel: 'high' } } }],
  options: values.map((value) => ({ label: value, value })),
});

describe('decidePermission', () => {
  it('approves once at high when offered, never always', () => {
    const d = decidePermission('high', offer('proceed_once', 'proceed_always', 'cancel'));
    expect(d).toMatchObject({ selectedOption: 'proceed_once', approved: true });
    expect(d.tools).toEqual([{ tool: 'Execute', summary: 'rm -rf build' }]);
  });

  it('cancels at high when only a persistent approval is offered', () => {
    expect(decidePermission('high', offer('proceed_always', 'cancel'))).toMatchObject({ selectedOption: 'cancel', approved: false });
  });

  it.each(['off', 'low', 'medium'] as const)('cancels at %s', (level) => {
    expect(decidePermission(level, offer('proceed_once', 'cancel'))).toMatchObject({ selectedOption: 'cancel', approved: false });
  });

  it('survives malformed params and truncates long input', () => {
    expect(decidePermission('high', null)).toEqual({ selectedOption: 'cancel', approved: false, tools: [] });
    const long = { toolUses: [{ toolUse: { name: 'Create', input: { content: 'x'.repeat(5000) } } }], options: [] };
    expect(decidePermission('low', long).tools[0]!.summary.length).toBeLessThan(400);
  });
});

describe('recordQuestions', () => {
  it('keeps topic, question and options', () => {
    const q = recordQuestions({ toolCallId: 't', questions: [{ index: 1, topic: 'Deploy', question: 'Deploy now?', options: ['yes', 'no'] }] });
    expect(q).toEqual([{ topic: 'Deploy', question: 'Deploy now?', options: ['yes', 'no'] }]);
    expect(recordQuestions(undefined)).toEqual([]);
  });
});

// ── routed turns ────────────────────────────────────────────────────────────

const PUCK_DETAILS = { type: 'mcp_tool', toolName: 'amp-puck___puck', impactLevel: 'high', serverName: 'amp-puck', actualToolName: 'puck' };
const ALL_OPTIONS = ['proceed_once', 'proceed_always', 'proceed_always_tools', 'proceed_always_server', 'cancel'].map((value) => ({ label: value, value }));
const puckUse = (id = 'call_1', input: unknown = { action: 'send', params: {} }) => ({
  toolUse: { id, name: 'amp-puck___puck', input },
  confirmationType: 'mcp_tool',
  details: PUCK_DETAILS,
});
const execUse = { toolUse: { id: 'call_9', name: 'Execute', input: { command: 'rm -rf ./victim', riskLevel: 'high' } }, confirmationType: 'exec' };
const adminUse = {
  toolUse: { id: 'call_5', name: 'amp-puck___manage_amp', input: {} },
  confirmationType: 'mcp_tool',
  details: { ...PUCK_DETAILS, toolName: 'amp-puck___manage_amp', actualToolName: 'manage_amp' },
};
const request = (...uses: unknown[]) => ({ toolUses: uses, options: ALL_OPTIONS });
const yes = () => true;
const no = () => false;

describe('droidAutonomy', () => {
  it('runs a routed high turn at medium and every other turn at its own level', () => {
    expect(droidAutonomy('high', true)).toBe('medium');
    expect(droidAutonomy('high', false)).toBe('high');
    for (const level of ['off', 'low', 'medium'] as const) {
      expect(droidAutonomy(level, true)).toBe(level);
      expect(droidAutonomy(level, false)).toBe(level);
    }
  });
});

describe('classifyToolUses', () => {
  it('tells puck, other Amp tools and everything else apart, by every name droid gives', () => {
    const kinds = classifyToolUses(request(puckUse(), adminUse, execUse)).map((u) => [u.kind, u.toolUseId]);
    expect(kinds).toEqual([
      ['puck', 'call_1'],
      ['amp_other', 'call_5'],
      ['other', 'call_9'],
    ]);
  });

  it('never takes a look-alike for puck', () => {
    const lookalikes = [
      { toolUse: { id: 'a', name: 'amp-puck___puck_', input: {} }, details: { ...PUCK_DETAILS, actualToolName: 'puck ' } },
      { toolUse: { id: 'b', name: 'amp-puck___puck', input: {} }, details: { ...PUCK_DETAILS, actualToolName: 'puck ' } },
      { toolUse: { id: 'c', name: 'amp-puck___puck', input: {} }, details: { ...PUCK_DETAILS, serverName: 'other' } },
      { toolUse: { id: 'd', name: 'other___puck', input: {} }, details: { ...PUCK_DETAILS, serverName: 'amp-puck', actualToolName: 'x' } },
    ];
    expect(classifyToolUses(request(...lookalikes)).map((u) => u.kind)).toEqual(['amp_other', 'amp_other', 'amp_other', 'amp_other']);
  });
});

describe('decideRoutedPermission (the decision table)', () => {
  it.each(['off', 'low', 'medium', 'high'] as const)('caller %s: puck runs exactly when the gate approves, once', (caller) => {
    expect(decideRoutedPermission(caller, request(puckUse()), yes)).toMatchObject({ selectedOption: 'proceed_once', approved: true });
    expect(decideRoutedPermission(caller, request(puckUse()), no)).toMatchObject({ selectedOption: 'cancel', approved: false });
  });

  it.each(['off', 'low', 'medium', 'high'] as const)('caller %s: other Amp tools never run, even with the gate approving', (caller) => {
    expect(decideRoutedPermission(caller, request(adminUse), yes)).toMatchObject({ selectedOption: 'cancel', approved: false });
  });

  it('caller high: everything that is not Amp runs once (droid at medium asks what high would have run unasked)', () => {
    expect(decideRoutedPermission('high', request(execUse), no)).toMatchObject({ selectedOption: 'proceed_once', approved: true });
  });

  it.each(['off', 'low', 'medium'] as const)('caller %s: everything that is not puck is cancelled, as today', (caller) => {
    expect(decideRoutedPermission(caller, request(execUse), yes)).toMatchObject({ selectedOption: 'cancel', approved: false });
  });

  it('a request runs only if every use in it may run', () => {
    expect(decideRoutedPermission('high', request(execUse, puckUse()), yes).approved).toBe(true);
    expect(decideRoutedPermission('high', request(execUse, puckUse()), no).approved).toBe(false);
    expect(decideRoutedPermission('high', request(execUse, adminUse), yes).approved).toBe(false);
    expect(decideRoutedPermission('low', request(execUse, puckUse()), yes).approved).toBe(false);
  });

  it('never approves without a single-use option, without uses, or a puck use droid gave no id', () => {
    expect(decideRoutedPermission('high', { toolUses: [execUse], options: [{ value: 'proceed_always' }, { value: 'cancel' }] }, yes).approved).toBe(false);
    expect(decideRoutedPermission('high', { toolUses: [], options: ALL_OPTIONS }, yes).approved).toBe(false);
    expect(decideRoutedPermission('high', null, yes).approved).toBe(false);
    const noId = { ...puckUse(), toolUse: { name: 'amp-puck___puck', input: {} } };
    expect(decideRoutedPermission('low', request(noId), yes).approved).toBe(false);
  });
});
