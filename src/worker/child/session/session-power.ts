/**
 * droid's session powers, run by the worker before the prompt (issue 40):
 * a fork of the source's session, a rewind of the session's own, or a
 * compaction. Each leaves droid holding a NEW session, loaded again here so
 * the prompt goes to it; what was done is the PowerOutcome the controller
 * records. And after a writer turn, the files droid's tools changed, as
 * the turn left them: what a later rewind checks so that an edit made
 * since is never silently overwritten.
 */
import { createHash } from 'node:crypto';
import type { DroidClient, LoadResult } from '../../../droid/client.js';
import { DroidError, toErrorInfo } from '../../../droid/errors.js';
import type { TurnStop } from '../../../shared/turn-stop.js';
import { compactSession, executeRewind, forkSession, rewindInfo, type RewindInfo } from '../../../droid/session-powers.js';
import { readContext } from '../../../evidence/turn-evidence.js';
import type { ContextStats, RewindRecord, TouchedFiles } from '../../../shared/records.js';
import { componentsBelow, openBeneath } from './open-beneath.js';
import type { PowerOutcome, SessionPower } from '../../contract/protocol.js';

/** Each list a rewind record keeps, and the files a turn's record keeps. */
const MAX_REWOUND_PATHS = 50;
const MAX_TOUCHED = 200;
/** Files larger than this are not hashed: a rewind over them cannot check them, so it refuses. */
const MAX_HASHED_BYTES = 64 * 1024 * 1024;
/** How long droid may take to answer a context reading. */
const CONTEXT_MS = 2_000;
/** A power's own request time: droid summarizes with the model to compact. */
const POWER_REQUEST_MS = 120_000;

/**
 * The sha256 of the file at `path` inside `workspace`, opened without
 * following any link (open-beneath.ts); null when nothing is there;
 * undefined when it cannot be read, is not a regular file, or is too large.
 */
async function fileHash(path: string, workspace: string): Promise<string | null | undefined> {
  let handle;
  try {
    handle = await openBeneath(workspace, path);
  } catch {
    return undefined;
  }
  if (handle === null) return null;
  try {
    const info = await handle.stat();
    if (!info.isFile() || info.size > MAX_HASHED_BYTES) return undefined;
    const hash = createHash('sha256');
    for await (const chunk of handle.createReadStream({ autoClose: false })) hash.update(chunk as Buffer);
    return hash.digest('hex');
  } catch {
    return undefined;
  } finally {
    await handle.close().catch(() => undefined);
  }
}

/**
 * What droid would put back for the undone runs: its list for the first of
 * them that changed a file, which holds every later run's changes too
 * (droid answers a run that changed none with empty lists, measured).
 */
async function undoneChanges(client: DroidClient, droidSessionId: string, undone: readonly string[]): Promise<RewindInfo> {
  for (const messageId of undone) {
    const info = await rewindInfo(client, droidSessionId, messageId).catch((err: unknown) => {
      throw new DroidError('rewind_unavailable', `droid cannot list what a rewind would restore: ${(err as Error).message}; nothing was changed`);
    });
    if (pathsOf(info).length > 0 || (info.evictedFiles?.length ?? 0) > 0) return info;
  }
  return { availableFiles: [], createdFiles: [], evictedFiles: [] };
}

/** droid's rewind lists split: what lies inside the workspace, and the paths outside it. */
function withinWorkspace(info: RewindInfo, workspace: string): { inside: RewindInfo; outside: string[] } {
  const inside = (path: string) => componentsBelow(workspace, path) !== null;
  return {
    inside: {
      availableFiles: info.availableFiles.filter((f) => inside(f.filePath)),
      createdFiles: info.createdFiles.filter((f) => inside(f.filePath)),
      evictedFiles: (info.evictedFiles ?? []).filter((f) => inside(f.filePath)),
    },
    outside: pathsOf(info).filter((path) => !inside(path)),
  };
}

/** The paths a rewind to `info`'s message would write: restored, then deleted. */
function pathsOf(info: RewindInfo): string[] {
  return [...info.availableFiles.map((f) => f.filePath), ...info.createdFiles.map((f) => f.filePath)];
}

/**
 * Why the files a rewind would write may hold an edit made after the undone
 * turns ended, one line per file (at most 10 named); empty when none does.
 */
async function conflictsOf(info: RewindInfo, power: Extract<SessionPower, { kind: 'rewind' }>, workspace: string): Promise<string[]> {
  const expected = new Map(power.expect.map((f) => [f.path, f.sha256]));
  const problems: string[] = [];
  for (const path of pathsOf(info)) {
    const want = expected.get(path);
    if (want === undefined) {
      const why = power.unchecked.length > 0 ? `run(s) ${power.unchecked.join(', ')} did not record it` : 'no undone run recorded it';
      problems.push(`${path}: cannot be checked (${why})`);
    } else {
      const now = await fileHash(path, workspace);
      if (now === undefined) problems.push(`${path}: cannot be read to check it`);
      else if (now !== want) problems.push(`${path}: ${now === null ? 'removed' : 'changed'} since the undone turns ended`);
    }
  }
  return problems;
}

