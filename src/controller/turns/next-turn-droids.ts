/**
 * A droid booted ahead for a session's next turn (issue 38, item 1). Every
 * caller runs the same loop: wait until the session is idle, then send. A
 * droid started only when the send comes spends its whole boot (≈ 0.45 s
 * bare here, more in bwrap) on the caller's path; this one boots while the
 * session's current turn runs.
 *
 * - One per session, started once the session's running turn has started
 *   its own droid (never beside that boot, on a small host).
 * - Its folders are named by the run id the session's next acceptance will
 *   get (`runIdFor`), so once it launched a crash finds them as any run's
 *   (session-copy.ts recoverSessionCopies).
 * - It has no prompt and no session until its run launches; the run's
 *   launch decides whether it is used (run-turn.ts turnDroid).
 * - It goes when its run takes it, `idleMs` after the session's turns stop,
 *   or at shutdown; never while a run holding its id waits to launch (that
 *   run's folders have its names). At most `max` are kept (the host's
 *   capacity): for a new one the one idle longest goes, and none is booted
 *   when none may go. An idle droid holds ≈ 180 MB and wakes now and
 *   then (≈ 1 % of a core here), so they are bounded like turns.
 */
import { randomUUID } from 'node:crypto';
import type { Prestart } from '../../worker/parent/prestart.js';

interface Ahead {
  readonly runId: string;
  /** Null while the worker fork waits its turn (`prepare`), or when none could be started. */
  prestart: Prestart | null;
  /** The session's next acceptance has been given `runId`. */
  claimed: boolean;
  /** Set while the session is idle: it goes then. */
  timer?: NodeJS.Timeout;
  /** While the session is idle: when it became so, in the order sessions did (the longest idle goes first). */
  idleSince?: number;
}

export class NextTurnDroids {
  private readonly bySession = new Map<string, Ahead>();
  private stopped = false;
  private idleOrder = 0;

  constructor(
    private readonly idleMs: number,
    private readonly max: number,
    /** Whether the run with this id is being committed, waits to launch or runs: its droid, folders and id are its own until it launches. */
    private readonly waiting: (runId: string) => boolean,
  ) {}

  /** The id of the session's next run: the one a droid boots for (once), else a new one. */
  runIdFor(sessionId: string): string {
    const ahead = this.bySession.get(sessionId);
    if (!ahead || ahead.claimed) return randomUUID();
    ahead.claimed = true;
    return ahead.runId;
  }

  /**
   * Boots a droid for the session's next turn unless it has one. `ready`
   * waits for the moment (a fork blocks the event loop: turn-owner.ts
   * forkTurn) and says whether it is still wanted; `boot` then starts it
   * under that run's id, synchronously, so no launch of that run can come
   * between its folders being made and this droid being held (null: none).
   */
  async prepare(sessionId: string, ready: () => Promise<boolean>, boot: (runId: string) => Prestart | null): Promise<void> {
    if (this.stopped || this.bySession.has(sessionId) || !this.roomForOne()) return;
    const ahead: Ahead = { runId: randomUUID(), prestart: null, claimed: false };
    this.bySession.set(sessionId, ahead);
    let wanted = false;
    try {
      wanted = await ready();
    } finally {
      // Gone meanwhile (its run launched first, timed out, shut down): that run starts its own droid.
      const held = this.bySession.get(sessionId) === ahead && !this.stopped;
      try {
        ahead.prestart = held && wanted ? boot(ahead.runId) : null;
      } finally {
        if (!ahead.prestart) void this.forget(sessionId, ahead);
      }
    }
  }

  /** A turn of the session launches: the droid booted for `runId`, once; another run's stays for its own. */
  take(sessionId: string, runId: string): Prestart | null {
    const ahead = this.bySession.get(sessionId);
    if (!ahead) return null;
    clearTimeout(ahead.timer);
    delete ahead.idleSince;
    if (ahead.runId !== runId) return null;
    this.bySession.delete(sessionId);
    return ahead.prestart;
  }

  /** The session's turn is over: its droid waits `idleMs` for the next one, then goes. */
  idle(sessionId: string): void {
    const ahead = this.bySession.get(sessionId);
    if (!ahead) return;
    clearTimeout(ahead.timer);
    ahead.idleSince = ++this.idleOrder;
    ahead.timer = setTimeout(() => (this.spare(ahead) ? this.forget(sessionId, ahead) : this.idle(sessionId)), this.idleMs).unref();
  }

  /** Shutting down: every droid booted ahead goes; settles once their groups are gone. */
  async stop(): Promise<void> {
    this.stopped = true;
    const all = [...this.bySession.entries()];
    await Promise.all(all.map(([sessionId, ahead]) => this.forget(sessionId, ahead)));
  }

  /** How many sessions have a droid booting or booted ahead (for status and tests). */
  get size(): number {
    return this.bySession.size;
  }

  /** Below `max`, or made so by letting the droid of the session idle longest go; false when none may go. */
  private roomForOne(): boolean {
    if (this.bySession.size < this.max) return true;
    let oldest: [string, Ahead] | null = null;
    for (const entry of this.bySession) {
      if (entry[1].idleSince !== undefined && this.spare(entry[1]) && (!oldest || entry[1].idleSince < oldest[1].idleSince!)) oldest = entry;
    }
    if (!oldest) return false;
    void this.forget(...oldest);
    return true;
  }

  /** Whether it may go: no run holds its id, or that run has ended without launching (dropped, refused, its commit failed). */
  private spare(ahead: Ahead): boolean {
    return !ahead.claimed || !this.waiting(ahead.runId);
  }

  private forget(sessionId: string, ahead: Ahead): Promise<void> {
    clearTimeout(ahead.timer);
    if (this.bySession.get(sessionId) === ahead) this.bySession.delete(sessionId);
    const prestart = ahead.prestart;
    ahead.prestart = null;
    return prestart?.dispose() ?? Promise.resolve();
  }
}
