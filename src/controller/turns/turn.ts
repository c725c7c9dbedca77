/**
 * One accepted turn in memory, from acceptance until it leaves the
 * controller: the only place the controller keeps anything about a turn in
 * memory. It owns the turn's claim (capacity slot + workspace lock), its
 * prompt until the worker takes it, its worker handle, its live events and
 * partial text, its cancel request and the reply-back sends approved in it.
 * The controller's map of these objects is the whole in-memory state of
 * turns; the durable record is the store's.
 *
 *              requeue: the `starting` commit failed, or a stop came first
 *          ┌──────────────────────┐
 *          ▼                      │
 *       queued ───admit───▶ admitted ───start───▶ starting ───attach───▶ live
 *          │                      │                  │                    │
 *          │                      └───────end────────┴────────end─────────┴───▶ ended
 *          │
 *          └──drop──▶ released ◀──release── admitted, starting, live or ended
 *
 * The phase is private and only these methods move it; any other move is a
 * programming error and throws. A claim is held from `admit` until
 * `release`, which only the turn's owner calls, in its `finally`, after the
 * worker and its process group are gone. `drop` is for a turn ended while
 * still in line, which holds nothing. `end` comes only once the outcome is
 * durable, and only then does the worker hear of it.
 */
import type { ProgressEvent } from '../../droid/turn-collector.js';
import type { ProgressRecord, TokenUsage } from '../../shared/records.js';
import type { WorkerHandle } from '../../worker/parent/runner.js';
import type { LockClaim } from './admission.js';
import { appendEvent } from './run-outcome.js';

type Phase = 'queued' | 'admitted' | 'starting' | 'live' | 'ended' | 'released';

/** Delay before retrying a turn whose `starting` commit failed: 1 s doubling to 30 s. */
function startRetryDelayMs(failures: number): number {
  return Math.min(30_000, 1_000 * 2 ** Math.max(0, failures - 1));
}

export class Turn {
  private phase: Phase = 'queued';
  /** Not admitted before this time (ms since epoch): a failed start waits out its delay. */
  private notBefore = 0;
  private startFailures = 0;
  private stopAsked = false;
  private worker: WorkerHandle | null = null;
  private prompt: string | null;
  /** Bounded progress log; persisted with the result. */
  readonly events: ProgressRecord[] = [];
  private text = '';
  private runningUsage: TokenUsage | null = null;
  /** Puck sends the reply gate approved in this turn, by tool-use id, with the route they were approved on. */
  private readonly approvedSends = new Map<string, string>();
  /**
   * Settles once the turn leaves `admitted`: its `starting` commit is done,
   * or its owner gave up before that (ended it unsubmitted, put it back in
   * line, released it): an acceptance that admitted the turn reports it from here.
   */
  readonly launched: Promise<void>;
  private markLaunched!: () => void;
  /** A later turn of this session waits for this one's claim: its worker skips the Factory title. */
  private renameSkipped = false;

  constructor(
    readonly runId: string,
    readonly claim: LockClaim,
    prompt: string,
    /** The caller's outputSchema, like the prompt kept in memory only (a queued turn does not survive a restart). */
    readonly outputSchema: Record<string, unknown> | null,
  ) {
    this.prompt = prompt;
    this.launched = new Promise((resolve) => (this.markLaunched = resolve));
  }

  get sessionId(): string {
    return this.claim.sessionId;
  }

  /** Admitted and not yet released: the slot and the workspace lock are this turn's. */
  holdsClaim(): boolean {
    return this.phase !== 'queued' && this.phase !== 'released';
  }

  /** Waiting for admission (never admitted, or back in line). */
  inLine(): boolean {
    return this.phase === 'queued';
  }

  /** Not admitted before this time (ms since epoch). */
  get retryAt(): number {
    return this.notBefore;
  }

  /** Someone asked for this turn to stop (cancel or steering), as opposed to a shutdown. */
  get cancelRequested(): boolean {
    return this.stopAsked;
  }

