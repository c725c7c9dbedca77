import { describe, expect, it } from 'vitest';
import { turnSpecFor } from '../../../../src/controller/turns/turn-spec.js';
import { runRecord, sessionRecord } from '../../../support/records.js';

const host = {
  droidPath: '/bin/droid',
  droidEnv: { HOME: '/h' },
  runTimeoutMs: 60_000,
  cancelGraceMs: 1_000,
  sandbox: { mode: 'off' as const },
  ampMcpUrl: null,
};

describe('turnSpecFor', () => {
  it('creates the droid session on the first turn, with title and labels as tags', () => {
    const session = sessionRecord({ id: 's', title: 'T', labels: ['a', 'b'], workspace: '/w' });
    const spec = turnSpecFor(runRecord({ sessionId: 's', seq: 1, settings: { model: 'm', autonomy: 'low', reasoningEffort: 'high' } }), session, 'p', host);
    expect(spec).toMatchObject({
      workspace: '/w',
      session: { mode: 'create', title: 'T', tags: ['a', 'b'] },
      model: 'm',
      autonomy: 'low',
      reasoningEffort: 'high',
      prompt: 'p',
      timeoutMs: 60_000,
      graceMs: 1_000,
      sandbox: { mode: 'off' },
      renameTo: 'T',
    });
  });

  it('resumes once droid knows the session, and renames only when the title changed', () => {
    const session = sessionRecord({ id: 's', title: 'T', factoryTitle: 'T', droidSessionId: 'd-1' });
    const spec = turnSpecFor(runRecord({ sessionId: 's', seq: 2 }), session, 'p', host);
    expect(spec.session).toEqual({ mode: 'resume', droidSessionId: 'd-1' });
    expect(spec).not.toHaveProperty('renameTo');
    expect(spec).not.toHaveProperty('reasoningEffort');
    expect(turnSpecFor(runRecord({ sessionId: 's', seq: 2 }), { ...session, title: 'New' }, 'p', host).renameTo).toBe('New');
  });

  it('routes a turn of a routed session: the Amp server to attach, and the instructions before the prompt', () => {
    const A = 'T-11111111-2222-4333-8444-555555555555';
    const session = sessionRecord({ id: 's', replyTo: A, replyRouteId: 'route-1' });
    const run = runRecord({ sessionId: 's', seq: 1, settings: { model: 'm', autonomy: 'off', reasoningEffort: null } });
    const spec = turnSpecFor(run, session, 'the task', { ...host, ampMcpUrl: 'http://127.0.0.1:9/mcp' });
    expect(spec.replyBack).toEqual({ url: 'http://127.0.0.1:9/mcp', replyTo: A });
    expect(spec.prompt.endsWith('the task')).toBe(true);
    for (const part of [A, 's', run.id, 'Spec mode']) expect(spec.prompt).toContain(part);
    // Detached, or no endpoint: no server and the prompt as given.
    for (const [s2, h] of [
      [
        { ...session, replyTo: null, replyRouteId: undefined },
        { ...host, ampMcpUrl: 'http://127.0.0.1:9/mcp' },
      ],
      [session, host],
    ] as const) {
      const plain = turnSpecFor(run, s2, 'the task', h);
      expect(plain).not.toHaveProperty('replyBack');
      expect(plain.prompt).toBe('the task');
    }
  });
});
