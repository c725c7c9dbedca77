#!/usr/bin/env node
/**
 * droid-mcp entry point: load and check the config, answer the MCP
 * handshake, open the state and build the controller (compose.ts). Every
 * refusal to start names its code, cause and action on stderr and exits 1.
 *
 * The config and where its paths are (config/load.ts: no slow I/O) are
 * checked before any transport is connected: a config the server refuses
 * never answers initialize and never listens. Over stdio the transport is
 * connected next, before anything else starts: what this module imports is
 * what that check, initialize and tools/list need (the SDK's server and the
 * tool listing the build wrote), and everything else is loaded after. A tool
 * call waits for the controller (mcp/context-gate.ts, bounded). A state that
 * fails to open is known only then: it refuses start-up with the same words
 * and exit code, and a client already answered hears it from every tool
 * call (mcp/startup-refusal.ts) until it disconnects. HTTP: config, token,
 * state, then the listener.
 */
// First: it holds the young generation's size while everything below loads (see the module).
import { releaseYoungGeneration } from './util/young-generation.js';
import { parseArgs } from 'node:util';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { ConfigError } from './config/errors.js';
import { loadConfig } from './config/load.js';
import type { Config } from './config/schema.js';
import { ContextGate } from './mcp/context-gate.js';
import { relayedLog, type RelayedLog } from './mcp/log-relay.js';
import { createMcpServer, loadCallPath } from './mcp/server.js';
import { startupRefusal } from './mcp/startup-refusal.js';
import { StoreError } from './store/errors.js';
import type { Logger } from './util/logger.js';
import type { Running } from './compose.js';

const USAGE = 'usage: droid-mcp --config /absolute/path/to/config.json (droid-mcp --help lists the operator commands)';

/**
 * `droid-mcp <command> …` (a first argument that is no option), --version,
 * --help: operator commands, loaded only when asked for (they write to stdout).
 */
function operatorCommand(args: readonly string[]): boolean {
  return (args[0] !== undefined && !args[0].startsWith('-')) || args.some((a) => a === '--version' || a === '--help' || a === '-h');
}

/**
 * The process logger (pino, util/logger.ts), loaded when first needed: on
 * the way to the first answer nothing is logged, unless start-up is refused.
 */
let logger: Promise<Logger> | undefined;
const processLog = (): Promise<Logger> => (logger ??= import('./util/logger.js').then(({ createLogger }) => createLogger(undefined, tapLog)));

/**
 * Over stdio, the lines about sessions also go to the client as MCP log
 * messages (mcp/log-relay.ts says which, with which fields); the SDK drops
 * those below the level the client set. Over HTTP there is no stream to send
 * them on (stateless JSON answers), so nothing is relayed.
 */
let relay: ((message: RelayedLog) => void) | undefined;
function tapLog(level: number, fields: object, message: string): void {
  const relayed = relay && relayedLog(level, fields, message);
  if (relayed) relay?.(relayed);
}

async function main(): Promise<number> {
  const args = process.argv.slice(2);
  if (operatorCommand(args)) {
    releaseYoungGeneration();
    const { runCommand } = await import('./ops/commands.js');
    return runCommand(args);
  }
  const configPath = serveArgs();
  if (typeof configPath !== 'string') {
    (await processLog()).error({ code: 'usage' }, configPath.usage);
    return 2;
  }
  // Before any client is answered or anything listens: a config refused here never completes a handshake.
  const config = await loadConfig(configPath);
  if (config.transport === 'stdio') await serveStdio(config);
  else {
    const { serveHttp } = await import('./compose.js');
    await serveHttp(config, await processLog());
  }
  // Serving: the process ends with its transport or a signal.
  return -1;
}

/** The config path of `droid-mcp --config FILE`, or what is wrong with the arguments. */
function serveArgs(): string | { usage: string } {
  let configPath: string | undefined;
  try {
    configPath = parseArgs({ options: { config: { type: 'string' } }, strict: true }).values.config;
  } catch (err) {
    return { usage: `${err instanceof Error ? err.message : String(err)}; ${USAGE}` };
  }
  return configPath || { usage: USAGE };
}

/**
 * How long after connecting start-up goes on even if no client has said it
 * is initialized (one that never speaks, a refused start-up's test).
 */
