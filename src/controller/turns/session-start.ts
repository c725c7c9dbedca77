/**
 * How a turn opens its droid session, decided at launch from the records
 * (issue 40): a new one, the session's own (first rewound or compacted when
 * asked, or compacted because its context passed the host's autoCompactAt),
 * or, for a fork's first turn, its source's, forked. Pure.
 */
import { ControllerError } from '../../shared/public-error.js';
import { TERMINAL_STATES, type RunRecord, type SessionRecord } from '../../shared/records.js';
import type { TurnSpec } from '../../worker/contract/protocol.js';
import { forkCut, forkPoint, rewindExpectation, rewindTarget } from '../acceptance/session-powers.js';
import { turnWorkspace } from '../../worktree/plan.js';

export interface StartFacts {
  session: SessionRecord;
  run: RunRecord;
  /** The session's runs, in order. */
  runs: readonly RunRecord[];
  /** A fork without a droid session yet: its source's record and runs. */
  source?: { session: SessionRecord; runs: readonly RunRecord[] };
  /** The host's autoCompactAt (a context fraction), or null: off. */
  autoCompactAt: number | null;
}

export function sessionStart({ session, run, runs, source, autoCompactAt }: StartFacts): TurnSpec['session'] {
  const droidSessionId = session.droidSessionId;
  if (droidSessionId) {
    const before = powerBefore(run, runs, autoCompactAt);
    return { mode: 'resume', droidSessionId, ...(before && { before }) };
  }
  if (run.rewindTo !== undefined) {
    throw new ControllerError(
      'rewind_unavailable',
      'this session has no droid conversation yet, so there is nothing to rewind',
      'Send the prompt without rewindTo.',
    );
  }
  const named = { ...(session.title ? { title: session.title } : {}), ...(session.labels.length ? { tags: session.labels } : {}) };
  if (!session.forkOf) return { mode: 'create', ...named };
  const sourceDroidSession = source?.session.droidSessionId;
  if (!source || !sourceDroidSession) {
    throw new ControllerError(
      'fork_point_unavailable',
      `the source session ${session.forkOf.sessionId} no longer has the conversation this fork starts from`,
      'Fork the source again (droid_create_session with forkFrom), or start a new session.',
    );
  }
  // Judged again on the source as it is now: turns since the acceptance may have undone or compacted the point away.
  const point = forkPoint(source.runs, session.forkOf.sessionId, session.forkOf.runId);
  // A fork into a checkout of its own runs elsewhere than its source: droid's fork is moved there (relocate-fork.ts).
  const sourceWorkspace = turnWorkspace(source.session);
  const elsewhere = sourceWorkspace !== turnWorkspace(session) ? { sourceWorkspace } : {};
  return { mode: 'fork', sourceDroidSessionId: sourceDroidSession, ...elsewhere, cutAt: forkCut(source.runs, point), ...named };
}

/** What a resumed turn does first: the rewind or compaction asked for, else a compaction the context calls for. */
function powerBefore(
  run: RunRecord,
  runs: readonly RunRecord[],
  autoCompactAt: number | null,
): NonNullable<Extract<TurnSpec['session'], { mode: 'resume' }>['before']> | null {
  if (run.rewindTo !== undefined) {
    // Judged again on the runs before this one as they ended: one queued ahead may have rewound or compacted the target away.
    const before = runs.filter((r) => r.seq < run.seq);
    const target = rewindTarget(before, run.sessionId, run.rewindTo);
    return { kind: 'rewind', toMessage: target.id, ...rewindExpectation(before, target) };
  }
  if (run.compact) return { kind: 'compact', auto: false };
  if (autoCompactAt === null) return null;
  const last = runs.filter((r) => r.seq < run.seq && r.rewound === undefined && TERMINAL_STATES.includes(r.state) && r.context).at(-1);
  return last?.context && last.context.fraction >= autoCompactAt ? { kind: 'compact', auto: true } : null;
}
