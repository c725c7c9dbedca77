/**
 * A live turn's running usage: in memory at once (status, waits and usage
 * read it from the turn), durable now and then.
 *
 * Durable writes are coalesced: the first figure of a turn is written at
 * once, later ones at most once per `intervalMs` per turn (the newest figure
 * when the interval is up), and the terminal commit writes the final figure
 * as before. Why that is enough: readers of a running turn read memory, and
 * the budget is enforced in the worker from droid's own reports, so a
 * durable figure matters only after a crash, where the turn becomes
 * `unknown` and its session cannot continue. The figure it leaves is then
 * at most one interval behind, and marked as not final (`usageLive`).
 */
import { sameUsage } from '../../droid/turn-usage.js';
import { LIVE_STATES, type TokenUsage } from '../../shared/records.js';
import type { ControllerState } from '../controller-state.js';
import type { Turn } from './turn.js';

/** Default interval between two durable writes of one turn's running usage. */
const LIVE_USAGE_WRITE_MS = 10_000;

interface Pending {
  lastWriteAt: number;
  timer: NodeJS.Timeout | undefined;
}

export class LiveUsage {
  private readonly pending = new Map<string, Pending>();
  /** Turns whose result came: a report after it (IPC order is not the chain's) is ignored, never pending again. */
  private readonly ended = new WeakSet<Turn>();

  constructor(
    private readonly state: ControllerState,
    /** A turn's running figure is made durable at most this often. */
    private readonly intervalMs: number = LIVE_USAGE_WRITE_MS,
  ) {}

  /** The worker reported a new running figure for `turn`. */
  report(turn: Turn, usage: TokenUsage): void {
    if (this.ended.has(turn)) return;
    turn.recordUsage(usage);
    // Summaries (session spend) read the turn's figure: they are made again.
    this.state.reader.invalidate(turn.sessionId);
    this.state.changed();
    const entry = this.pending.get(turn.runId) ?? { lastWriteAt: -Infinity, timer: undefined };
    this.pending.set(turn.runId, entry);
    if (entry.timer !== undefined) return;
    const wait = entry.lastWriteAt + this.intervalMs - this.state.now().getTime();
    if (wait <= 0) return this.write(turn, entry);
    entry.timer = setTimeout(() => this.write(turn, entry), wait);
    entry.timer.unref();
  }

  /** The turn ended (its terminal commit carries the final figure): nothing more is written for it. */
  forget(turn: Turn): void {
    this.ended.add(turn);
    const entry = this.pending.get(turn.runId);
    if (entry?.timer !== undefined) clearTimeout(entry.timer);
    this.pending.delete(turn.runId);
  }

  private write(turn: Turn, entry: Pending): void {
    entry.timer = undefined;
    entry.lastWriteAt = this.state.now().getTime();
    const { state } = this;
    void state
      .serialized(async () => {
        const usage = turn.usage;
        const run = state.run(turn.runId);
        // Ended meanwhile (its terminal record stands), or the figure is already durable.
        if (!this.pending.has(turn.runId) || usage === null || !LIVE_STATES.includes(run.state) || state.halted) return;
        if (run.usage !== null && run.usageLive === true && sameUsage(run.usage, usage)) return;
        await state.commit({ runs: [{ ...run, usage, usageLive: true }] });
      })
      .catch((err) => state.log.warn({ err, run: turn.runId }, 'could not record the running usage; it is kept in memory and written with the result'));
  }
}
