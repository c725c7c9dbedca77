/**
 * The warm pool: up to `size` pre-forked workers waiting for a turn, each
 * leading its own process group, each (when no sandbox is configured)
 * holding one pre-spawned droid that has not opened a session.
 *
 * Rules it keeps:
 * - A turn takes a ready worker (`take`, synchronous: admission never waits
 *   for the pool) or starts cold. A taken worker belongs to its turn, runs
 *   that one turn and is never given another; the pool forgets it.
 * - The pool refills in the background after a take, a loss or a retirement,
 *   and never holds more than `size` workers (starting, ready, or dropped
 *   and still being killed). After a take it waits until the turn's droid
 *   has its prompt (or the turn ended, or a cap passed): a worker forked
 *   meanwhile would take CPU from that droid's start on a small host.
 * - A worker whose droid died, or that reached `maxAgeMs`, is dropped: its
 *   whole process group is killed and waited for, and it is replaced.
 *   Repeated losses before ready back off (a broken droid must not spin).
 * - Pool workers are ordinary workers: they stop themselves when the
 *   controller goes (IPC disconnect, orphan.ts), and `close` kills them all
 *   and resolves only when every group is gone.
 *
 * Owner: the controller process (cli.ts) creates one pool and closes it on
 * shutdown, after the controller has stopped taking from it.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TextTail } from '../../util/text.js';
import { parseWorkerMessage } from '../contract/ipc.js';
import { killGroupAndWait } from './process-group.js';
import type { TurnSpec, WarmDroidSpec } from '../contract/protocol.js';
import { POOL_ARG } from '../contract/worker-process.js';
import { forkWorker, startWorker, type ConfinedTurn, type WorkerHandle, type WorkerOptions } from './runner.js';
import { sweepWarmFolders, WARM_DIR_PREFIX } from './warm-folders.js';

/** Warm droids are retired after this long, so a changed droid install or settings file is picked up. */
const WARM_MAX_AGE_MS = 10 * 60_000;
/** The server's start-up is followed by the first fill this much later, so they do not compete. */
export const REFILL_DELAY_MS = 1_000;
/**
 * After a take, the refill waits for the turn's droid to have its prompt and
 * then this long more (droid's own work before its first model request,
 * ≈ 200–360 ms: docs/PROTOCOL-NOTES.md), or after the turn's end if it never submitted…
 */
const REFILL_AFTER_SUBMIT_MS = 500;
/** …and never longer than this after the take (a turn whose start is slow or never reported). */
const REFILL_AFTER_TAKE_CAP_MS = 5_000;

export interface WarmPoolOptions {
  /** At most this many workers, starting or ready; 0: no pool. */
  size: number;
  /** The droid a warm worker pre-spawns (same executable and environment as a cold turn's); null: Node worker only. */
  droid: Omit<WarmDroidSpec, 'dir'> | null;
  env?: NodeJS.ProcessEnv;
  workerEntry?: string;
  maxAgeMs?: number;
  /** The refill after a take: at most this long after it (default REFILL_AFTER_TAKE_CAP_MS)… */
  refillDelayMs?: number;
  /** …or this long after the turn's prompt was submitted (or the turn ended), if sooner (default REFILL_AFTER_SUBMIT_MS). */
  refillAfterSubmitMs?: number;
  /** Diagnostics (a worker lost, a refill backing off). */
  onEvent?(event: PoolEvent): void;
  /** Kills a dropped worker's group and resolves once it is gone (default killGroupAndWait; tests hold it open). */
  killGroup?(pid: number): Promise<void>;
}

export type PoolEvent =
  | { kind: 'lost'; pid: number; detail: string; stderrTail: string }
  | { kind: 'retired'; pid: number; ageMs: number }
  | { kind: 'backoff'; failures: number; delayMs: number }
  | { kind: 'swept'; folders: string[] };

/**
 * A worker handed to a turn: the turn owns it from here. `dispose` removes
 * its neutral folder once its group is gone; `startOver` tells the
 * pool when its refill no longer competes with the turn's start.
 */
export interface TakenWorker {
  readonly child: ChildProcess;
  dispose(): void;
  /** The turn's droid has its prompt, or the turn ended without one: called at each, the first counts. */
  startOver(): void;
}

/** How many workers to start now. Pure. */
export function refillCount(s: { size: number; held: number; closed: boolean; backingOff: boolean }): number {
  if (s.closed || s.backingOff) return 0;
  return Math.max(0, s.size - s.held);
}

/** Delay before the next start after `failures` consecutive losses before ready: none, then 1 s doubling to 60 s. Pure. */
export function lossBackoffMs(failures: number): number {
  return failures <= 0 ? 0 : Math.min(60_000, 1_000 * 2 ** (failures - 1));
}

