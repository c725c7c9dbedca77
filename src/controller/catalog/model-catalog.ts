/**
 * The live model catalog, from droid itself. Read with `droid.list_models` on
 * a short-lived process (no session, no prompt), and kept fresh without one
 * by what every turn's own `initialize_session` / `load_session` answers
 * (`availableModels`, the same runtime's catalog: docs/PROTOCOL-NOTES.md part 4).
 * Cached for a TTL; concurrent callers and the background refresh share one
 * read; an expired catalog is never served.
 *
 * Refresh ahead, the rule: from the first read on (the first caller's), a
 * timer reads the catalog again at AHEAD of its TTL unless something fresher
 * came meanwhile, for as long as the server runs and holds a valid catalog,
 * so a caller after any pause finds it fresh and never waits for a catalog
 * droid. A server nobody asked for a model spawns none, and neither does one
 * whose catalog expired because reads kept failing (no retry loop, no warning
 * every few seconds): its next caller reads in the foreground, as before, and
 * a success starts the timer again. Cost: an idle server, one sandboxed droid per
 * AHEAD × TTL (75 an hour at the default 60 s); a busy one, only what turns do
 * not cover: each turn's answer pushes the timer back, and a read is due only
 * for the `disabled` flags turns' lists lack (every FLAGS_TTLS × TTL: 6 an hour
 * at the default) or for a model no read has listed yet (once per model). A
 * failed background read is logged, throws nowhere and keeps a still valid
 * catalog until its TTL, with one more try at RETRY. The timer is unref'd and
 * `close` stops it.
 */
import type { CatalogModel } from '../../droid/client.js';
import { SANDBOX_ACTION, type SandboxSpec } from '../../sandbox/sandbox.js';
import { withShortLivedDroid } from '../../worker/parent/short-lived-droid.js';
import { DroidError } from '../../droid/errors.js';
import { ControllerError } from '../../shared/public-error.js';

/** `background`: nobody waits for this read (the refresh-ahead). */
export type CatalogFetcher = (background?: boolean) => Promise<CatalogModel[]>;

/** Share of the TTL after which the catalog is read again in the background. */
const AHEAD = 0.8;
/** After a failed read, the next one waits at least this share of the TTL (a valid catalog gets a second try before it expires). */
const RETRY = 0.1;
/** A turn's list carries no `disabled` flag: the flags of the last read are trusted for this many TTLs, then read again. */
const FLAGS_TTLS = 10;
/** CPU niceness of a background read's droid (nice(1)); a caller's read runs at the server's own. */
const BACKGROUND_NICENESS = 10;

/** Timers the catalog starts; the real ones never keep the process alive. Injectable for tests. */
export interface CatalogTimers {
  start(fn: () => void, ms: number): unknown;
  stop(handle: unknown): void;
}

