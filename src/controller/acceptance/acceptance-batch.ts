/**
 * Group commit of acceptances (issue 38). Each acceptance used to be a job of
 * its own in the serial chain, with its own fdatasync: when eight sessions
 * started together, the last waited for seven commits before its own. Now the
 * acceptances waiting when their job's turn comes are staged one after the
 * other, each on what is committed plus the ones staged before it, and
 * committed together: one journal line, one fdatasync.
 *
 * Rules it keeps:
 * - Each caller is answered only once the batch holding its records is
 *   durable, and only then does memory follow (`land`, in arrival order).
 * - A request refused while it is staged fails alone; a failed commit fails
 *   exactly the requests of that batch, and nothing of them is in memory.
 * - Two requests that `clash` (the later must see the earlier committed: the
 *   same session, the same request key) never share a batch; the later one,
 *   and any after it that clashes with it, waits for the next batch, in order.
 */
import type { RunRecord, SessionRecord } from '../../shared/records.js';
import { crashPoint } from '../../util/crash-point.js';
import type { ControllerState } from '../controller-state.js';

/** What one request adds to its batch's commit. */
export interface Staged {
  sessions: SessionRecord[];
  runs: RunRecord[];
}

export interface BatchSteps<R, S extends Staged, A> {
  /** Whether `later` must see `earlier` committed first (they may not share a batch). */
  clash(earlier: R, later: R): boolean;
  /**
   * In the chain: the request's records, built on what is committed and on
   * `earlier` (staged in this batch before it), or its answer when it commits
   * nothing (a replay). Throws to refuse this request alone.
   */
  stage(request: R, earlier: readonly S[]): { staged: S } | { answer: A };
  /** Once the batch is durable, in arrival order: memory follows, and the request's answer. */
  land(staged: S): A;
}

interface Waiting<R, A> {
  request: R;
  resolve(answer: A): void;
  reject(err: unknown): void;
}

export class AcceptanceBatches<R, S extends Staged, A> {
  private waiting: Array<Waiting<R, A>> = [];
  /** A batch job is queued in the chain and has not started. */
  private queued = false;

  constructor(
    private readonly state: ControllerState,
    private readonly steps: BatchSteps<R, S, A>,
  ) {}

  /** Settles once the request is answered: its records durable and in memory, a replay, or a refusal. */
  submit(request: R): Promise<A> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ request, resolve, reject });
      this.queueJob();
    });
  }

  private queueJob(): void {
    if (this.queued || this.waiting.length === 0) return;
    this.queued = true;
    void this.state.serialized(() => this.commitBatch());
  }

  private async commitBatch(): Promise<void> {
    this.queued = false;
    const taken = this.take();
    // What had to wait for this batch goes in the next job of the chain (and so does what arrives meanwhile).
    this.queueJob();
    const staged: Array<{ waiting: Waiting<R, A>; staged: S }> = [];
    for (const waiting of taken) {
      try {
        const outcome = this.steps.stage(
          waiting.request,
          staged.map((s) => s.staged),
        );
        if ('answer' in outcome) waiting.resolve(outcome.answer);
        else staged.push({ waiting, staged: outcome.staged });
      } catch (err) {
        waiting.reject(err);
      }
    }
    if (staged.length === 0) return;
    // Committed: now memory follows, in arrival order.
    const land = () => {
      crashPoint('accepted');
      for (const s of staged) {
        try {
          s.waiting.resolve(this.steps.land(s.staged));
        } catch (err) {
          s.waiting.reject(err);
        }
      }
    };
    try {
      await this.state.commit({ sessions: staged.flatMap((s) => s.staged.sessions), runs: staged.flatMap((s) => s.staged.runs) }, land);
    } catch (err) {
      for (const s of staged) s.waiting.reject(err);
    }
  }

  /** The waiting requests this batch takes, in order; the rest stay waiting, in order. */
  private take(): Array<Waiting<R, A>> {
    const taken: Array<Waiting<R, A>> = [];
    const left: Array<Waiting<R, A>> = [];
    for (const waiting of this.waiting) {
      const blocked = [...taken, ...left].some((earlier) => this.steps.clash(earlier.request, waiting.request));
      (blocked ? left : taken).push(waiting);
    }
    this.waiting = left;
    return taken;
  }
}
