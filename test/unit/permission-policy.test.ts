import { describe, expect, it } from 'vitest';
import { decidePermission, recordQuestions } from '../../src/droid/permission-policy.js';

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
