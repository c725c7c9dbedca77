/**
 * Checks what a droid CLI does with the Amp attachment, the way routed and
 * detached turns use it, without any model prompt or message: fresh (attach
 * on initialize), resumed without the attachment (droid must not keep it),
 * re-attached on load, and a detached fresh session. Each step runs the same
 * preflight code as a turn: `droid-mcp verify-route --config FILE`.
 *
 * It creates two empty droid sessions (no messages) in a temporary working
 * directory; under the sandbox they live in a private sessions folder that
 * is removed afterwards, so droid's own history is not touched. Nothing is
 * sent to Amp beyond MCP initialize and tools/list.
 *
 * The endpoint is the config's ampMcp url (the real one needs the service
 * user's Factory MCP OAuth for exactly that url). Output: one line per check
 * and the droid version, on stderr; no session ids, no credentials. Exit 0
 * when every check passed, 1 when one failed, 2 on bad usage.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { disabledToolIdsOf, type DroidClient, type McpServerSpec } from '../../droid/client.js';
import { loadConfig } from '../../config/load.js';
import type { Config } from '../../config/schema.js';
import { hostSandboxSpec, type SandboxSpec } from '../../sandbox/sandbox.js';
import { privateTmpRoot } from '../../sandbox/turn-paths.js';
import { removeTree } from '../../util/remove-tree.js';
import { withShortLivedDroid } from '../../worker/parent/short-lived-droid.js';
import { DroidError } from '../../droid/errors.js';
import { AMP_SERVER, isPuck, isServerTool, listedTools, type ListedTool } from '../../droid/amp-tools.js';
import { dropStaleAmpDisables, preflightAmp } from '../../worker/child/amp-preflight.js';
import { command, CommandRefusal } from '../command.js';
import { stringEnv } from '../../util/string-env.js';

interface RouteCheck {
  name: 'fresh' | 'resumed' | 'reattached' | 'detached';
  ok: boolean;
  /** What was seen: tool states of the Amp server, or the failure. Never a session id. */
  detail: string;
}

interface VerifyRouteOptions {
  droidPath: string;
  url: string;
  /** droid's whole environment (unset entries already dropped). */
  env: Record<string, string>;
  /** A model id to open sessions with; droid's default when absent (nothing is ever sent to it). */
  modelId?: string;
  /** The host's sandbox: every droid here runs in it, as turns do. */
  sandbox: SandboxSpec;
}

function describe(tools: readonly ListedTool[]): string {
  const amp = tools.filter(isServerTool);
  if (amp.length === 0) return `no ${AMP_SERVER} tool listed`;
  return amp.map((t) => `${t.id}${t.currentlyAllowed === true ? ' usable' : ' disabled'}`).join(', ');
}

async function inventory(client: DroidClient): Promise<ListedTool[]> {
  const tools = listedTools(await client.listTools());
  if (!tools) throw new DroidError('droid_protocol_error', 'list_tools returned no tool list');
  return tools;
}

/** Only puck usable among the server's tools, and puck itself usable. */
function onlyPuck(tools: readonly ListedTool[]): boolean {
  const amp = tools.filter(isServerTool);
  return amp.some((t) => isPuck(t) && t.currentlyAllowed === true) && amp.every((t) => isPuck(t) || t.currentlyAllowed === false);
}

function withDroid<T>(options: VerifyRouteOptions, cwd: string, sessionsCopy: string, use: (client: DroidClient) => Promise<T>): Promise<T> {
  return withShortLivedDroid({ droidPath: options.droidPath, env: options.env, sandbox: options.sandbox, cwd, sessionsCopy, allowUrls: [options.url] }, use);
}

async function check(name: RouteCheck['name'], run: () => Promise<{ ok: boolean; detail: string }>): Promise<RouteCheck> {
  try {
    return { name, ...(await run()) };
  } catch (err) {
    const detail = err instanceof DroidError ? `${err.code}: ${err.message}` : err instanceof Error ? err.message : String(err);
    return { name, ok: false, detail: detail.slice(0, 500) };
  }
}

