/**
 * The live model catalog, from droid itself (`droid.list_models` on a
 * short-lived process: no session, no prompt). Cached for a TTL; concurrent
 * callers share one refresh; an expired catalog is never served.
 */
import type { CatalogModel } from '../droid/client.js';
import { SANDBOX_ACTION, type SandboxSpec } from '../sandbox/sandbox.js';
import { withShortLivedDroid } from '../worker/parent/short-lived-droid.js';
import { DroidError } from '../droid/errors.js';
import { ControllerError } from '../shared/public-error.js';

export type CatalogFetcher = () => Promise<CatalogModel[]>;

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
 * list_models starts whatever MCP servers droid's home names.
 */
export function droidCatalogFetcher(droidPath: string, env: Readonly<Record<string, string>>, sandbox: SandboxSpec, timeoutMs = 20_000): CatalogFetcher {
  return () => withShortLivedDroid({ droidPath, env, sandbox, requestTimeoutMs: timeoutMs }, (client) => client.listModels());
}

export class ModelCatalog {
  private cached: { models: CatalogModel[]; fetchedAt: number } | undefined;
  private inflight: Promise<CatalogModel[]> | undefined;

  constructor(
    private readonly fetcher: CatalogFetcher,
    private readonly ttlMs: number,
    private readonly excludeIds: readonly string[],
    private readonly onFailure: (err: unknown) => void = () => {},
    private readonly now: () => number = Date.now,
  ) {}

  async models(): Promise<CatalogModel[]> {
    if (this.cached && this.now() - this.cached.fetchedAt < this.ttlMs) return this.cached.models;
    this.inflight ??= this.refresh().finally(() => (this.inflight = undefined));
    return this.inflight;
  }

  private async refresh(): Promise<CatalogModel[]> {
    try {
      const models = visibleModels(await this.fetcher(), this.excludeIds);
      this.cached = { models, fetchedAt: this.now() };
      return models;
    } catch (err) {
      // Never fall back to an expired catalog: it may offer retired models.
      this.cached = undefined;
      this.onFailure(err);
      // The catalog droid runs in the turn sandbox: without one there is no catalog either, and no silent fallback.
      if (err instanceof DroidError && err.code === 'sandbox_unavailable') {
        throw new ControllerError('sandbox_unavailable', `the model catalog cannot be read: ${err.message}`, SANDBOX_ACTION, false);
      }
      // The detail (paths, droid output) goes to the log, not to callers.
      const kind = err instanceof DroidError ? err.code : 'unexpected_error';
      throw new ControllerError(
        'model_discovery_failed',
        `could not read the live model catalog from droid (${kind})`,
        'Retry shortly; if it persists, check that the droid CLI runs for the service user (droid --version).',
        true,
      );
    }
  }
}