  /** Latest assistant text: a running turn's only history. */
  get partialText(): string {
    return this.text;
  }

  /** The running usage the worker last reported (live-usage.ts makes it durable now and then); null: none yet. */
  get usage(): TokenUsage | null {
    return this.runningUsage;
  }

  recordUsage(usage: TokenUsage): void {
    this.runningUsage = usage;
  }

  /** queued → admitted: the claim is held from here; only the owner gives it back. */
  admit(): void {
    this.move('admit', ['queued'], 'admitted');
  }

  /**
   * admitted → queued: not started, so it keeps its place in line. After a
   * failed `starting` commit (`failedAt`, ms since epoch) it also waits out a
   * delay that grows with each failure.
   */
  requeue(failedAt?: number): void {
    this.move('requeue', ['admitted'], 'queued');
    if (failedAt !== undefined) this.notBefore = failedAt + startRetryDelayMs(++this.startFailures);
  }

  /** admitted → starting: the `starting` commit is durable. */
  start(): void {
    this.move('start', ['admitted'], 'starting');
  }

  /** starting → live: the worker runs the turn. */
  attach(worker: WorkerHandle): void {
    this.move('attach', ['starting'], 'live');
    this.worker = worker;
    // A cancel that arrived while the turn was launching is honoured now.
    if (this.stopAsked) worker.cancel();
    if (this.renameSkipped) worker.skipRename();
  }

  /** → ended: the outcome is durable, so a worker may hear so and exit. */
  end(): void {
    this.move('end', ['admitted', 'starting', 'live'], 'ended');
    this.worker?.acknowledge();
  }

  /** → released: the owner gives the claim back, once the worker and its group are gone. */
  release(): void {
    this.move('release', ['admitted', 'starting', 'live', 'ended'], 'released');
  }

  /** queued → released: ended while still in line (it held nothing). */
  drop(): void {
    this.move('drop', ['queued'], 'released');
  }

  /** The prompt goes to exactly one worker; memory keeps no copy after that. */
  takePrompt(): string {
    const prompt = this.prompt ?? '';
    this.prompt = null;
    return prompt;
  }

  /**
   * A follow-up of this session waits for this turn's claim: the Factory
   * title is left for a later turn (spec: an unfinished rename is retried on
   * the next turn) rather than held on the follow-up's path. Idempotent.
   */
  skipRename(): void {
    if (this.renameSkipped) return;
    this.renameSkipped = true;
    this.worker?.skipRename();
  }

  /** A stop somebody asked for; idempotent. */
  requestStop(): void {
    if (this.stopAsked) return;
    this.stopAsked = true;
    this.worker?.cancel();
  }

  /** A stop nobody asked for (controller shutdown or halt): the outcome needs attention. */
  stopUnrequested(): void {
    this.worker?.cancel();
  }

  record(event: ProgressEvent, at: string): boolean {
    if (event.kind === 'assistant_text' || event.kind === 'assistant_partial') this.text = event.text;
    // Streaming snapshots are frequent: they update the partial text, not the event log.
    if (event.kind === 'assistant_partial') return false;
    appendEvent(this.events, event, at);
    return true;
  }

  /** The gate approved this send on `routeId`: only its own result may prove a handle. */
  approveSend(toolUseId: string, routeId: string): void {
    this.approvedSends.set(toolUseId, routeId);
  }

  /** The route a send was approved on, once: a second result for it proves nothing. */
  takeApprovedSend(toolUseId: string): string | undefined {
    const routeId = this.approvedSends.get(toolUseId);
    this.approvedSends.delete(toolUseId);
    return routeId;
  }

  private move(verb: string, from: readonly Phase[], to: Phase): void {
    if (!from.includes(this.phase)) throw new Error(`internal: turn ${this.runId} cannot ${verb} while ${this.phase}`);
    if (this.phase === 'admitted') this.markLaunched();
    this.phase = to;
  }
}
