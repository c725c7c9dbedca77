/**
 * A run as the two state files know it, without its record: the facts the
 * run index (run-index.ts) stores for it, and where its line is in the
 * snapshot (snapshot.ts). The run table (tables/run-table.ts) holds one
 * `RunEntry` per run, made from the index at start-up (a stub) or from a
 * full record; the snapshot writer copies a stub's line from where it points.
 */
import type { RunRecord, RunState, TokenUsage } from '../../shared/records.js';
import { hasChanges } from '../../shared/evidence-types.js';
import { tokensOf } from '../../shared/budget.js';

/** What bulk reads need of a run, known for every run without its record. */
export interface RunFacts {
  readonly id: string;
  readonly sessionId: string;
  readonly seq: number;
  readonly requestKey: string | null;
  readonly state: RunState;
  /** `startedAt !== null`. */
  readonly started: boolean;
  /** `Date.parse(acceptedAt)`: NaN when it does not parse. */
  readonly acceptedMs: number;
  readonly usage: TokenUsage | null;
  /** `usageLive === true`: the figure is a running one (the turn runs, or ended without droid's final figure). */
  readonly usageLive: boolean;
  /** The usage's five token counts summed, and its credits (null: 0); 0 and 0 without usage. Read without making the usage object. */
  readonly spentTokens: number;
  readonly spentCredits: number;
  /** Its `changes` are recorded and not empty. */
  readonly hasChanges: boolean;
  /** '' when the run has no preview; the text when held; undefined when it has one that is not held (read the record). */
  readonly preview: string | undefined;
}

/** One run as the store holds it: its facts, where its line is in the snapshot, and its record once read. */
export class RunEntry implements RunFacts {
  constructor(
    readonly id: string,
    readonly sessionId: string,
    readonly seq: number,
    readonly requestKey: string | null,
    readonly state: RunState,
    readonly started: boolean,
    readonly acceptedMs: number,
    /** The usage, or a column of six numbers per run (NaN credits: null) it is made from when asked for, at `usageAt`. */
    private readonly usageData: TokenUsage | null | Float64Array,
    private readonly usageAt: number,
    readonly usageLive: boolean,
    readonly hasChanges: boolean,
    readonly preview: string | undefined,
    /** Byte offset of the run's line in the snapshot the table reads, or -1: not there (changed or added since). */
    public offset: number,
    /** Bytes of that line, without its newline. */
    public length: number,
    /** The full record, once read (always, for a run not in the snapshot). */
    public record: RunRecord | undefined,
  ) {}

  get spentTokens(): number {
    const d = this.usageData;
    if (d === null) return 0;
    if (!(d instanceof Float64Array)) return tokensOf(d);
    const at = this.usageAt;
    return d[at]! + d[at + 1]! + d[at + 2]! + d[at + 3]! + d[at + 4]!;
  }

  get spentCredits(): number {
    const d = this.usageData;
    if (d === null) return 0;
    if (!(d instanceof Float64Array)) return d.factoryCredits ?? 0;
    const credits = d[this.usageAt + 5]!;
    return Number.isNaN(credits) ? 0 : credits;
  }

  /** Made on each call for a stub (a 100k-run start-up then allocates no usage objects). */
  get usage(): TokenUsage | null {
    const d = this.usageData;
    if (!(d instanceof Float64Array)) return d;
    const at = this.usageAt;
    const credits = d[at + 5]!;
    return Object.freeze<TokenUsage>({
      inputTokens: d[at]!,
      outputTokens: d[at + 1]!,
      cacheCreationTokens: d[at + 2]!,
      cacheReadTokens: d[at + 3]!,
      thinkingTokens: d[at + 4]!,
      factoryCredits: Number.isNaN(credits) ? null : credits,
    });
  }

  /** The entry of a full record; `offset`/`length` where its line is in the snapshot, if it is. */
  static of(r: RunRecord, offset = -1, length = 0): RunEntry {
    return new RunEntry(
      r.id,
      r.sessionId,
      r.seq,
      r.requestKey,
      r.state,
      r.startedAt !== null,
      Date.parse(r.acceptedAt),
      r.usage,
      0,
      r.usageLive === true,
      !!r.changes && hasChanges(r.changes),
      r.preview,
      offset,
      length,
      r,
    );
  }
}