const HANDSHAKE_GRACE_MS = 100;

/**
 * Connects stdio first, then starts the controller: initialize and tools/list
 * are answered whatever the state's size, and tool calls wait at the gate.
 * Start-up begins once the client has said it is initialized (its
 * tools/list, sent with that notification, is answered first: loading
 * modules meanwhile would hold the answer up), when a tool call waits, when
 * stdin ends, or HANDSHAKE_GRACE_MS after connecting, whichever comes first.
 * The client closing stdio stops the controller once it is started, and
 * ends a refused start-up (exit 1).
 */
async function serveStdio(config: Config): Promise<void> {
  let go!: () => void;
  const begin = new Promise<void>((resolve) => (go = resolve));
  const gate = new ContextGate(undefined, () => go());
  // Only a tool call logs (an unexpected failure), and only once the gate is open.
  const serverLog = { error: (obj: object, msg: string) => void processLog().then((log) => log.error(obj, msg)) };
  const server = createMcpServer(() => gate.context(), serverLog);
  let ended = false;
  const started = startStdio(config, gate, begin);
  // Exits at once unless a client was answered initialize and is still there.
  const refused = started.then(
    () => undefined,
    (err: unknown) => refuseAfterConnect(err, gate, ended || server.getClientVersion() === undefined),
  );
  const end = (why: string): void => {
    // The client is gone or going: the lines stop() logs go to stderr only.
    ended = true;
    relay = undefined;
    go();
    void started.then(
      async (running) => {
        const { stop } = await import('./compose.js');
        await stop(running, why);
        process.exit(0);
      },
      async () => {
        await refused;
        process.exit(1);
      },
    );
  };
  const transport = new StdioServerTransport();
  transport.onclose = () => end('client closed stdio');
  process.stdin.once('end', () => end('stdin ended'));
  // A client that died leaves a pipe nobody reads: a write to it (an answer, a
  // notification) must end the server cleanly, not crash it mid-stop (EPIPE).
  process.stdout.on('error', () => end('stdout closed'));
  server.oninitialized = () => {
    // A client hears log messages once it has said it is initialized.
    relay = (message) => void server.sendLoggingMessage(message).catch(() => undefined);
    go();
  };
  await server.connect(transport);
  setTimeout(() => go(), HANDSHAKE_GRACE_MS);
}

/** Everything after the handshake: the controller (its state), the call path; then the gate opens. */
async function startStdio(config: Config, gate: ContextGate, begin: Promise<void>): Promise<Running> {
  await begin;
  // The call path (the tools' schemas and handlers) too: the first call must not load it.
  const [{ startController, serving }, log] = await Promise.all([import('./compose.js'), processLog(), loadCallPath()]);
  const { running, toolContext } = await startController(config, log);
  gate.open(toolContext);
  serving(running, { transport: 'stdio' });
  return running;
}

/**
 * A start-up refused once stdio was connected (the state failed to open).
 * With no client answered initialize, or one gone, it exits 1 at once.
 * Otherwise every waiting and later tool call is answered with the refusal
 * and an error log message tells the client; it exits 1 when the client
 * disconnects (serveStdio's end): never a client left without a word.
 */
async function refuseAfterConnect(err: unknown, gate: ContextGate, unanswered: boolean): Promise<void> {
  if (unanswered) await refuseToStart(err);
  await logRefusal(err);
  const refusal = startupRefusal(err);
  gate.refuse(refusal);
  relay?.({ level: 'error', logger: 'droid-mcp', data: { message: refusal.message, code: refusal.code, action: refusal.action } });
}

/** Says why start-up was refused, as one log line with its code and action. */
async function logRefusal(err: unknown): Promise<void> {
  const log = await processLog();
  if (err instanceof ConfigError || err instanceof StoreError) {
    log.error({ code: err.code, action: err.action }, `refusing to start: ${err.message}`);
  } else {
    log.error({ err }, 'refusing to start: unexpected error');
  }
}

/** Logs the refusal and exits 1. */
async function refuseToStart(err: unknown): Promise<never> {
  await logRefusal(err);
  process.exit(1);
}

main().then(
  (code) => {
    if (code >= 0) process.exit(code);
  },
  (err: unknown) => void refuseToStart(err),
);
