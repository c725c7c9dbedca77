/**
 * The composition root behind the entry point (cli.ts): state, sandbox,
 * catalog, warm pool, controller, and the HTTP transport. cli.ts loads this
 * module with a dynamic import() once a stdio transport answers the MCP
 * handshake, so none of it is loaded, and nothing here runs, before a
 * client's initialize and tools/list are answered. Every refusal to start
 * is thrown from here as the error cli.ts words and exits with.
 */
import { join } from 'node:path';
import type { Config } from './config/schema.js';
import { readTokenFile } from './config/token.js';
import { ConfigError } from './config/errors.js';
import { SessionController } from './controller/controller.js';
import { droidCatalogFetcher, ModelCatalog, type CatalogEvent } from './controller/catalog/model-catalog.js';
import { resolveWorkspace } from './controller/workspaces.js';
import type { HttpListener } from './mcp/http/listener.js';
import type { NetworkStatus, SandboxStatus, ToolContext } from './mcp/tools.js';
import { hostSandboxSpec, SANDBOX_ACTION, type SandboxSpec } from './sandbox/sandbox.js';
import { factoryDirOf } from './shared/host-paths.js';
import { probeSandbox } from './sandbox/probe.js';
import { recoverSessionCopies } from './sandbox/session-copy.js';
import { StateStore } from './store/store.js';
import { REFILL_DELAY_MS, startPooledWorker, WarmPool } from './worker/parent/warm-pool.js';
import { prestartWorker, type Prestart } from './worker/parent/prestart.js';
import { bootMarked, stateKeyOf, sweepAhead, unmarkAhead } from './worker/parent/ahead-marks.js';
import type { TurnSpec } from './worker/contract/protocol.js';
import { OWNER_MARK_VAR, ownerMark, stopMarkedProcesses } from './worker/parent/predecessor.js';
import type { Logger } from './util/logger.js';
import { DroidVersionProbe, readDroidVersion } from './droid/version.js';
import { DroidError } from './droid/errors.js';
import { stringEnv } from './util/string-env.js';
import { releaseYoungGeneration } from './util/young-generation.js';
import { turnWorkspace } from './worktree/plan.js';
import { reportCheckouts } from './controller/checkouts/checkout-report.js';
import { egressEntries } from './sandbox/egress/turn-egress.js';
import { isIP } from 'node:net';

/** A started controller: what a stop has to close, in order. */
export interface Running {
  config: Config;
  store: StateStore;
  catalog: ModelCatalog;
  pool: WarmPool | null;
  controller: SessionController;
  log: Logger;
  listener: HttpListener | undefined;
  stopping: Promise<void> | undefined;
}

/**
 * The state opened and the controller built over it. The sandbox trial run
 * (a bwrap process) needs nothing from the state: it runs while the state
 * loads. Rejects with the refusal to start.
 */
export async function startController(config: Config, log: Logger): Promise<{ running: Running; toolContext: ToolContext }> {
  const droidVersion = versionProbe(config, stringEnv(process.env), log);
  // In the background, while the state loads: spawned from a small process, and never at ready, when the first calls come.
  void droidVersion.current();
  const sandboxProbe = sandboxFor(config);
  sandboxProbe.catch(() => undefined); // awaited below; a refused state exits first
  const store = await openStore(config.stateDirectory, sandboxProbe, log);
  // Before anything of ours starts: no turn runs beside what a controller killed outright left running.
  await stopPredecessor(store, log);
  sweepAheadFolders(config.stateDirectory, store, log);
  // Every process started from here on (workers, droids, whatever droid runs) carries our mark.
  process.env[OWNER_MARK_VAR] = ownerMark(store.owners.current);
  const droidEnv = stringEnv(process.env);

  const sandbox = await sandboxProbe;
  if (sandbox.spec.mode === 'bwrap') await recoverTurnSessions(store, droidEnv, log);
  if (sandbox.status.available) log.info({ sandbox: sandbox.status.mode }, 'turn sandbox ready');
  else
    log.error(
      { sandbox: sandbox.status.mode, detail: sandbox.status.detail },
      `turn sandbox unavailable: every turn will fail with sandbox_unavailable. ${SANDBOX_ACTION}`,
    );

  if (config.worktrees) void reportCheckouts(config.worktrees.directory, store, log);
  const catalog = catalogFor(config, droidEnv, sandbox, log);
  const pool = warmPoolFor(config, droidEnv, sandbox, log);
  const { controller, toolContext } = compose({ config, store, catalog, pool, sandbox, droidEnv, droidVersion, log });
  return { running: { config, store, catalog, pool, controller, log, listener: undefined, stopping: undefined }, toolContext };
}

