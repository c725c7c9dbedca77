/**
 * The read side of the controller: status, history, search and usage over
 * the stored records plus what live turns have reported so far. It never
 * starts droid and never writes.
 */
import { hasChanges } from '../../shared/evidence-types.js';
import { LIVE_STATES, type ProgressRecord, type RunRecord, type RunResultFile, type SessionRecord, type TokenUsage } from '../../shared/records.js';
import { tokensOf, type Spend } from '../../shared/budget.js';
import type { RunFacts } from '../../store/store.js';
import type { Log } from '../../util/logger.js';
import { ControllerError } from '../../shared/public-error.js';
import { findSessions, SessionIndex, type FindFilters } from './find.js';
import { pageHistory, type HistoryPage } from './history.js';
import { selectRunsForUsage, summarizeUsage, usageByModel, type ModelUsage, type UsageScope, type UsageSummary } from './usage.js';
import { checkoutView, isWorking, sessionView, summarizeRuns, type RunsSummary, type SessionBudgetView, type SessionView } from './views.js';

/** The part of the durable store reading needs. */
export interface ReadableStore {
  readonly sessions: ReadonlyMap<string, SessionRecord>;
  readonly runs: ReadonlyMap<string, RunRecord>;
  runsBySession(sessionId: string): RunRecord[];
  readResult(runId: string): Promise<RunResultFile | undefined>;
  /**
   * What summaries and usage need of every run (or one session's, in `seq`
   * order) without reading records back; records are used when absent.
   */
  runFacts?(): Iterable<RunFacts>;
  runFactsBySession?(sessionId: string): readonly RunFacts[];
}

/** What live turns have reported, owned by the controller and shared here. */
export interface LiveReports {
  /** Progress events (persisted only with the result) and latest assistant text of a live run. */
  live(runId: string): { events: readonly ProgressRecord[]; partialText: string; usage: TokenUsage | null } | undefined;
  /**
   * How a run reads: its record, or, after the controller halted because it
   * could not record state, what a restart will make of it.
   */
  shown(run: RunRecord): RunRecord;
  /** The run as `shown` makes it read, only for runs it changes; lets summaries skip reading records. */
  override?(runId: string): RunRecord | undefined;
}

/** What find and status need of a session's runs, besides its head run's record. */
type Summary = RunsSummary & { hasChanges: boolean; spend: Spend };

/** Result files kept in memory, by total size (one file is at most ~2 M characters). */
const RESULT_CACHE_CHARS = 8_000_000;

export class SessionReader {
  /**
   * Sessions newest first, for find, with each session's summary (agentState,
   * preview, queued count, head run) once made: the one cache of summaries,
   * kept current by `noteCommitted` and `invalidate`.
   */
  private readonly index: SessionIndex;
  /** Result files never change once written: paging through history reads each once. */
  private readonly results = new Map<string, { result: RunResultFile; chars: number }>();
  private cachedChars = 0;

  constructor(
    private readonly store: ReadableStore,
    private readonly live: LiveReports,
    private readonly resolveWorkspace: (path: string) => Promise<string>,
    private readonly log: Pick<Log, 'warn'>,
  ) {
    this.index = new SessionIndex(store.sessions.values());
    // Every summary and searchable text now, at start-up: the first status or text query after it reads and builds nothing but its own.
    for (const id of store.sessions.keys()) this.summary(id);
    this.index.prepareText();
  }

  /** Call after every durable change so the index and summaries stay current. */
  noteCommitted(change: { sessions?: readonly SessionRecord[]; runs?: readonly RunRecord[] }): void {
    for (const s of change.sessions ?? []) this.index.upsert(this.store.sessions.get(s.id)!);
    for (const r of change.runs ?? []) this.index.forget(r.sessionId);
  }

  /** Call when how a session's runs read changed without a commit (a halt). */
  invalidate(sessionId: string): void {
    this.index.forget(sessionId);
  }

