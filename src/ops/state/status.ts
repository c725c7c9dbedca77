/**
 * `droid-mcp status --config FILE [--json]`: what a restart would cut short,
 * read from the durable state (store/inspect.ts: start-up's own checks and
 * loader, read-only, no lock taken), whether or not a server runs: the live
 * and queued turns of each session, and the owner process and whether it is
 * alive. A process list cannot tell: a warm worker retitles itself, and an
 * idle one looks like a busy one.
 *
 * Exit status: 0 when nothing is live or queued (a restart loses nothing),
 * 3 while a live owner has a live or queued turn or its process is alive but
 * unresponsive (stopped or hung: it still holds whatever it was doing), 1
 * when the state cannot be read (the refusal start-up would give), 2 on bad
 * arguments.
 */
import { StoreError } from '../../store/errors.js';
import { inspectState, type StateSeen, type TurnSeen } from '../../store/inspect.js';
import { LIVE_STATES } from '../../shared/records.js';
import { command, CommandRefusal } from '../command.js';
import { readConfigFile } from '../config-file.js';
import { out } from '../output.js';

const STATUS_BUSY = 3;

const isLive = (t: TurnSeen): boolean => LIVE_STATES.includes(t.state);

/** Counts of live and queued turns, and whether a live owner is running them. */
function busyness(seen: StateSeen): { live: number; queued: number; ownerAlive: boolean; busy: boolean } {
  const turns = seen.inFlight.flatMap((s) => s.turns);
  const live = turns.filter(isLive).length;
  const queued = turns.length - live;
  const ownerAlive = seen.lock.kind === 'live' || seen.lock.kind === 'unresponsive';
  return { live, queued, ownerAlive, busy: (ownerAlive && turns.length > 0) || seen.lock.kind === 'unresponsive' };
}

/** The owner line: who owns the directory, and whether it is alive. */
function ownerLine(seen: StateSeen): string {
  const { owner, lock } = seen;
  const who = owner
    ? `pid ${owner.pid} (host ${owner.hostname}, HOME ${owner.home}, FACTORY_HOME_OVERRIDE ${owner.factoryHomeOverride ?? 'unset'}, started ${owner.startedAt})`
    : 'none recorded';
  if (lock.kind === 'live')
    return lock.pid === null ? 'owner: a process that left no owner record holds the lock (alive)' : `owner: ${who}: alive, holds the state directory`;
  if (lock.kind === 'unresponsive') return `owner: ${who}: alive but unresponsive (${lock.why}); it still holds the state directory`;
  if (lock.kind === 'dead') return `owner: ${who}: not running (${lock.dead.why}); the next start takes its lock over`;
  return owner ? `owner: ${who}: not running (stopped cleanly)` : 'owner: none yet (no controller has started on it)';
}

function turnLine(t: TurnSeen): string {
  const since = isLive(t) ? `since ${t.startedAt ?? t.acceptedAt}` : `accepted ${t.acceptedAt}`;
  return `    turn ${t.seq}  ${t.state.padEnd(10)}  ${since}  run ${t.run}`;
}

/** The human report. */
function statusLines(seen: StateSeen): string[] {
  if (!seen.exists) return [`state directory ${seen.dir} does not exist yet: no controller has run on it`, 'idle: nothing live or queued.'];
  const { live, queued, ownerAlive, busy } = busyness(seen);
  const lines = [`state directory ${seen.dir}: ${seen.sessions} session(s), ${seen.runs} run(s), last commit ${seen.seq}`, ownerLine(seen)];
  if (seen.tornTail && !ownerAlive)
    lines.push(
      `journal: ends in a torn line (line ${seen.tornTail.line}, ${seen.tornTail.bytes} bytes, never acknowledged): the next start copies it aside and cuts it off`,
    );
  for (const s of seen.inFlight) {
    lines.push(`  session ${s.id}  ${s.workspace}${s.title ? `  ${JSON.stringify(s.title)}` : ''}`, ...s.turns.map(turnLine));
  }
  if (seen.lock.kind === 'unresponsive') {
    const pid = seen.lock.pid;
    lines.push(
      `unresponsive: ${live} live and ${queued} queued turn(s), and the owner, pid ${pid}, does not keep its lock fresh. Find out why (kill -CONT ${pid} if it was stopped) before a restart, backup or restore; a restart cuts short whatever it holds.`,
    );
  } else if (busy) {
    lines.push(
      `busy: ${live} live and ${queued} queued turn(s). A restart now interrupts the live ones (they end interrupted) and drops the queued ones (queue_lost): wait for them, or hold the callers first.`,
    );
  } else if (live + queued > 0) {
    // A clean stop leaves queued turns queued too; start-up's recovery words both (store/recovery.ts).
    lines.push(
      `not running: ${live} live and ${queued} queued turn(s) were left when the controller stopped; the next start marks live ones unknown and queued ones queue_lost (nothing to wait for).`,
    );
  } else lines.push('idle: nothing live or queued; a restart loses nothing.');
  return lines;
}

/** The `--json` report. */
function statusJson(seen: StateSeen): Record<string, unknown> {
  const { live, queued, ownerAlive, busy } = busyness(seen);
  return {
    ok: true,
    stateDirectory: seen.dir,
    exists: seen.exists,
    owner: seen.owner ? { ...seen.owner, alive: ownerAlive } : seen.lock.kind === 'live' ? { pid: null, alive: true } : null,
    lock: { live: 'held', unresponsive: 'held_unresponsive', dead: 'left_by_dead_owner', free: 'free' }[seen.lock.kind],
    seq: seen.seq,
    sessions: seen.sessions,
    runs: seen.runs,
    live,
    queued,
    busy,
    inFlight: seen.inFlight,
    tornTail: seen.tornTail ?? null,
  };
}

export const statusCommand = command({
  usage: ['--config /abs/config.json [--json]'],
  summary: [
    'what a restart would cut short, from the durable state',
    '(read-only, no lock): live and queued turns per session,',
    'the owner process and whether it is alive; exit 3 while busy',
  ],
  options: { config: { type: 'string' }, json: { type: 'boolean', default: false } },
  async run(values) {
    if (!values.config) throw new CommandRefusal('--config /absolute/path/to/config.json is required');
    const file = await readConfigFile(values.config).catch((err: unknown) => {
      throw new CommandRefusal(err instanceof Error ? err.message : String(err));
    });
    let seen: StateSeen;
    try {
      seen = await inspectState(file.stateDirectory);
    } catch (err) {
      if (!(err instanceof StoreError)) throw err;
      if (values.json)
        out(JSON.stringify({ ok: false, stateDirectory: file.stateDirectory, error: { code: err.code, message: err.problem, action: err.action } }, null, 2));
      else out(`state directory ${file.stateDirectory} cannot be read: start-up would refuse it (${err.code}): ${err.problem}\n→ ${err.action}`);
      return 1;
    }
    if (values.json) out(JSON.stringify(statusJson(seen), null, 2));
    else for (const line of statusLines(seen)) out(line);
    return busyness(seen).busy ? STATUS_BUSY : 0;
  },
});
