#!/usr/bin/env node
/**
 * droid-mcp entry point: load the config, open the state, build the
 * controller, serve MCP. Every refusal to start names its cause on stderr.
 */
import { parseArgs } from 'node:util';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { loadConfig } from './config/load.js';
import { ConfigError } from './config/errors.js';
import { SessionController } from './controller/controller.js';
import { droidCatalogFetcher, ModelCatalog } from './controller/model-catalog.js';
import { resolveWorkspace } from './controller/workspaces.js';
import { createMcpServer } from './mcp/server.js';
import { StoreError } from './store/errors.js';
import { StateStore } from './store/store.js';
import { startWorker } from './worker/runner.js';
import { createLogger } from './util/logger.js';

const USAGE = 'usage: droid-mcp --config /absolute/path/to/config.json';

async function main(): Promise<number> {
  const log = createLogger();
  let configPath: string | undefined;
  try {
    configPath = parseArgs({ options: { config: { type: 'string' } }, strict: true }).values.config;
  } catch (err) {
    log.error({ code: 'usage' }, `${err instanceof Error ? err.message : String(err)}; ${USAGE}`);
    return 2;
  }
  if (!configPath) {
    log.error({ code: 'usage' }, USAGE);
    return 2;
  }

  const config = await loadConfig(configPath);
  if (config.transport !== 'stdio') {
    log.error({ code: 'transport_unavailable' }, 'transport "http" is not available in this build yet; use "stdio"');
    return 1;
  }
  const store = await StateStore.open(config.stateDirectory);
  if (store.recovery.unknown || store.recovery.queueLost) {
    log.warn(store.recovery, 'recovered after an unclean stop: running turns are now unknown, queued turns queue_lost');
  }

  const droidEnv = Object.fromEntries(Object.entries(process.env).filter((e): e is [string, string] => typeof e[1] === 'string'));
  const catalog = new ModelCatalog(
    droidCatalogFetcher(config.droidPath, droidEnv),
    config.modelCacheTtlMs,
    config.excludeModelIds,
    (err) => log.warn({ err }, 'model catalog refresh failed'),
  );
  const policy = {
    defaultModel: config.defaultModel ?? null,
    defaultAutonomy: config.defaultAutonomy,
    maxAutonomy: config.maxAutonomy,
    reasoningEffort: config.reasoningEffort ?? null,
  };
  const controller = new SessionController({
    store,
    models: () => catalog.models(),
    resolveWorkspace: (path) => resolveWorkspace(path, config.approvedDirectories),
    startWorker,
    policy,
    approvedRoots: config.approvedDirectories,
    maxConcurrentRuns: config.maxConcurrentRuns,
    runTimeoutMs: config.runTimeoutMs,
    cancelGraceMs: config.cancelGraceMs,
    droidPath: config.droidPath,
    droidEnv,
    replyBackConfigured: config.ampMcp !== undefined,
    log,
  });
  const server = createMcpServer(
    {
      controller,
      models: () => catalog.models(),
      approvedRoots: config.approvedDirectories,
      policy,
      runTimeoutMs: config.runTimeoutMs,
      replyBack: config.ampMcp !== undefined,
    },
    log,
  );

  let stopping: Promise<void> | undefined;
  const stop = (why: string) =>
    (stopping ??= (async () => {
      log.info({ why }, 'shutting down: interrupting live turns');
      await controller.shutdown(config.cancelGraceMs * 3);
      await store.close();
      log.info({}, 'stopped');
    })());

  const transport = new StdioServerTransport();
  transport.onclose = () => void stop('client closed stdio').then(() => process.exit(0));
  process.stdin.once('end', () => void stop('stdin ended').then(() => process.exit(0)));
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    process.once(signal, () => void stop(signal).then(() => process.exit(0)));
  }
  await server.connect(transport);
  log.info({ transport: 'stdio', roots: config.approvedDirectories.length }, 'droid-mcp ready');
  return -1;
}

main().then(
  (code) => {
    if (code >= 0) process.exit(code);
  },
  (err: unknown) => {
    const log = createLogger();
    if (err instanceof ConfigError || err instanceof StoreError) {
      log.error({ code: err.code }, `refusing to start: ${err.message}`);
    } else {
      log.error({ err }, 'refusing to start: unexpected error');
    }
    process.exit(1);
  },
);