  session(id: string): SessionRecord {
    const session = typeof id === 'string' ? this.store.sessions.get(id) : undefined;
    if (!session) {
      throw new ControllerError('session_not_found', 'no session with this handle exists on this controller', 'Use a handle returned by droid_create_session.');
    }
    return session;
  }

  /** Cached until the session's records change: cheap enough for every wake-up of a wait. */
  agentState(sessionId: string): SessionView['agentState'] {
    this.session(sessionId);
    return this.summary(sessionId).agentState;
  }

  /**
   * Reads one record, the head run's (the view shows no other run's fields):
   * the rest is the summary, made from the store's facts and cached.
   */
  status(sessionId: string): SessionView {
    const session = this.session(sessionId);
    const summary = this.summary(session.id);
    const head = this.live.shown(this.store.runs.get(summary.headId)!);
    // Only a live run's events are in memory alone; an ended run's record has them all.
    const live = LIVE_STATES.includes(head.state) ? this.live.live(head.id) : undefined;
    // A live turn's running usage is the one in memory (it is made durable only now and then, live-usage.ts).
    const shown = live ? { ...head, events: [...live.events], ...(live.usage && { usage: live.usage, usageLive: true as const }) } : head;
    return sessionView(session, summary, shown, this.budget(session));
  }

  /** A session's budget and what its turns spent so far (a running one's figure from memory); null without a budget. */
  private budget(session: SessionRecord): SessionBudgetView | null {
    if (session.budget === undefined) return null;
    const spent = this.summary(session.id).spend;
    return { ...session.budget, spentTokens: spent.tokens, spentCredits: spent.credits };
  }

  /** Paged history of assistant text, tool calls and controller notices; never prompts. */
  async read(sessionId: string, cursor?: string, limit?: number): Promise<HistoryPage> {
    const session = this.session(sessionId);
    const runs = this.runs(session.id);
    const results = new Map<string, RunResultFile>();
    for (const run of runs) {
      if (!run.hasResult) continue;
      const result = await this.result(run.id);
      if (result) results.set(run.id, result);
    }
    const page = pageHistory({ sessionId: session.id, runs, results, livePartialText: { get: (runId) => this.live.live(runId)?.partialText }, cursor, limit });
    return session.checkout ? { ...page, checkout: checkoutView(session.checkout) } : page;
  }

  async find(filters: FindFilters, cursor?: string, limit?: number): Promise<{ sessions: SessionView[]; nextCursor: string | null }> {
    const workspace = filters.workspace === undefined ? undefined : await this.resolveWorkspace(filters.workspace);
    const page = findSessions(this.index, (s) => this.summary(s.id), { ...filters, workspace }, cursor, limit);
    return { sessions: page.sessions.map((s) => this.status(s.id)), nextCursor: page.nextCursor };
  }

  usage(scope: UsageScope): UsageSummary & { byModel?: ModelUsage[] } {
    if (scope.session !== undefined) this.session(scope.session);
    const live = (runId: string) => this.live.live(runId)?.usage ?? undefined;
    if (scope.groupBy !== 'model') return summarizeUsage(selectRunsForUsage(this.store, scope), live);
    const runs = selectRunsForUsage(this.store, scope, true) as RunRecord[];
    return { ...summarizeUsage(runs, live), byModel: usageByModel(runs, live) };
  }

  private runs(sessionId: string): RunRecord[] {
    return this.store.runsBySession(sessionId).map((r) => this.live.shown(r));
  }