/** Once the transport serves the controller: signals stop it, the warm pool fills, and the ready line is logged. */
export function serving(running: Running, ready: Record<string, unknown>): void {
  const { config, pool, log } = running;
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    process.once(signal, () => void stop(running, signal).then(() => process.exit(0)));
  }
  pool?.start(REFILL_DELAY_MS);
  releaseYoungGeneration();
  // Tests read the bound port of HTTP from this line (port 0 picks a free one).
  log.info({ ...ready, roots: config.approvedDirectories.length }, 'droid-mcp ready');
}

export function stop(running: Running, why: string): Promise<void> {
  const { config, store, catalog, pool, controller, log } = running;
  return (running.stopping ??= (async () => {
    log.info({ why }, 'shutting down: interrupting live turns');
    await running.listener?.close();
    await controller.shutdown(config.cancelGraceMs * 3);
    // No refresh-ahead after this; a catalog read in flight ends with its droid.
    await catalog.close();
    // After the controller: nothing takes from the pool any more.
    await pool?.close();
    await store.close();
    log.info({}, 'stopped');
  })());
}

/** The HTTP transport: its token file checked before any state is opened, the listener bound once the controller is there. */
export async function serveHttp(config: Config, log: Logger): Promise<void> {
  const token = await readTokenFile(requiredTokenFile(config));
  // Loaded while the state loads.
  const http = import('./mcp/http/listener.js');
  http.catch(() => undefined);
  const { running, toolContext } = await startController(config, log);
  const { store, pool } = running;
  const { startHttpListener, HTTP_HOST } = await http;
  try {
    running.listener = await startHttpListener({
      ctx: toolContext,
      log,
      token,
      port: config.port,
      ...(config.publicUrl !== undefined && { publicUrl: config.publicUrl }),
    });
  } catch (err) {
    await pool?.close();
    await store.close();
    throw listenRefusal(config.port, HTTP_HOST, err);
  }
  serving(running, { transport: 'http', url: running.listener.url, port: running.listener.port });
}

/**
 * The sandbox every turn gets, proven by a trial run now. Turns never see the
 * state directory or the token file.
 */
async function sandboxFor(config: Config): Promise<{ spec: SandboxSpec; status: SandboxStatus }> {
  if (config.sandbox.mode === 'off') return { spec: { mode: 'off' }, status: { mode: 'off', available: true, detail: null } };
  const bwrapPath = config.sandbox.bwrapPath;
  const health = bwrapPath === null ? { ok: false, detail: 'no bwrap executable was found on PATH' } : await probeSandbox(bwrapPath);
  const spec = hostSandboxSpec(bwrapPath ?? '/nonexistent/bwrap', config, stringEnv(process.env));
  return { spec, status: { mode: 'bwrap', available: health.ok, detail: health.detail } };
}

/**
 * What the previous owner of the state left running, if it was killed
 * outright (worker/parent/predecessor.ts): killed, and waited for until
 * none runs, before this controller starts anything or admits a turn (and
 * before its sessions copies are read back, which a live droid still writes).
 */
async function stopPredecessor(store: StateStore, log: Logger): Promise<void> {
  const previous = store.owners.previous;
  if (!previous) return;
  const onStuck = (pids: number[], waitedMs: number) =>
    log.error({ pids, waitedMs, owner: previous.pid }, 'processes of the previous controller survive SIGKILL; no turn starts until they are gone');
  const killed = await stopMarkedProcesses(ownerMark(previous), onStuck);
  if (killed > 0) log.warn({ processes: killed, owner: previous.pid }, 'killed what the previous controller left running (it was stopped outright)');
}

/** A droid booted for a session's next turn, its folders marked as no run's until a run takes them (ahead-marks.ts). */
function aheadWorker(pool: WarmPool | null, spec: TurnSpec, stateKey: string): Prestart | null {
  return bootMarked(stateKey, spec.runId, () => prestartWorker(pool, spec));
}