const UNREF_TIMERS: CatalogTimers = {
  start: (fn, ms) => setTimeout(fn, ms).unref(),
  stop: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

/** What the catalog did, for the log. */
export type CatalogEvent =
  | { kind: 'read'; background: boolean; models: number; startedAt: number; at: number }
  | { kind: 'read_failed'; background: boolean; err: unknown }
  | { kind: 'offered'; models: number; at: number }
  | { kind: 'offer_ignored'; why: string; offered: number };

export interface CatalogOptions {
  fetcher: CatalogFetcher;
  ttlMs: number;
  excludeIds: readonly string[];
  onEvent?: (event: CatalogEvent) => void;
  now?: () => number;
  timers?: CatalogTimers;
}

/** Disabled, deprecated, dated and operator-excluded models are hidden. */
export function visibleModels(models: readonly CatalogModel[], excludeIds: readonly string[]): CatalogModel[] {
  const excluded = new Set(excludeIds);
  return models.filter(
    (m) =>
      typeof m.id === 'string' &&
      m.disabled !== true &&
      m.deprecated !== true &&
      (m.deprecationDate === undefined || m.deprecationDate === null) &&
      !excluded.has(m.id),
  );
}

/**
 * Each read is a short-lived droid, confined like a read-only turn and
 * killed with its whole process group afterwards (short-lived-droid.ts):
 * list_models starts whatever MCP servers droid's home names. A background
 * read runs at BACKGROUND_NICENESS: on a busy host it must not slow the turn
 * that starts meanwhile (it has a fifth of the TTL to spare).
 */
export function droidCatalogFetcher(droidPath: string, env: Readonly<Record<string, string>>, sandbox: SandboxSpec, timeoutMs = 20_000): CatalogFetcher {
  return (background = false) =>
    withShortLivedDroid({ droidPath, env, sandbox, requestTimeoutMs: timeoutMs, ...(background && { niceness: BACKGROUND_NICENESS }) }, (client) =>
      client.listModels(),
    );
}

/** What the last list_models read said of each model's `disabled` flag, which turns' lists leave out. */
interface Flags {
  enabled: ReadonlySet<string>;
  listed: ReadonlySet<string>;
  at: number;
}

export class ModelCatalog {
  private cached: { models: CatalogModel[]; fetchedAt: number } | undefined;
  private flags: Flags | undefined;
  private inflight: Promise<CatalogModel[]> | undefined;
  private timer: unknown;
  private failedAt: number | undefined;
  /** Ids a turn listed that no read had: each is read for once, not on every turn. */
  private readonly chased = new Set<string>();
  private closed = false;
  private readonly now: () => number;
  private readonly timers: CatalogTimers;
  private readonly onEvent: (event: CatalogEvent) => void;

  constructor(private readonly options: CatalogOptions) {
    this.now = options.now ?? Date.now;
    this.timers = options.timers ?? UNREF_TIMERS;
    this.onEvent = options.onEvent ?? (() => {});
  }

  async models(): Promise<CatalogModel[]> {
    return this.fresh() ?? this.read(false);
  }

  /**
   * A turn's own `availableModels`, answered at `answeredAt` by the same droid
   * runtime. Keeps the catalog fresh only for models the last read reported
   * enabled (the list has no `disabled` flag); models no read has listed are
   * read for in the background. An empty list, or one with no such model,
   * replaces nothing.
   */
  offer(offered: readonly CatalogModel[], answeredAt: number): void {
    if (this.closed) return;
    const at = Math.min(answeredAt, this.now());
    if (this.cached && at <= this.cached.fetchedAt) return;
    const flags = this.flags;
    if (!flags) return this.ignore('no catalog read yet says which models are enabled', offered.length);
    const models = visibleModels(offered, this.options.excludeIds).filter((m) => flags.enabled.has(m.id));
    const unknown = offered.filter((m) => typeof m.id === 'string' && !flags.listed.has(m.id) && !this.chased.has(m.id));
    for (const m of unknown) this.chased.add(m.id);
    if (models.length > 0) {
      this.cached = { models, fetchedAt: at };
      this.onEvent({ kind: 'offered', models: models.length, at });
    } else this.ignore('it holds no model the last catalog read reported enabled', offered.length);
    if (unknown.length > 0 || this.now() - flags.at >= FLAGS_TTLS * this.options.ttlMs) this.background();
    else this.schedule();
  }

  /** Stops the refresh-ahead; settles once a read in flight has ended (its droid is gone). */
  async close(): Promise<void> {
    this.closed = true;
    this.timers.stop(this.timer);
    this.timer = undefined;
    await this.inflight?.catch(() => undefined);
  }

  private fresh(): CatalogModel[] | undefined {
    return this.cached && this.now() - this.cached.fetchedAt < this.options.ttlMs ? this.cached.models : undefined;
  }

  private ignore(why: string, offered: number): void {
    this.onEvent({ kind: 'offer_ignored', why, offered });
  }

  /**
   * The next background read: AHEAD into the catalog's TTL, not sooner than
   * RETRY after a failure; none without a catalog. Called only after a read
   * and after a turn's list (which needs a read first), so the first caller's
   * read starts it.
   */
  private schedule(): void {
    this.timers.stop(this.timer);
    this.timer = undefined;
    if (this.closed || !this.cached) return;
    const ttl = this.options.ttlMs;
    const due = Math.max(this.cached.fetchedAt + AHEAD * ttl, (this.failedAt ?? -Infinity) + RETRY * ttl);
    this.timer = this.timers.start(
      () => {
        this.timer = undefined;
        this.background();
      },
      Math.max(0, due - this.now()),
    );
  }

  /** A read nobody waits for: its failure is logged (read_failed) and thrown nowhere. */
  private background(): void {
    if (this.closed) return;
    this.read(true).catch(() => undefined);
  }

  /** One read at a time: callers and the background share it. */
  private read(background: boolean): Promise<CatalogModel[]> {
    this.inflight ??= this.fetch(background).finally(() => {
      this.inflight = undefined;
      this.schedule();
    });
    return this.inflight;
  }

  private async fetch(background: boolean): Promise<CatalogModel[]> {
    const startedAt = this.now();
    try {
      const listed = await this.options.fetcher(background);
      const models = visibleModels(listed, this.options.excludeIds);
      const at = this.now();
      this.flags = {
        enabled: new Set(listed.filter((m) => m.disabled !== true).map((m) => m.id)),
        listed: new Set(listed.map((m) => m.id)),
        at,
      };
      this.cached = { models, fetchedAt: at };
      this.failedAt = undefined;
      this.onEvent({ kind: 'read', background, models: models.length, startedAt, at });
      return models;
    } catch (err) {
      // Never fall back to an expired catalog (it may offer retired models); a still valid one stays until its TTL.
      if (!this.fresh()) this.cached = undefined;
      this.failedAt = this.now();
      this.onEvent({ kind: 'read_failed', background, err });
      throw publicError(err);
    }
  }
}

function publicError(err: unknown): ControllerError {
  // The catalog droid runs in the turn sandbox: without one there is no catalog either, and no silent fallback.
  if (err instanceof DroidError && err.code === 'sandbox_unavailable') {
    return new ControllerError('sandbox_unavailable', `the model catalog cannot be read: ${err.message}`, SANDBOX_ACTION, false);
  }
  // The detail (paths, droid output) goes to the log, not to callers.
  const kind = err instanceof DroidError ? err.code : 'unexpected_error';
  return new ControllerError(
    'model_discovery_failed',
    `could not read the live model catalog from droid (${kind})`,
    'Retry shortly; if it persists, check that the droid CLI runs for the service user (droid --version).',
    true,
  );
}