interface Member {
  readonly child: ChildProcess;
  readonly dir: string | null;
  readonly bornAt: number;
  readonly stderr: TextTail;
  ready: boolean;
  ageTimer?: NodeJS.Timeout;
  /** Detaches the pool's listeners (on take or drop). */
  detach(): void;
}

export class WarmPool {
  private readonly members = new Set<Member>();
  /** Groups being killed (dropped or closed members): `close` waits for them. */
  private readonly dying = new Set<Promise<void>>();
  private closed = false;
  private failures = 0;
  private refillTimer: NodeJS.Timeout | undefined;
  /** The pending refill is the one after a take (a turn's start may bring it forward; a back-off may not be). */
  private refillAfterTake = false;
  private refillDueAt = 0;
  private readonly maxAgeMs: number;
  private readonly refillDelayMs: number;
  private readonly refillAfterSubmitMs: number;

  constructor(private readonly options: WarmPoolOptions) {
    this.maxAgeMs = options.maxAgeMs ?? WARM_MAX_AGE_MS;
    this.refillDelayMs = options.refillDelayMs ?? REFILL_AFTER_TAKE_CAP_MS;
    this.refillAfterSubmitMs = options.refillAfterSubmitMs ?? REFILL_AFTER_SUBMIT_MS;
  }

  /**
   * Starts filling the pool in the background, after `delayMs` (the server
   * passes REFILL_DELAY_MS, so its own start-up and first catalog probe do not
   * share the CPU with a warm droid's start).
   */
  start(delayMs = 0): void {
    // Folders a pool killed outright left behind (this one's or an earlier controller's).
    if (this.options.droid) {
      const swept = sweepWarmFolders(tmpdir());
      if (swept.length > 0) this.options.onEvent?.({ kind: 'swept', folders: swept });
    }
    if (delayMs > 0) this.scheduleRefill(delayMs);
    else this.refill();
  }

  /** Workers held now (starting or ready), and how many are ready. */
  get counts(): { held: number; ready: number } {
    let ready = 0;
    for (const m of this.members) if (m.ready) ready++;
    return { held: this.members.size, ready };
  }

  /** Process ids of the workers held now (for tests and diagnostics). */
  get pids(): number[] {
    return [...this.members].map((m) => m.child.pid ?? -1);
  }

  /** A ready worker, now the caller's; null when none is ready (start cold). Never waits. */
  take(): TakenWorker | null {
    if (this.closed) return null;
    for (const member of this.members) {
      if (!member.ready || member.child.exitCode !== null || member.child.signalCode !== null || !member.child.connected) continue;
      this.members.delete(member);
      member.detach();
      if (!this.refillTimer) {
        this.scheduleRefill(this.refillDelayMs);
        this.refillAfterTake = true;
      }
      const dir = member.dir;
      return {
        child: member.child,
        dispose: () => dir && rmSync(dir, { recursive: true, force: true }),
        // The same short wait after either: droid's work right after its prompt, or the turn's cleanup.
        startOver: () => this.refillSooner(this.refillAfterSubmitMs),
      };
    }
    return null;
  }

