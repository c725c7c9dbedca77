/**
 * One admitted turn, from acceptance to cleanup: the only place the
 * controller keeps anything about a turn in memory. It owns the turn's
 * claim (capacity slot + workspace lock), its prompt until the worker takes
 * it, its worker handle, its live events and partial text, and its cancel
 * request. The controller's map of these objects is the whole in-memory
 * state of turns; the durable record is the store's.
 *
 *   queued ─▶ admitted ─▶ live ─▶ (removed from the map: claim released)
 *     ▲           │
 *     └───────────┘  the `starting` commit failed: back in line, retried later
 *
 * A claim is held from `admitted` until the owner's `finally` removes the
 * turn, which happens only after the worker and its process group are gone.
 */
import type { ProgressEvent } from '../droid/turn-collector.js';
import type { ProgressRecord } from '../shared/records.js';
import type { WorkerHandle } from '../worker/parent/runner.js';
import type { LockClaim } from './admission.js';
import { appendEvent } from './run-outcome.js';

export type TurnPhase = 'queued' | 'admitted' | 'live';

/** Delay before retrying a turn whose `starting` commit failed: 1 s doubling to 30 s. */
export function startRetryDelayMs(failures: number): number {
  return Math.min(30_000, 1_000 * 2 ** Math.max(0, failures - 1));
}

export class Turn {
  phase: TurnPhase = 'queued';
  /** Not admitted before this time (ms since epoch): a failed start waits out its delay. */
  retryAt = 0;
  startFailures = 0;
  /** Someone asked for this turn to stop (cancel or steering), as opposed to a shutdown. */
  cancelRequested = false;
  private worker: WorkerHandle | null = null;
  private prompt: string | null;
  /** The caller's outputSchema, like the prompt kept in memory only (a queued turn does not survive a restart). */
  outputSchema: Record<string, unknown> | null = null;
  /** Bounded progress log; persisted with the result. */
  readonly events: ProgressRecord[] = [];
  /** Latest assistant text: a running turn's only history. */
  partialText = '';
  /** Puck sends the reply gate approved in this turn, by tool-use id, with the route they were approved on. */
  readonly approvedSends = new Map<string, string>();
  /** Settles when the owner has released the claim. */
  readonly released: Promise<void>;
  private markReleased!: () => void;
  /**
   * Settles once an admitted turn's `starting` commit is done, or its owner
   * gave up before that (ended it unsubmitted, or put it back in line): an
   * acceptance that admitted the turn reports it from here.
   */
  readonly launched: Promise<void>;
  private markLaunched!: () => void;
  /** A later turn of this session waits for this one's claim: its worker skips the Factory title. */
  private renameSkipped = false;

  constructor(
    readonly runId: string,
    readonly claim: LockClaim,
    prompt: string,
  ) {
    this.prompt = prompt;
    this.released = new Promise((resolve) => (this.markReleased = resolve));
    this.launched = new Promise((resolve) => (this.markLaunched = resolve));
  }

  get sessionId(): string {
    return this.claim.sessionId;
  }

  holdsClaim(): boolean {
    return this.phase !== 'queued';
  }

  get handle(): WorkerHandle | null {
    return this.worker;
  }

  /** The prompt goes to exactly one worker; memory keeps no copy after that. */
  takePrompt(): string {
    const prompt = this.prompt ?? '';
    this.prompt = null;
    return prompt;
  }

  attach(worker: WorkerHandle): void {
    this.worker = worker;
    this.phase = 'live';
    // A cancel that arrived while the turn was launching is honoured now.
    if (this.cancelRequested) worker.cancel();
    if (this.renameSkipped) worker.skipRename();
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

  noteLaunched(): void {
    this.markLaunched();
  }

  /** A stop somebody asked for; idempotent. */
  requestStop(): void {
    if (this.cancelRequested) return;
    this.cancelRequested = true;
    this.worker?.cancel();
  }

  /** A stop nobody asked for (controller shutdown or halt): the outcome needs attention. */
  stopUnrequested(): void {
    this.worker?.cancel();
  }

  record(event: ProgressEvent, at: string): boolean {
    if (event.kind === 'assistant_text' || event.kind === 'assistant_partial') this.partialText = event.text;
    // Streaming snapshots are frequent: they update the partial text, not the event log.
    if (event.kind === 'assistant_partial') return false;
    appendEvent(this.events, event, at);
    return true;
  }

  /** Called by the owner once the turn has left the controller's map. */
  noteReleased(): void {
    this.markReleased();
  }
}