  private async result(runId: string): Promise<RunResultFile | undefined> {
    const cached = this.results.get(runId);
    if (cached) {
      // Most recently used last, so the least recently used is evicted first.
      this.results.delete(runId);
      this.results.set(runId, cached);
      return cached.result;
    }
    const result = await this.store.readResult(runId).catch((err) => {
      this.log.warn({ err, run: runId }, 'unreadable result file; history marked unavailable');
      return undefined;
    });
    if (result) {
      const chars = JSON.stringify(result).length;
      this.results.set(runId, { result, chars });
      this.cachedChars += chars;
      for (const [id, entry] of this.results) {
        if (this.cachedChars <= RESULT_CACHE_CHARS) break;
        this.results.delete(id);
        this.cachedChars -= entry.chars;
      }
    }
    return result;
  }

  private summary(sessionId: string): Summary {
    return (
      (this.index.summaryOf(sessionId) as Summary | undefined) ??
      this.index.prepare(sessionId, this.summaryFromFacts(sessionId) ?? this.summaryFromRecords(sessionId))
    );
  }

  private summaryFromRecords(sessionId: string): Summary {
    const runs = this.runs(sessionId);
    const spend = this.spend(
      runs,
      (r) => (r.usage === null ? 0 : tokensOf(r.usage)),
      (r) => r.usage?.factoryCredits ?? 0,
    );
    return { ...summarizeRuns(this.store.sessions.get(sessionId)!.headRunId, runs), hasChanges: runs.some((r) => !!r.changes && hasChanges(r.changes)), spend };
  }

  /**
   * The summary as `summarizeRuns` would make it from the records, plus
   * hasChanges, from the facts the store holds for every run: reads no
   * record, but the one whose preview is the latest if the store does not
   * hold its text. Undefined when the store or live reports cannot say.
   */
  private summaryFromFacts(sessionId: string): Summary | undefined {
    const facts = this.store.runFactsBySession?.(sessionId);
    const override = this.live.override;
    if (facts === undefined || override === undefined || facts.length === 0) return undefined;
    const headRunId = this.store.sessions.get(sessionId)!.headRunId;
    let working = false;
    let unknown = false;
    let changed = false;
    let queuedRuns = 0;
    let latest: RunFacts | undefined;
    let head: RunFacts | undefined;
    for (const f of facts) {
      const state = override(f.id)?.state ?? f.state;
      if (state === 'queued') queuedRuns++;
      if (isWorking(state)) working = true;
      else if (state === 'unknown') unknown = true;
      if (f.hasChanges) changed = true;
      if (f.preview !== '') latest = f;
      if (f.id === headRunId) head = f;
    }
    const preview = latest === undefined ? '' : (latest.preview ?? this.store.runs.get(latest.id)?.preview ?? '');
    const agentState = working ? 'working' : unknown ? 'unknown' : 'idle';
    return {
      agentState,
      preview,
      queuedRuns,
      headId: (head ?? facts[facts.length - 1]!).id,
      hasChanges: changed,
      spend: this.spend(
        facts,
        (f) => f.spentTokens,
        (f) => f.spentCredits,
      ),
    };
  }

  /**
   * What the runs spent, a running turn's figure from memory (an ended one's
   * record holds its final figure); `tokens`/`credits` read a run's recorded
   * figure. Summaries of every session are made at start-up: reading the
   * figures off the index columns (RunFacts) makes no usage object for
   * 100,000 runs (five objects a run took 3-4 MB of resident memory at ready).
   * Same sums and rounding as budget-policy.ts (addSpend).
   */
  private spend<R extends Pick<RunRecord, 'id' | 'state'>>(runs: readonly R[], tokens: (r: R) => number, credits: (r: R) => number): Spend {
    let spentTokens = 0;
    let spentCredits = 0;
    for (const r of runs) {
      const live = LIVE_STATES.includes(this.live.override?.(r.id)?.state ?? r.state) ? (this.live.live(r.id)?.usage ?? null) : null;
      spentTokens += live === null ? tokens(r) : tokensOf(live);
      spentCredits = Math.round((spentCredits + (live === null ? credits(r) : (live.factoryCredits ?? 0))) * 1e6) / 1e6;
    }
    return { tokens: spentTokens, credits: spentCredits };
  }
}