async function verifyRoute(options: VerifyRouteOptions): Promise<RouteCheck[]> {
  const cwd = realpathSync(mkdtempSync(join(tmpdir(), 'droid-mcp-verify-route-')));
  // One private sessions folder for the whole check: the resumed steps load what the first created.
  const sessionsCopy = mkdtempSync(join(privateTmpRoot(), 'verify-sessions-'));
  const servers: McpServerSpec[] = [{ name: AMP_SERVER, type: 'http', url: options.url }];
  const base = {
    machineId: hostname(),
    cwd,
    autonomyLevel: 'off' as const,
    interactionMode: 'spec' as const,
    ...(options.modelId && { modelId: options.modelId }),
  };
  const checks: RouteCheck[] = [];
  let sessionId: string | null = null;
  try {
    checks.push(
      await check('fresh', () =>
        withDroid(options, cwd, sessionsCopy, async (client) => {
          const created = await client.initializeSession({ ...base, mcpServers: servers });
          sessionId = created.sessionId;
          await preflightAmp(client, options.url, disabledToolIdsOf(created.settings));
          const tools = await inventory(client);
          return { ok: onlyPuck(tools), detail: `attached on initialize: ${describe(tools)}` };
        }),
      ),
    );
    const id = sessionId as string | null;
    if (id === null) {
      checks.push(...(['resumed', 'reattached'] as const).map((name) => ({ name, ok: false, detail: 'skipped: no session was created' })));
    } else {
      checks.push(
        await check('resumed', () =>
          withDroid(options, cwd, sessionsCopy, async (client) => {
            const loaded = await client.loadSession(id);
            // What a detached turn does: drop disables of tools droid no longer knows.
            await dropStaleAmpDisables(client, disabledToolIdsOf(loaded.settings));
            const tools = await inventory(client);
            return { ok: !tools.some(isServerTool), detail: `loaded without the attachment: ${describe(tools)}` };
          }),
        ),
      );
      checks.push(
        await check('reattached', () =>
          withDroid(options, cwd, sessionsCopy, async (client) => {
            const loaded = await client.loadSession(id, { mcpServers: servers });
            await preflightAmp(client, options.url, disabledToolIdsOf(loaded.settings));
            const tools = await inventory(client);
            return { ok: onlyPuck(tools), detail: `attached again on load: ${describe(tools)}` };
          }),
        ),
      );
    }
    checks.push(
      await check('detached', () =>
        withDroid(options, cwd, sessionsCopy, async (client) => {
          await client.initializeSession(base);
          const tools = await inventory(client);
          return { ok: !tools.some(isServerTool), detail: `initialized without the attachment: ${describe(tools)}` };
        }),
      ),
    );
  } finally {
    rmSync(cwd, { recursive: true, force: true });
    await removeTree(sessionsCopy);
  }
  return checks;
}

/** The config's route and sandbox, or a refusal saying why there is nothing to verify. */
async function routeOf(configPath: string): Promise<{ config: Config; url: string; sandbox: SandboxSpec }> {
  const config = await loadConfig(configPath).catch((err: unknown) => {
    throw new CommandRefusal(err instanceof Error ? err.message : String(err));
  });
  if (!config.ampMcp) throw new CommandRefusal('the config has no "ampMcp": reply-back is off, there is no route to verify');
  // Every droid here runs in the host's sandbox, as turns do.
  if (config.sandbox.mode === 'off') return { config, url: config.ampMcp.url, sandbox: { mode: 'off' } };
  if (config.sandbox.bwrapPath === null) {
    throw new CommandRefusal('the sandbox is "bwrap" but no bwrap executable was found on PATH; install bubblewrap or set "bwrapPath"');
  }
  return { config, url: config.ampMcp.url, sandbox: hostSandboxSpec(config.sandbox.bwrapPath, config, stringEnv(process.env)) };
}

const say = (line: string) => process.stderr.write(`${line}\n`);

export const verifyRouteCommand = command({
  usage: ['--config /abs/config.json [--droid /abs/droid] [--model ID]'],
  summary: ["what this droid CLI does with the config's Amp MCP", 'endpoint (reply-back), without any prompt; on stderr'],
  options: { config: { type: 'string' }, droid: { type: 'string' }, model: { type: 'string' } },
  async run(values) {
    if (!values.config) throw new CommandRefusal('--config /absolute/config.json is required');
    const { config, url, sandbox } = await routeOf(values.config);
    const droidPath = values.droid ?? config.droidPath;
    let version = 'unknown';
    try {
      version = execFileSync(droidPath, ['--version'], { encoding: 'utf8', timeout: 10_000 }).trim();
    } catch {
      // reported below by the checks themselves
    }
    say(`verify-route: droid ${version} at ${droidPath}; endpoint ${url}`);
    const checks = await verifyRoute({ droidPath, url, env: stringEnv(process.env), sandbox, ...(values.model && { modelId: values.model }) });
    for (const c of checks) say(`${c.ok ? 'ok  ' : 'FAIL'} ${c.name}: ${c.detail}`);
    const failed = checks.filter((c) => !c.ok).length;
    say(failed === 0 ? 'verify-route: all checks passed' : `verify-route: ${failed} check(s) failed`);
    return failed === 0 ? 0 : 1;
  },
});