/** The folders of droids booted ahead that a controller stopped outright left, once its processes are gone (ahead-marks.ts). */
function sweepAheadFolders(stateDirectory: string, store: StateStore, log: Logger): void {
  try {
    const removed = sweepAhead(stateKeyOf(stateDirectory), (runId) => store.runs.has(runId));
    if (removed.length > 0) log.info({ removed: removed.length }, 'removed the folders of droids the previous controller had booted for next turns');
  } catch (err) {
    log.warn({ err }, 'could not remove the folders of droids the previous controller had booted for next turns');
  }
}

/**
 * Sessions copies a controller that died mid-turn left behind: this state's
 * runs get their droid session files back (session-copy.ts), then the copy goes.
 */
async function recoverTurnSessions(store: StateStore, droidEnv: Record<string, string>, log: Logger): Promise<void> {
  try {
    const recovered = await recoverSessionCopies(factoryDirOf(droidEnv), (runId) => {
      const run = store.runs.get(runId);
      const session = run ? store.sessions.get(run.sessionId) : undefined;
      return session ? { droidSessionId: session.droidSessionId, workspace: turnWorkspace(session) } : null;
    });
    for (const r of recovered) log.warn(r, "recovered droid's session files of a turn an unclean stop left in its private sessions copy");
  } catch (err) {
    log.error({ err }, "could not recover the private sessions copies an unclean stop left; droid's history of those turns may be incomplete");
  }
}

/** droid --version, read in the background (it must not delay start-up); logged once known and whenever it changes. */
function versionProbe(config: Config, droidEnv: Record<string, string>, log: Logger): DroidVersionProbe {
  return new DroidVersionProbe(
    () => readDroidVersion(config.droidPath, droidEnv),
    config.modelCacheTtlMs,
    ({ version, previous, error }) => {
      const droid = { path: config.droidPath, version };
      if (version === null) log.warn({ droid, err: error }, 'could not read the droid CLI version (droid --version); turns may still run');
      else if (previous === undefined || previous === null) log.info({ droid }, 'droid CLI version');
      else log.info({ droid, previous }, 'droid CLI version changed');
    },
  );
}

async function openStore(stateDirectory: string, sandboxProbe: Promise<unknown>, log: Logger): Promise<StateStore> {
  let store: StateStore;
  try {
    store = await StateStore.open(stateDirectory);
  } catch (err) {
    // Let the trial run finish and remove its temp directory before the refusal exits.
    await sandboxProbe.catch(() => undefined);
    throw err;
  }
  if (store.recovery.unknown || store.recovery.queueLost) {
    log.warn(store.recovery, 'recovered after an unclean stop: running turns are now unknown, queued turns queue_lost');
  }
  return store;
}

type Sandbox = Awaited<ReturnType<typeof sandboxFor>>;

function catalogFor(config: Config, droidEnv: Record<string, string>, sandbox: Sandbox, log: Logger): ModelCatalog {
  return new ModelCatalog({
    // The catalog droid runs in the turn sandbox; one that failed its trial run is not used for it either.
    fetcher: sandbox.status.available
      ? droidCatalogFetcher(config.droidPath, droidEnv, sandbox.spec)
      : () => Promise.reject(new DroidError('sandbox_unavailable', `the sandbox cannot run (${sandbox.status.detail ?? 'unknown'}). ${SANDBOX_ACTION}`)),
    ttlMs: config.modelCacheTtlMs,
    excludeIds: config.excludeModelIds,
    onEvent: (event) => logCatalog(log, event),
  });
}

/** Reads and turns' lists at debug (a busy server has one per turn); a failed read is a warning. */
function logCatalog(log: Logger, event: CatalogEvent): void {
  if (event.kind === 'read_failed') log.warn({ err: event.err, background: event.background }, 'model catalog refresh failed');
  else if (event.kind === 'read') log.debug({ catalog: event }, 'model catalog read from droid (list_models)');
  else if (event.kind === 'offered') log.debug({ catalog: event }, "model catalog refreshed from a turn's own session answer");
  else log.debug({ catalog: event }, "a turn's model list was not used for the catalog");
}

/**
 * Warm workers (issue 12): a pre-spawned droid only where no confinement is lost
 * (sandbox off); under bubblewrap only the Node worker is warm. No pool when turns cannot run.
 */
