import { describe, expect, it } from 'vitest';
import { turnSpecFor } from '../../src/controller/turn-spec.js';
import { runRecord, sessionRecord } from '../support/records.js';

const host = { droidPath: '/bin/droid', droidEnv: { HOME: '/h' }, runTimeoutMs: 60_000, cancelGraceMs: 1_000, sandbox: { mode: 'off' as const } };

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
});
