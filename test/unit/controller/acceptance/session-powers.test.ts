import { describe, expect, it } from 'vitest';
import { forkCut, forkPoint, recordPower, rewindExpectation, rewindTarget } from '../../../../src/controller/acceptance/session-powers.js';
import { sessionStart } from '../../../../src/controller/turns/session-start.js';
import { acceptedRun, type RunRecord, type SessionRecord } from '../../../../src/shared/records.js';
import { ControllerError } from '../../../../src/shared/public-error.js';

const AT = '2026-12-07T06:00:00.000Z';

/** A finished writer run of session s at `seq`; `extra` overrides. */
function run(seq: number, extra: Partial<RunRecord> = {}): RunRecord {
  return {
    ...acceptedRun({
      id: `r${seq}`,
      sessionId: 's',
      seq,
      kind: seq === 1 ? 'create' : 'send',
      requestKey: `k${seq}`,
      fingerprint: 'f',
      interrupt: false,
      settings: { model: 'm', autonomy: 'high', reasoningEffort: null },
      acceptedAt: AT,
    }),
    state: 'succeeded',
    startedAt: AT,
    endedAt: AT,
    submittedAt: AT,
    ...extra,
  };
}

const session: SessionRecord = {
  id: 's',
  createdAt: AT,
  updatedAt: AT,
  workspace: '/w',
  title: null,
  labels: [],
  archived: false,
  replyTo: null,
  droidSessionId: 'd1',
  headRunId: 'r3',
  factoryTitle: null,
};

function refusal(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ControllerError);
    expect((err as ControllerError).action).toBeTruthy();
    return (err as ControllerError).code;
  }
  throw new Error('expected a refusal');
}

describe('rewindTarget', () => {
  it('takes a finished run of the session that droid still holds', () => {
    const runs = [run(1), run(2), run(3)];
    expect(rewindTarget(runs, 's', 'r2').id).toBe('r2');
  });

  it('refuses by name: not of the session, unfinished, never launched, undone, before a compaction or a rewind', () => {
    expect(refusal(() => rewindTarget([run(1)], 's', 'other'))).toBe('rewind_target_invalid');
    expect(refusal(() => rewindTarget([run(1, { state: 'running', endedAt: null })], 's', 'r1'))).toBe('rewind_target_unfinished');
    expect(refusal(() => rewindTarget([run(1, { state: 'cancelled', startedAt: null, submittedAt: undefined })], 's', 'r1'))).toBe('rewind_unavailable');
    // Launched, but droid never had the prompt (it failed before): no message to rewind to.
    expect(refusal(() => rewindTarget([run(1, { state: 'failed', submittedAt: undefined })], 's', 'r1'))).toBe('rewind_unavailable');
    // A rewind or compaction queued ahead will replace droid's session: refused now, not at launch.
    expect(refusal(() => rewindTarget([run(1), run(2, { state: 'queued', compact: true, submittedAt: undefined })], 's', 'r1'))).toBe('rewind_unavailable');
    expect(refusal(() => rewindTarget([run(1, { rewound: { by: 'r2', at: AT } }), run(2)], 's', 'r1'))).toBe('rewind_unavailable');
    const compaction = { auto: false, removedMessages: 3, before: null, after: null };
    expect(refusal(() => rewindTarget([run(1), run(2, { compaction })], 's', 'r1'))).toBe('rewind_unavailable');
    // droid keeps file snapshots per droid session: a later rewind started a new one.
    const rewind = { restored: [], deleted: [], truncated: 0, failed: 0, notRestorable: [] };
    expect(refusal(() => rewindTarget([run(1), run(2), run(3, { rewindTo: 'r2', rewind })], 's', 'r1'))).toBe('rewind_unavailable');
    // A rewind or compaction that ended without doing it (refused, failed before droid) leaves the runs before it rewindable.
    expect(rewindTarget([run(1), run(2, { rewindTo: 'r1', state: 'failed' }), run(3, { compact: true, state: 'failed' })], 's', 'r1').id).toBe('r1');
    // The compaction's own run is still rewindable to (its prompt came after the summary).
    expect(rewindTarget([run(1), run(2, { compaction })], 's', 'r2').id).toBe('r2');
  });
});

describe('forkPoint and forkCut', () => {
  it("forks at the source's latest finished run in line, or the one asked for, cut before the next one droid had", () => {
    const runs = [
      run(1),
      run(2, { rewound: { by: 'r3', at: AT } }),
      run(3, { state: 'failed', submittedAt: undefined }),
      run(4),
      run(5, { state: 'queued', startedAt: null, endedAt: null, submittedAt: undefined }),
    ];
    const latest = forkPoint(runs, 's', null);
    expect(latest.id).toBe('r4');
    expect(forkCut(runs, latest)).toBeNull();
    const first = forkPoint(runs, 's', 'r1');
    // r2 was undone and r3 never reached droid: the next message droid holds after r1 is r4's.
    expect(forkCut(runs, first)).toBe('r4');
  });

  it('refuses by name', () => {
    expect(refusal(() => forkPoint([run(1, { state: 'unknown' })], 's', null))).toBe('session_unknown_outcome');
    expect(refusal(() => forkPoint([run(1, { state: 'failed', startedAt: null, submittedAt: undefined })], 's', null))).toBe('fork_point_unavailable');
    expect(refusal(() => forkPoint([run(1)], 's', 'nope'))).toBe('fork_point_invalid');
    expect(refusal(() => forkPoint([run(1, { state: 'running', endedAt: null })], 's', 'r1'))).toBe('fork_point_unfinished');
  });
});

