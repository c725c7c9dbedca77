/**
 * The state directory read the way start-up reads it, without owning it:
 * the same privacy checks, the same owner record and identity checks, the
 * same judgement of the owner lock and the same loader (load.ts), so every
 * refusal is the StoreError start-up would throw, word for word. Nothing is
 * created, locked or written (no startup lock either: a reader must not make
 * a starting server wait). The operator commands `status`, `doctor`,
 * `backup` and `restore` read through it, while a server runs or not.
 */
import { realpath, stat } from 'node:fs/promises';
import { errCode } from '../util/errno.js';
import { StoreError } from './errors.js';
import type { TornTail } from './formats/journal.js';
import { loadState, type LoadedState } from './load.js';
import { currentIdentity, judgeOwnerLock, readOwnerRecord, refuseOtherIdentity, type OwnerLock, type OwnerRecord } from './owner-lock.js';
import { refuseSharedStateDir } from './state-dir.js';
import { LIVE_STATES, type RunRecord, type RunState } from '../shared/records.js';

/** A turn that is live (starting, running, cancelling) or queued. */
export interface TurnSeen {
  run: string;
  /** Its position in the session. */
  seq: number;
  kind: RunRecord['kind'];
  state: RunState;
  acceptedAt: string;
  startedAt: string | null;
}

export interface SessionSeen {
  id: string;
  workspace: string;
  title: string | null;
  /** Its live and queued turns, in order. */
  turns: TurnSeen[];
}

export interface StateSeen {
  dir: string;
  /** False: no state directory yet (the server creates it at its first start); nothing below was read. */
  exists: boolean;
  /** owner.json; undefined when there is none (never started, or a new directory). */
  owner: OwnerRecord | undefined;
  /** The owner lock as start-up would judge it. */
  lock: OwnerLock;
  /** The last commit's sequence number. */
  seq: number;
  sessions: number;
  runs: number;
  /** Sessions with a live or queued turn. */
  inFlight: SessionSeen[];
  /** The journal ends in a torn line: start-up copies it aside and cuts it off. */
  tornTail: TornTail | undefined;
}

/** A live owner may be compacting while we read (a new snapshot, the journal cut): read again this often before believing a refusal. */
const LIVE_READS = 4;
const LIVE_REREAD_MS = 150;

const pause = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, LIVE_REREAD_MS));

export async function inspectState(dir: string): Promise<StateSeen> {
  let info;
  try {
    info = await stat(dir);
  } catch (err) {
    if (errCode(err) !== 'ENOENT') throw err;
    return { dir, exists: false, owner: undefined, lock: { kind: 'free' }, seq: 0, sessions: 0, runs: 0, inFlight: [], tornTail: undefined };
  }
  refuseSharedStateDir(dir, info);
  const owner = await readOwnerRecord(dir);
  if (owner) refuseOtherIdentity(dir, owner, currentIdentity());
  const lock = await judgeOwnerLock(dir, await realpath(dir), owner);
  for (let read = 1; ; read++) {
    const live = lock.kind === 'live' && read < LIVE_READS;
    let loaded: LoadedState;
    try {
      loaded = await loadState(dir);
    } catch (err) {
      if (live && err instanceof StoreError) {
        await pause();
        continue;
      }
      throw err;
    }
    try {
      // A live owner's commit being appended looks like a torn tail for a moment.
      if (live && loaded.tornTail) {
        await pause();
        continue;
      }
      return {
        dir,
        exists: true,
        owner,
        lock,
        seq: loaded.seq,
        sessions: loaded.index.sessions.size,
        runs: loaded.index.runs.size,
        inFlight: inFlight(loaded),
        tornTail: loaded.tornTail,
      };
    } finally {
      await loaded.index.runs.close();
    }
  }
}

/** Sessions with live or queued turns; only those turns' records are read back. */
function inFlight({ index }: LoadedState): SessionSeen[] {
  const bySession = new Map<string, SessionSeen>();
  for (const fact of index.runs.facts()) {
    if (fact.state !== 'queued' && !LIVE_STATES.includes(fact.state)) continue;
    const session = index.sessions.get(fact.sessionId);
    if (!session) continue;
    let seen = bySession.get(session.id);
    if (!seen) bySession.set(session.id, (seen = { id: session.id, workspace: session.workspace, title: session.title, turns: [] }));
    const run = index.runs.recordOf(fact);
    seen.turns.push({ run: run.id, seq: run.seq, kind: run.kind, state: run.state, acceptedAt: run.acceptedAt, startedAt: run.startedAt });
  }
  for (const s of bySession.values()) s.turns.sort((a, b) => a.seq - b.seq);
  return [...bySession.values()];
}

/**
 * Whether a live owner holds `dir`, judged as start-up would, for commands
 * that must not run beside a server (backup, restore) even on a state start-up
 * would refuse: an owner record that cannot be read counts as none.
 */
export async function heldBy(dir: string): Promise<OwnerLock> {
  let real: string;
  try {
    real = await realpath(dir);
  } catch (err) {
    if (errCode(err) === 'ENOENT') return { kind: 'free' };
    throw err;
  }
  const owner = await readOwnerRecord(dir).catch(() => undefined);
  return judgeOwnerLock(dir, real, owner);
}