  /** Stops refilling, kills every held worker's group and resolves once all are gone. */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.refillTimer);
    for (const member of [...this.members]) this.drop(member);
    while (this.dying.size) await Promise.all([...this.dying]);
  }

  /** Brings a take's pending refill forward to `delayMs` from now (never a back-off's, never later). */
  private refillSooner(delayMs: number): void {
    if (this.closed || !this.refillAfterTake || this.refillDueAt <= Date.now() + delayMs) return;
    clearTimeout(this.refillTimer);
    this.refillTimer = undefined;
    this.scheduleRefill(delayMs);
  }

  private scheduleRefill(delayMs: number): void {
    if (this.closed || this.refillTimer) return;
    this.refillAfterTake = false;
    this.refillDueAt = Date.now() + delayMs;
    this.refillTimer = setTimeout(() => {
      this.refillTimer = undefined;
      this.refill();
    }, delayMs);
    this.refillTimer.unref();
  }

  private refill(): void {
    // A dropped worker still being killed counts: the pool never has more than `size` groups alive.
    const held = this.members.size + this.dying.size;
    const n = refillCount({ size: this.options.size, held, closed: this.closed, backingOff: this.refillTimer !== undefined });
    for (let i = 0; i < n; i++) {
      try {
        this.spawn();
      } catch (err) {
        this.lost(null, `could not fork a warm worker: ${(err as Error).message}`, '');
        return;
      }
    }
  }

  private spawn(): void {
    const dir = this.options.droid ? mkdtempSync(join(tmpdir(), WARM_DIR_PREFIX)) : null;
    let child: ChildProcess;
    try {
      child = forkWorker({ ...(this.options.env && { env: this.options.env }), ...(this.options.workerEntry && { workerEntry: this.options.workerEntry }) }, [
        POOL_ARG,
      ]);
    } catch (err) {
      if (dir) rmSync(dir, { recursive: true, force: true });
      throw err;
    }
    const stderr = new TextTail(4_000);
    const onData = (chunk: string) => stderr.push(chunk);
    const onMessage = (raw: unknown) => {
      const parsed = parseWorkerMessage(raw);
      if (!parsed.ok) return;
      if (parsed.message.type === 'warm_ready') {
        member.ready = true;
        this.failures = 0;
      } else if (parsed.message.type === 'warm_lost') this.lost(member, parsed.message.detail, stderr.toString());
    };
    const onExit = (code: number | null, signal: NodeJS.Signals | null) =>
      this.lost(member, `warm worker exited (${signal ? `signal ${signal}` : `code ${code}`})`, stderr.toString());
    const onError = (err: Error) => this.lost(member, `warm worker failed: ${err.message}`, stderr.toString());
    const member: Member = {
      child,
      dir,
      bornAt: Date.now(),
      stderr,
      ready: false,
      detach: () => {
        clearTimeout(member.ageTimer);
        child.stderr?.off('data', onData);
        child.off('message', onMessage);
        child.off('exit', onExit);
        child.off('error', onError);
      },
    };
    child.stderr?.setEncoding('utf8');
    child.stderr?.on('data', onData);
    child.on('message', onMessage);
    child.once('exit', onExit);
    child.once('error', onError);
    this.members.add(member);
    member.ageTimer = setTimeout(() => this.retire(member), this.maxAgeMs);
    member.ageTimer.unref();
    const droid = this.options.droid && dir ? { ...this.options.droid, dir } : null;
    child.send({ type: 'warm', droid }, () => undefined);
  }

  /** A held worker (or its droid) died before any turn: drop it, refill (backing off when it keeps happening). */
  private lost(member: Member | null, detail: string, stderrTail: string): void {
    if (member && !this.members.has(member)) return;
    if (member) this.drop(member);
    this.options.onEvent?.({ kind: 'lost', pid: member?.child.pid ?? -1, detail, stderrTail });
    if (this.closed) return;
    this.failures++;
    const delayMs = lossBackoffMs(this.failures);
    if (this.failures > 1) this.options.onEvent?.({ kind: 'backoff', failures: this.failures, delayMs });
    this.scheduleRefill(delayMs);
  }

  private retire(member: Member): void {
    if (!this.members.has(member)) return;
    this.drop(member);
    this.options.onEvent?.({ kind: 'retired', pid: member.child.pid ?? -1, ageMs: Date.now() - member.bornAt });
    this.scheduleRefill(0);
  }

  /** Forgets the member first, then kills its group and removes its folder once the group is gone. */
  private drop(member: Member): void {
    this.members.delete(member);
    member.detach();
    const pid = member.child.pid ?? -1;
    const gone = (this.options.killGroup ?? killGroupAndWait)(pid).finally(() => {
      if (member.dir) rmSync(member.dir, { recursive: true, force: true });
      this.dying.delete(gone);
      // Its place is free now (a pending back-off timer, if any, still decides when).
      this.scheduleRefill(0);
    });
    this.dying.add(gone);
  }
}

/**
 * Starts a turn's worker: the one its droid was started in early
 * (prestart.ts), else a warm one from the pool when one is ready, else a
 * cold fork. The pool worker's neutral folder goes once its group is gone.
 */
export function startPooledWorker(
  pool: WarmPool | null,
  spec: TurnSpec,
  options: WorkerOptions,
  early?: { worker: TakenWorker; confined: ConfinedTurn },
): WorkerHandle {
  const earlyChild = early?.worker.child;
  const earlyLives = earlyChild !== undefined && earlyChild.exitCode === null && earlyChild.signalCode === null && earlyChild.connected;
  // A worker that died while its turn waited would never say so again: the turn takes another, with the same folders.
  if (early && !earlyLives) void killGroupAndWait(earlyChild?.pid ?? -1).finally(() => early.worker.dispose());
  const warm = (earlyLives ? early!.worker : null) ?? pool?.take() ?? null;
  if (early) options = { ...options, confined: early.confined };
  if (!warm) return startWorker(spec, options);
  let handle: WorkerHandle;
  const onStarted: WorkerOptions['onStarted'] = (droidSessionId, stages) => {
    warm.startOver();
    options.onStarted?.(droidSessionId, stages);
  };
  try {
    handle = startWorker(spec, { ...options, onStarted, worker: warm.child });
  } catch (err) {
    warm.startOver();
    void killGroupAndWait(warm.child.pid ?? -1).finally(() => warm.dispose());
    throw err;
  }
  void handle.result.finally(() => warm.startOver());
  void handle.cleanedUp.finally(() => warm.dispose());
  return handle;
}
