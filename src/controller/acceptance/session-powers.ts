/**
 * droid's session powers as the controller judges them (issue 40): which
 * run a fork starts after, which runs a rewind may go back to, and, at
 * launch, what droid is asked to do. Pure: the session's runs in, a run or
 * a named refusal out.
 *
 * A run's droid message id is its run id (the worker submits the prompt
 * under it), so "before run R" is "before message R" in the droid session
 * R ran in. That session holds R for as long as no later turn replaced it:
 * a rewind (its runs are marked `rewound`) or a compaction (droid keeps
 * only its summary of what came before).
 */
import { ControllerError } from '../../shared/public-error.js';
import { TERMINAL_STATES, type RunRecord, type SessionRecord, type TouchedFiles } from '../../shared/records.js';
import type { PowerOutcome } from '../../worker/contract/protocol.js';

/** Whether droid had the run's prompt under the run's id (recorded since issue 40): a rewind or a fork's cut can name it. */
function reachedDroid(run: RunRecord): boolean {
  return run.submittedAt !== undefined;
}

/** Whether the run may still change droid's session: queued or live (an ended one's power, if any, is recorded). */
function pending(run: RunRecord): boolean {
  return !TERMINAL_STATES.includes(run.state);
}

/** The session's runs droid's current conversation is built from, in order: not undone by a rewind. */
function inLine(runs: readonly RunRecord[]): RunRecord[] {
  return runs.filter((r) => r.rewound === undefined);
}

/**
 * A run whose compaction droid did (recorded), or may do (queued or live):
 * droid keeps only its summary of what came before. An ended run without
 * the record never compacted (a power is recorded before the prompt).
 */
function compacted(r: RunRecord): boolean {
  return r.compaction !== undefined || (r.compact === true && pending(r));
}

/** A run whose rewind droid did, or may do: its droid session is new. */
function rewinding(r: RunRecord): boolean {
  return r.rewind !== undefined || (r.rewindTo !== undefined && pending(r));
}

/** Why droid's current conversation no longer holds the message of `run`, or null when it does. */
function goneFromConversation(runs: readonly RunRecord[], run: RunRecord): string | null {
  if (run.rewound) return `run ${run.id} was undone by the rewind of run ${run.rewound.by}`;
  const later = inLine(runs).find((r) => r.seq > run.seq && compacted(r));
  return later ? `the conversation was compacted by run ${later.id}, after run ${run.id}: droid keeps only its summary of what came before` : null;
}

/**
 * Why droid cannot put back the files of the runs from `run` on, or null:
 * it keeps file snapshots per droid session, and a later rewind or
 * compaction started a new one (measured: the new session's rewind lists
 * nothing of the turns before it).
 */
function snapshotsGone(runs: readonly RunRecord[], run: RunRecord): string | null {
  const later = inLine(runs).find((r) => r.seq > run.seq && (rewinding(r) || compacted(r)));
  if (!later) return null;
  const what = rewinding(later) ? 'a rewind' : 'a compaction';
  return `run ${later.id}, after run ${run.id}, replaces droid's session (${what}), and droid keeps the files of the turns before it only in the session it replaced`;
}

/**
 * The run a rewind goes back to (its state before that run began). Refused:
 * a run not of this session, one not finished, one undone already, one that
 * never reached droid, one droid's conversation no longer holds.
 */
export function rewindTarget(runs: readonly RunRecord[], sessionId: string, targetId: string): RunRecord {
  const target = runs.find((r) => r.id === targetId);
  if (!target) {
    throw new ControllerError(
      'rewind_target_invalid',
      `run ${targetId} is not a run of session ${sessionId}`,
      'Pass rewindTo a run of this session (latestRun.run of its status, or a run of droid_read_session).',
    );
  }
  if (!TERMINAL_STATES.includes(target.state)) {
    throw new ControllerError(
      'rewind_target_unfinished',
      `run ${targetId} is ${target.state}; only a finished run can be rewound to`,
      'Wait for it to finish (droid_wait_for_sessions), or cancel it, then retry with a new requestKey.',
      true,
    );
  }
  const gone = !reachedDroid(target)
    ? `run ${targetId} never reached droid under its own id (it ended ${target.state} before droid had its prompt, or ran before droid-mcp named messages)`
    : (goneFromConversation(runs, target) ?? snapshotsGone(runs, target));
  if (gone) {
    throw new ControllerError(
      'rewind_unavailable',
      `droid cannot rewind to before run ${targetId}: ${gone}`,
      'Rewind to a later run that is still in the conversation (not rewound, not before a compaction), or fork the session instead.',
    );
  }
  return target;
}

/**
 * The source's run a fork starts right after: the one asked for, else the
 * source's latest in droid's conversation. Refused: a run not of the
 * source, not finished, undone, or no longer in the conversation; a source
 * whose conversation is empty.
 */