function warmPoolFor(config: Config, droidEnv: Record<string, string>, sandbox: Sandbox, log: Logger): WarmPool | null {
  if (config.warmPoolSize <= 0 || !sandbox.status.available) return null;
  return new WarmPool({
    size: config.warmPoolSize,
    droid: sandbox.spec.mode === 'off' ? { droidPath: config.droidPath, droidEnv } : null,
    onEvent: (event) => {
      if (event.kind === 'lost') log.warn({ pid: event.pid, detail: event.detail, stderr: event.stderrTail }, 'warm worker lost; the pool replaces it');
      else if (event.kind === 'backoff') log.warn({ failures: event.failures, delayMs: event.delayMs }, 'warm workers keep failing; the pool backs off');
      else if (event.kind === 'swept') log.info({ folders: event.folders }, 'removed warm droid folders a killed controller left behind');
      else log.debug({ pid: event.pid, ageMs: event.ageMs }, 'warm worker retired by age; the pool replaces it');
    },
  });
}

interface Parts {
  config: Config;
  store: StateStore;
  catalog: ModelCatalog;
  pool: WarmPool | null;
  sandbox: Sandbox;
  droidEnv: Record<string, string>;
  droidVersion: DroidVersionProbe;
  log: Logger;
}

function compose({ config, store, catalog, pool, sandbox, droidEnv, droidVersion, log }: Parts): { controller: SessionController; toolContext: ToolContext } {
  const stateKey = stateKeyOf(config.stateDirectory);
  const policy = {
    defaultModel: config.defaultModel ?? null,
    defaultAutonomy: config.defaultAutonomy,
    maxAutonomy: config.maxAutonomy,
    reasoningEffort: config.reasoningEffort ?? null,
  };
  const controller = new SessionController({
    store,
    models: () => catalog.models(),
    offerModels: (models, answeredAt) => catalog.offer(models, answeredAt),
    resolveWorkspace: (path) => resolveWorkspace(path, config.approvedDirectories),
    startWorker: (spec, options, early) => {
      // Its folders are the run's now: start-up recovery knows them by the run's record.
      if (early) unmarkAhead(stateKey, spec.runId);
      return startPooledWorker(pool, spec, options, early);
    },
    prestartWorker: (spec) => aheadWorker(pool, spec, stateKey),
    policy,
    maxConcurrentRuns: config.maxConcurrentRuns,
    runTimeoutMs: config.runTimeoutMs,
    cancelGraceMs: config.cancelGraceMs,
    ceilings: config.ceilings,
    autoCompactAt: config.autoCompactAt ?? null,
    snapshotsRoot: join(config.stateDirectory, 'snapshots'),
    droidPath: config.droidPath,
    droidEnv,
    sandbox: sandbox.spec,
    sandboxUnavailable: sandbox.status.available ? null : (sandbox.status.detail ?? 'unknown'),
    ampMcpUrl: config.ampMcp?.url ?? null,
    worktrees: config.worktrees ?? null,
    log,
  });
  const toolContext: ToolContext = {
    controller,
    models: () => catalog.models(),
    approvedRoots: config.approvedDirectories,
    policy,
    runTimeoutMs: config.runTimeoutMs,
    replyBack: config.ampMcp !== undefined,
    worktrees: config.worktrees !== undefined,
    ceilings: config.ceilings,
    sandbox: sandbox.status,
    network: () => networkStatus(config, droidEnv),
    droidVersion: () => droidVersion.current(),
  };
  return { controller, toolContext };
}

function networkStatus(config: Config, droidEnv: Record<string, string>): NetworkStatus {
  if (config.sandbox.mode === 'off') return { mode: 'unconfined', allow: [], alwaysAllowed: [] };
  const always = egressEntries({ allow: [], modelOnly: true }, factoryDirOf(droidEnv)).map((e) =>
    isIP(e.host) === 6 ? `[${e.host}]:${e.port}` : `${e.host}:${e.port}`,
  );
  return { mode: config.network.mode, allow: [...config.network.allow], alwaysAllowed: [...new Set(always)] };
}

function requiredTokenFile(config: Config): string {
  // The loader already refuses http without tokenFile; this keeps the type honest.
  if (config.tokenFile === undefined) throw new ConfigError('config_invalid', '"tokenFile" is required when transport is "http"', 'tokenFile');
  return config.tokenFile;
}

function listenRefusal(port: number, host: string, err: unknown): ConfigError {
  const code = err instanceof Error && 'code' in err ? String(err.code) : 'unknown error';
  const why = code === 'EADDRINUSE' ? 'is already in use' : code === 'EACCES' ? 'may not be bound by this user' : `cannot be bound (${code})`;
  return new ConfigError('config_invalid', `"port" ${port} on ${host} ${why}; stop the other listener or choose another port`, 'port');
}