/** At most MAX_REWOUND_PATHS of `paths`, and how many were left out. */
function bounded(paths: string[]): { kept: string[]; left: number } {
  return { kept: paths.slice(0, MAX_REWOUND_PATHS), left: Math.max(0, paths.length - MAX_REWOUND_PATHS) };
}

/**
 * Runs the power on the loaded session `droidSessionId` and loads the new
 * session droid made. A rewind that would overwrite an edit made since the
 * undone turns ended is refused (`rewind_conflict`) before droid is asked:
 * nothing is changed then.
 */
async function rewindLoaded(
  client: DroidClient,
  droidSessionId: string,
  power: Extract<SessionPower, { kind: 'rewind' }>,
  workspace: string,
): Promise<PowerOutcome> {
  // Only files inside the workspace are put back (the turn's own scratch elsewhere is not the session's work): the rest is reported.
  const { inside: info, outside } = withinWorkspace(await undoneChanges(client, droidSessionId, power.undone), workspace);
  const conflicts = await conflictsOf(info, power, workspace);
  if (conflicts.length > 0) {
    const shown = conflicts.slice(0, 10).join('; ') + (conflicts.length > 10 ? `; and ${conflicts.length - 10} more` : '');
    throw new DroidError('rewind_conflict', `the rewind would overwrite files changed since the turns it undoes ended, so nothing was changed: ${shown}`);
  }
  // Files may be half put back when droid does not answer: that is no plain failure.
  const answer = await named(
    executeRewind(client, {
      droidSessionId,
      messageId: power.toMessage,
      restore: info.availableFiles,
      remove: info.createdFiles.map((f) => f.filePath),
      title: 'rewind',
      timeoutMs: POWER_REQUEST_MS,
    }),
    'rewind the session',
    true,
  );
  const restored = bounded(info.availableFiles.map((f) => f.filePath));
  const deleted = bounded(info.createdFiles.map((f) => f.filePath));
  const rewind: RewindRecord = {
    restored: restored.kept,
    deleted: deleted.kept,
    truncated: restored.left + deleted.left,
    failed: answer.failedRestoreCount + answer.failedDeleteCount,
    notRestorable: [...outside, ...(info.evictedFiles ?? []).map((f) => f.filePath)].slice(0, MAX_REWOUND_PATHS),
  };
  return { kind: 'rewind', droidSessionId: answer.newSessionId, rewind };
}

/**
 * A fork's first turn: the source's session is loaded; droid forks it whole
 * (`cutAt` null) or rewinds the conversation alone to before `cutAt` (no
 * file is touched).
 */
async function forkLoaded(
  client: DroidClient,
  source: string,
  cutAt: string | null,
  names: { title?: string; tags?: readonly string[] },
): Promise<PowerOutcome> {
  const made =
    cutAt === null
      ? await named(forkSession(client, names), 'fork the session')
      : (
          await named(
            executeRewind(client, {
              droidSessionId: source,
              messageId: cutAt,
              restore: [],
              remove: [],
              title: names.title ?? 'fork',
              timeoutMs: POWER_REQUEST_MS,
            }),
            'fork the session at that run',
          )
        ).newSessionId;
  return { kind: 'fork', droidSessionId: made };
}

/** A droid of the turn's own launch, apart from the turn's (its group's, so it goes with the worker whatever happens). */
export interface SpareDroid {
  client: DroidClient;
  /** Stops it; never rejects. */
  close(): Promise<void>;
}

/** What a turn asks droid to do before its prompt: a fork's, or a resumed turn's rewind or compaction. */
export type PowerAsked =
  | { kind: 'fork'; source: string; sourceWorkspace: string; cutAt: string | null; names: { title?: string; tags?: readonly string[] } }
  | { kind: 'resume'; droidSessionId: string; power: SessionPower };

/**
 * Runs the power in a droid of its own, which loads the session first
 * (`check` judges its answer: the directory) and is stopped after. The
 * turn's droid then loads only the session the power made: droid 0.225.2
 * that loads the compacted session in the process that compacted it still
 * sends the model the whole conversation before the summary (measured), so
 * no power shares a process with the turn. A compaction's `after` is the
 * turn droid's to read.
 */
