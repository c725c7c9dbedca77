import { describe, expect, it } from 'vitest';
import { turnSpecSchema, type TurnSpec } from '../../../../src/worker/contract/protocol.js';
import { withoutResult, type WatchedExit } from '../../../../src/worker/parent/without-result.js';
import { judgeStop } from '../../../../src/shared/turn-stop.js';

const spec: TurnSpec = turnSpecSchema.parse({
  runId: 'r1',
  workspace: '/w',
  droidPath: '/bin/droid',
  droidEnv: {},
  session: { mode: 'resume', droidSessionId: 'd1', before: { kind: 'rewind', toMessage: 'r0', undone: ['r0'], expect: [], unchecked: [] } },
  model: 'm',
  autonomy: 'high',
  prompt: 'p',
  timeoutMs: 1000,
  graceMs: 100,
  sandbox: { mode: 'off' },
});

const watched = (extra: Partial<WatchedExit> = {}): WatchedExit => ({
  firedBackstop: null,
  cancelRequested: false,
  invalidMessages: 0,
  startedSession: null,
  ...extra,
});

describe('withoutResult', () => {
  it('a worker gone while a session power was under way leaves the outcome unknown, whoever stopped it (issue 40)', () => {
    for (const extra of [{}, { cancelRequested: true, firedBackstop: 'cancel' as const }, { firedBackstop: 'deadline' as const }]) {
      const result = withoutResult('signal SIGKILL', watched({ powerStarted: true, ...extra }), spec, '');
      expect(result.outcome).toBe('unknown');
      expect(result.error?.code).toBe('session_power_unconfirmed');
      expect(judgeStop(result.stop, true)).toMatchObject({ outcome: 'unknown', attention: true });
    }
  });

  it('a power that was reported done is no unknown: the stop says what happened', () => {
    expect(withoutResult('code 1', watched({ powerStarted: true, powerSession: 'd2' }), spec, '').outcome).toBe('failed');
    expect(withoutResult('signal SIGKILL', watched({ cancelRequested: true, firedBackstop: 'cancel' }), spec, '').outcome).toBe('cancelled');
  });
});