describe('rewindExpectation', () => {
  it('keeps each path as the last undone run left it, and names writer runs that recorded nothing, or not all', () => {
    const runs = [
      run(1, { touched: { files: [{ path: '/w/a', sha256: 'a1' }], truncated: 0 } }),
      run(2, {
        touched: {
          files: [
            { path: '/w/a', sha256: 'a2' },
            { path: '/w/b', sha256: null },
          ],
          truncated: 0,
        },
      }),
      run(3),
      run(4, { settings: { model: 'm', autonomy: 'off', reasoningEffort: null } }),
      run(5, { touched: { files: [], truncated: 2 } }),
      run(6, { state: 'failed', submittedAt: undefined }),
    ];
    expect(rewindExpectation(runs, runs[1]!)).toEqual({
      undone: ['r2', 'r3', 'r4', 'r5'],
      expect: [
        { path: '/w/a', sha256: 'a2' },
        { path: '/w/b', sha256: null },
      ],
      unchecked: ['r3', 'r5'],
    });
  });
});

describe('recordPower', () => {
  it("moves the session to droid's new one and marks the rewind's undone runs, once, and never a run after the rewind", () => {
    const rewindRun = run(4, { rewindTo: 'r2', state: 'starting', endedAt: null });
    const runs = [run(1), run(2), run(3), rewindRun, run(5, { state: 'queued', startedAt: null, endedAt: null })];
    const rewind = { restored: ['/w/a'], deleted: [], truncated: 0, failed: 0, notRestorable: [] };
    const first = recordPower(session, rewindRun, runs, { kind: 'rewind', droidSessionId: 'd2', rewind }, AT);
    expect(first.sessions).toEqual([{ ...session, droidSessionId: 'd2' }]);
    expect(first.runs.map((r) => [r.id, r.rewound?.by ?? null, r.rewind ?? null])).toEqual([
      ['r4', null, rewind],
      ['r2', 'r4', null],
      ['r3', 'r4', null],
    ]);
    // The result reports it again: only the run's own record is written again.
    const after = runs.map((r) => first.runs.find((f) => f.id === r.id) ?? r);
    const again = recordPower({ ...session, droidSessionId: 'd2' }, after[3]!, after, { kind: 'rewind', droidSessionId: 'd2', rewind }, AT);
    expect(again.sessions).toEqual([]);
    expect(again.runs.map((r) => r.id)).toEqual(['r4']);
  });
});

describe('sessionStart', () => {
  const facts = (runs: RunRecord[], extra: Partial<Parameters<typeof sessionStart>[0]> = {}) => ({
    session,
    run: runs.at(-1)!,
    runs,
    autoCompactAt: null,
    ...extra,
  });

  it('resumes; rewinds or compacts when asked; compacts by itself once the last context passed autoCompactAt', () => {
    const context = (fraction: number) => ({ used: fraction * 100, limit: 100, fraction });
    expect(sessionStart(facts([run(1), run(2, { state: 'starting' })]))).toEqual({ mode: 'resume', droidSessionId: 'd1' });
    const rewinding = [run(1), run(2), run(3, { state: 'starting', rewindTo: 'r2' })];
    expect(sessionStart(facts(rewinding))).toMatchObject({ mode: 'resume', before: { kind: 'rewind', toMessage: 'r2', undone: ['r2'] } });
    expect(sessionStart(facts([run(1), run(2, { state: 'starting', compact: true })]))).toMatchObject({ before: { kind: 'compact', auto: false } });
    const full = [run(1, { context: context(0.85) }), run(2, { state: 'starting' })];
    expect(sessionStart(facts(full, { autoCompactAt: 0.8 }))).toMatchObject({ before: { kind: 'compact', auto: true } });
    expect(sessionStart(facts(full, { autoCompactAt: 0.9 }))).toEqual({ mode: 'resume', droidSessionId: 'd1' });
    expect(sessionStart(facts(full))).toEqual({ mode: 'resume', droidSessionId: 'd1' });
  });

  it("opens a fork's source at its point, cut before the source's next message", () => {
    const fork: SessionRecord = { ...session, id: 'f', droidSessionId: null, forkOf: { sessionId: 's', runId: 'r1' }, title: 'F' };
    const sourceRuns = [run(1), run(2)];
    const start = sessionStart({ session: fork, run: run(1), runs: [], source: { session, runs: sourceRuns }, autoCompactAt: null });
    expect(start).toEqual({ mode: 'fork', sourceDroidSessionId: 'd1', cutAt: 'r2', title: 'F' });
    // The source moved on since the acceptance: its point was undone by a rewind, judged again at launch.
    const undone = [run(1, { rewound: { by: 'r2', at: AT } }), run(2, { rewindTo: 'r1' })];
    expect(refusal(() => sessionStart({ session: fork, run: run(1), runs: [], source: { session, runs: undone }, autoCompactAt: null }))).toBe(
      'fork_point_unavailable',
    );
  });

  it('judges a rewind again at launch: a rewind queued ahead of it replaced the session the target ran in', () => {
    const rewind = { restored: [], deleted: [], truncated: 0, failed: 0, notRestorable: [] };
    const runs = [run(1), run(2), run(3, { rewindTo: 'r2', rewind }), run(4, { state: 'starting', rewindTo: 'r1' })];
    expect(refusal(() => sessionStart(facts(runs)))).toBe('rewind_unavailable');
  });
});