export async function powerApart(
  spare: () => Promise<SpareDroid>,
  asked: PowerAsked,
  workspace: string,
  check: (loaded: LoadResult, directory: string) => Promise<void>,
): Promise<PowerOutcome> {
  const droid = await spare();
  const client = droid.client;
  try {
    const opened = asked.kind === 'fork' ? asked.source : asked.droidSessionId;
    const loaded = await client.loadSession(opened);
    // A fork's source runs where its own turns do (a fork into a checkout moves afterwards: relocate-fork.ts).
    await check(loaded, asked.kind === 'fork' ? asked.sourceWorkspace : workspace);
    if (asked.kind === 'fork') {
      if (asked.cutAt !== null) assertHolds(loaded, asked.cutAt, 'the fork point');
      return await forkLoaded(client, asked.source, asked.cutAt, asked.names);
    }
    const power = asked.power;
    if (power.kind === 'rewind') {
      assertHolds(loaded, power.toMessage, 'the run to rewind to');
      return await rewindLoaded(client, opened, power, workspace);
    }
    const before = await readContext(client, CONTEXT_MS);
    const answer = await named(compactSession(client, POWER_REQUEST_MS), 'compact the conversation');
    return {
      kind: 'compact',
      droidSessionId: answer.newSessionId,
      compaction: { auto: power.auto, removedMessages: answer.removedCount, before, after: null },
    };
  } finally {
    await droid.close();
  }
}

/**
 * droid's conversation (load_session's `session.messages`) must still hold
 * `messageId`: droid's own rewind info does not tell an unknown message from
 * one with no file changes (measured).
 */
function assertHolds(loaded: LoadResult, messageId: string, what: string): void {
  const messages = loaded.session?.messages;
  if (!Array.isArray(messages)) return; // droid did not list them: its own answer names a missing message
  if (!messages.some((m) => typeof m === 'object' && m !== null && (m as { id?: unknown }).id === messageId)) {
    throw new DroidError('rewind_unavailable', `droid's conversation no longer holds ${what} (${messageId}); nothing was changed`);
  }
}

/** The context occupancy of the open session, or null. */
export function contextNow(client: DroidClient): Promise<ContextStats | null> {
  return readContext(client, CONTEXT_MS);
}

/** droid's failure of a power, named (a rewind_unavailable or rewind_conflict of ours passes unchanged). */
async function named<T>(call: Promise<T>, what: string, changesFiles = false): Promise<T> {
  try {
    return await call;
  } catch (err) {
    // An answer droid refused changed nothing; a call it never answered (it timed out or died) may have.
    const refused = err instanceof DroidError && (err.code === 'droid_rpc_error' || err.code === 'droid_session_not_found');
    if (changesFiles && !refused) {
      throw new DroidError(
        'session_power_unconfirmed',
        `droid did not finish ${what} (${(err as Error).message}): files may be partly put back and the session partly rewound; inspect the workspace`,
      );
    }
    if (err instanceof DroidError && !refused) throw err;
    throw new DroidError('session_power_failed', `droid could not ${what}: ${(err as Error).message}; nothing was submitted`);
  }
}

/**
 * After a writer turn: the files droid's tools changed in it (droid's own
 * rewind list for its message), each with its content now, read without
 * following links. Paths outside the workspace are left out (a rewind never
 * puts them back); unreadable ones and those beyond the cap are counted in
 * `truncated`: a rewind over this turn then refuses rather than guess.
 */
export async function touchedBy(client: DroidClient, droidSessionId: string, messageId: string, workspace: string): Promise<TouchedFiles | null> {
  let info: RewindInfo;
  try {
    info = await rewindInfo(client, droidSessionId, messageId);
  } catch {
    return null;
  }
  const files: TouchedFiles['files'] = [];
  let truncated = 0;
  for (const path of new Set(pathsOf(info))) {
    // Outside the workspace: never put back (withinWorkspace), so nothing to check.
    if (componentsBelow(workspace, path) === null) continue;
    if (files.length >= MAX_TOUCHED) {
      truncated++;
      continue;
    }
    const sha256 = await fileHash(path, workspace);
    if (sha256 === undefined) truncated++;
    else files.push({ path, sha256 });
  }
  return { files, truncated };
}

/**
 * A session power (issue 40) is never left midway: when a stop or droid's
 * exit comes while one runs, the turn waits for it to end (the runner's
 * backstop bounds that). Done, it is in the result; gone unconfirmed, the
 * turn's outcome is unknown. Null: no power under way, or it ended plainly.
 */
export async function powerSettled(state: { powerStarted?: boolean; power?: PowerOutcome }, setup: Promise<unknown>): Promise<TurnStop | null> {
  if (!state.powerStarted || state.power) return null;
  return unconfirmedStop(
    await setup.then(
      () => null,
      (err: unknown) => err,
    ),
  );
}

export function unconfirmedStop(err: unknown): TurnStop | null {
  return err instanceof DroidError && err.code === 'session_power_unconfirmed' ? { kind: 'unconfirmed', error: toErrorInfo(err) } : null;
}