export function forkPoint(runs: readonly RunRecord[], sourceId: string, asked: string | null): RunRecord {
  if (runs.some((r) => r.state === 'unknown')) {
    throw new ControllerError(
      'session_unknown_outcome',
      `session ${sourceId} has a turn whose outcome is unknown (the controller stopped mid-turn), so its conversation cannot be forked`,
      'Fork another session, or start a new one.',
    );
  }
  if (asked === null) {
    // Forked whole, the latest needs no message id: any run that was launched counts.
    const latest = inLine(runs)
      .filter((r) => r.startedAt !== null && TERMINAL_STATES.includes(r.state))
      .at(-1);
    if (!latest) {
      throw new ControllerError(
        'fork_point_unavailable',
        `session ${sourceId} has no finished turn that reached droid: there is no conversation to fork yet`,
        'Wait for its first turn to finish (droid_wait_for_sessions), then retry with a new requestKey.',
        true,
      );
    }
    return latest;
  }
  const run = runs.find((r) => r.id === asked);
  if (!run) {
    throw new ControllerError(
      'fork_point_invalid',
      `run ${asked} is not a run of session ${sourceId}`,
      'Pass forkFrom.run a run of the source session, or omit it to fork at its latest turn.',
    );
  }
  if (!TERMINAL_STATES.includes(run.state)) {
    throw new ControllerError(
      'fork_point_unfinished',
      `run ${asked} is ${run.state}; a fork starts after a finished run`,
      'Wait for it to finish (droid_wait_for_sessions), then retry with a new requestKey.',
      true,
    );
  }
  const gone = !reachedDroid(run) ? `run ${asked} never reached droid under its own id` : goneFromConversation(runs, run);
  if (gone) throw new ControllerError('fork_point_unavailable', `cannot fork after run ${asked}: ${gone}`, 'Fork after a later run, or omit run.');
  return run;
}

/**
 * Where a fork's first turn cuts the source's conversation, at launch: the
 * first message after `point` (the next run in line that reached droid),
 * or null when `point` is still the latest (fork the whole conversation).
 */
export function forkCut(sourceRuns: readonly RunRecord[], point: RunRecord): string | null {
  return (
    inLine(sourceRuns)
      .filter(reachedDroid)
      .find((r) => r.seq > point.seq)?.id ?? null
  );
}

/** What a rewind expects to find: each file droid's tools changed in the undone runs, as the last of them left it. */
export interface RewindExpectation {
  /** The runs undone, in order: the target first. */
  undone: string[];
  expect: Array<{ path: string; sha256: string | null }>;
  /** Undone runs that changed files and did not record them all (or at all): a rewind cannot check what they left. */
  unchecked: string[];
}

/**
 * The undone runs' files as they left them: for each path, the content the
 * latest of them recorded. Runs with nothing recorded that may have
 * written (a writer turn that reached droid) are named as unchecked.
 */
export function rewindExpectation(runs: readonly RunRecord[], target: RunRecord): RewindExpectation {
  const latest = new Map<string, string | null>();
  const unchecked: string[] = [];
  const undone = inLine(runs).filter((r) => r.seq >= target.seq && reachedDroid(r));
  for (const run of undone) {
    const touched: TouchedFiles | undefined = run.touched;
    if (!touched) {
      if (run.settings.autonomy !== 'off') unchecked.push(run.id);
      continue;
    }
    if (touched.truncated > 0) unchecked.push(run.id);
    for (const f of touched.files) latest.set(f.path, f.sha256);
  }
  return { undone: undone.map((r) => r.id), expect: [...latest].map(([path, sha256]) => ({ path, sha256 })), unchecked };
}

/** The runs a rewind to `target` undoes: it and every later run still in line before the rewind turn itself. */
function undoneBy(runs: readonly RunRecord[], target: RunRecord, rewind: RunRecord): RunRecord[] {
  return inLine(runs).filter((r) => r.seq >= target.seq && r.seq < rewind.seq);
}

/**
 * The records once droid did a turn's power (issue 40): the session moves to
 * the droid session it made; a rewind's undone runs are marked and what it
 * restored is kept on the turn; a compaction's context before and after.
 * Recorded twice (the `power` report, then the result, which may know more:
 * the context after a compaction), it changes only what is new.
 */
export function recordPower(
  session: SessionRecord,
  run: RunRecord,
  runs: readonly RunRecord[],
  power: PowerOutcome,
  at: string,
): { sessions: SessionRecord[]; runs: RunRecord[] } {
  const sessions = session.droidSessionId === power.droidSessionId ? [] : [{ ...session, droidSessionId: power.droidSessionId, updatedAt: at }];
  if (power.kind === 'fork') return { sessions, runs: [] };
  if (power.kind === 'compact') return { sessions, runs: [{ ...run, compaction: power.compaction }] };
  const target = run.rewindTo === undefined ? undefined : runs.find((r) => r.id === run.rewindTo);
  const undone = target ? undoneBy(runs, target, run).map((r) => ({ ...r, rewound: { by: run.id, at } })) : [];
  return { sessions, runs: [{ ...run, rewind: power.rewind }, ...undone] };
}
