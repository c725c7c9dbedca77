/**
 * `droid-mcp doctor --config FILE [--json]`: checks a host before the server
 * is registered (or while it runs), one line per check: ok / warn / fail and
 * what to do. Read-only: it creates no session, takes no lock and writes
 * nothing (the catalog check starts one short-lived droid that only answers
 * droid.list_models). Exit status 1 when any check fails.
 */
import { execFile } from 'node:child_process';
import { readFile, realpath, stat } from 'node:fs/promises';
import { connect } from 'node:net';
import { join } from 'node:path';
import { loadConfig, resolveDroid } from '../../config/load.js';
import { unconfinedIn } from '../../config/unconfined-programs.js';
import { looksFast, type ConfigFile } from '../../config/schema.js';
import { droidCatalogFetcher, visibleModels } from '../../controller/catalog/model-catalog.js';
import type { CatalogModel } from '../../droid/client.js';
import { hostSandboxSpec, SANDBOX_ACTION, type SandboxSpec } from '../../sandbox/sandbox.js';
import { networkConfigOf } from '../../config/network.js';
import { factoryDirOf } from '../../shared/host-paths.js';
import { probeSandbox } from '../../sandbox/probe.js';
import { command, CommandRefusal } from '../command.js';
import { choices, suggestedDefault } from './default-model.js';
import { readConfigFile } from '../config-file.js';
import { checkCheckoutGit, checkCheckouts } from './doctor-checkouts.js';
import { checkHttp, checkRoot, checkState, describe, fail, ok, warn, type Check } from './doctor-host.js';

export type { Check, CheckStatus } from './doctor-host.js';
import { out } from '../output.js';
import { stringEnv } from '../../util/string-env.js';

interface DoctorOptions {
  /** Environment of the service user (the controller inherits it): HOME, FACTORY_HOME_OVERRIDE, PATH. */
  env?: NodeJS.ProcessEnv;
  /** Whether Factory's API answers; injectable so tests do not depend on the network. */
  factoryReachable?: () => Promise<boolean>;
}

const FACTORY_API = { host: 'api.factory.ai', port: 443 };
const VERSION_TIMEOUT_MS = 10_000;
const REACH_TIMEOUT_MS = 3_000;

export async function doctor(configPath: string, options: DoctorOptions = {}): Promise<Check[]> {
  const env = options.env ?? process.env;
  const { file, checks } = await checkConfig(configPath);
  if (!file) return checks;
  const droid = await checkDroid(file, env);
  checks.push(droid.check);
  // ── sandbox: before the catalog, whose droid runs in it
  const sandbox = await checkSandbox(file, env);
  checks.push(sandbox.check, checkNetwork(file));
  const catalog = await checkCatalog(file, droid.path, sandbox, env);
  if (catalog.check) checks.push(catalog.check);
  checks.push(checkDefaultModel(file, catalog.models));
  // ── state directory and its owner
  const owner = await checkState(file.stateDirectory);
  checks.push(owner.check);
  for (const dir of file.approvedDirectories) checks.push(await checkRoot(dir));
  if (file.transport === 'http') checks.push(...(await checkHttp(file, owner.livePid)));
  const checkouts = await checkCheckouts(file.worktrees?.directory, file.stateDirectory);
  if (checkouts) checks.push(checkouts);
  const checkoutGit = await checkCheckoutGit(file.worktrees?.directory);
  if (checkoutGit) checks.push(checkoutGit);
  // ── droid's cloud session sync
  checks.push(await checkCloudSync(env, options.factoryReachable ?? (() => reachable(FACTORY_API.host, FACTORY_API.port))));
  return checks;
}

/** The real loader decides; the raw file keeps the other checks going when it refuses. No file: nothing else can be checked. */
async function checkConfig(configPath: string): Promise<{ file: ConfigFile | null; checks: Check[] }> {
  let file: ConfigFile;
  try {
    file = await readConfigFile(configPath);
  } catch (err) {
    return { file: null, checks: [fail('config', describe(err), 'Fix the config file (see config.example.json), then run doctor again.')] };
  }
  try {
    const config = await loadConfig(configPath);
    return {
      file,
      checks: [
        ok('config', `${configPath} is valid (${config.transport}, ${config.approvedDirectories.length} approved root(s), sandbox ${config.sandbox.mode})`),
      ],
    };
  } catch (err) {
    // Filesystem-level refusals: the checks below say the same per item; this line names the first.
    return { file, checks: [fail('config', `the server would refuse to start: ${describe(err)}`, 'Fix what the lines below report, then run doctor again.')] };
  }
}

async function checkDroid(file: ConfigFile, env: NodeJS.ProcessEnv): Promise<{ check: Check; path: string | null }> {
  try {
    const droidPath = await resolveDroid(file, { pathEnv: env.PATH ?? '', home: env.HOME ?? '' });
    // Never run a droid a turn could have rewritten: --version runs outside the sandbox.
    const roots = await Promise.all(file.approvedDirectories.map((dir) => realpath(dir).catch(() => dir)));
    const misplaced = await unconfinedIn(roots, [{ what: 'the droid executable', path: droidPath }]);
    if (misplaced)
      return {
        check: fail(
          'droid',
          `${droidPath} was not run: ${misplaced.message}`,
          'Move droid out of every approved root (or approve another folder), then run doctor again.',
        ),
        path: null,
      };
    const version = await droidVersion(droidPath, env);
    return {
      check: version
        ? ok('droid', `${droidPath}, version ${version}`)
        : fail('droid', `${droidPath} did not answer --version`, 'Reinstall the droid CLI for the service user.'),
      path: droidPath,
    };
  } catch (err) {
    return {
      check: fail('droid', describe(err), 'Install the droid CLI as the service user (curl -fsSL https://app.factory.ai/cli | sh) or set "droidPath".'),
      path: null,
    };
  }
}

/** The live catalog, read by a droid in the turn sandbox; no check line without a droid (the droid line says why). */
export async function checkCatalog(
  file: ConfigFile,
  droidPath: string | null,
  sandbox: { spec: SandboxSpec; usable: boolean },
  env: NodeJS.ProcessEnv,
): Promise<{ check: Check | null; models: CatalogModel[] | null }> {
  if (!droidPath) return { check: null, models: null };
  if (!sandbox.usable)
    return { check: fail('catalog', 'not read: the sandbox its droid runs in failed its trial run (see the sandbox line)', SANDBOX_ACTION), models: null };
  const started = Date.now();
  try {
    const models = visibleModels(await droidCatalogFetcher(droidPath, stringEnv(env), sandbox.spec, 30_000)(), file.excludeModelIds);
    return {
      check: ok('catalog', `droid.list_models answered with ${models.length} usable models in ${Date.now() - started} ms (no session created)`),
      models,
    };
  } catch (err) {
    return {
      check: fail('catalog', `droid.list_models failed: ${describe(err)}`, 'Run droid once as the service user (droid --version; droid) and check its login.'),
      models: null,
    };
  }
}

function checkDefaultModel(file: ConfigFile, catalog: CatalogModel[] | null): Check {
  if (file.defaultModel === undefined) {
    const pick = catalog ? suggestedDefault(catalog) : undefined;
    return warn(
      'default model',
      'defaultModel is not set: every droid_create_session must name a model',
      `Set "defaultModel" to a standard model from the live catalog${pick ? `, e.g. "${pick}"` : ''}.`,
    );
  }
  if (!catalog) return warn('default model', `"${file.defaultModel}" was not checked: no catalog`, 'Fix the droid and catalog checks, then run doctor again.');
  const model = catalog.find((m) => m.id === file.defaultModel);
  if (!model) return fail('default model', `"${file.defaultModel}" is not in the live catalog`, `Choose one of: ${choices(catalog)}.`);
  if (looksFast(model.displayName ?? '') || looksFast(model.id)) {
    return fail(
      'default model',
      `"${file.defaultModel}" (${model.displayName}) is a Fast variant`,
      `The host default must be a standard model (callers may still pick a Fast one explicitly); choose one of: ${choices(catalog)}.`,
    );
  }
  return ok('default model', `"${file.defaultModel}" (${model.displayName ?? 'no display name'}) is in the catalog and not Fast`);
}

function droidVersion(droidPath: string, env: NodeJS.ProcessEnv): Promise<string | null> {
  return new Promise((resolve) => {
    execFile(droidPath, ['--version'], { env, timeout: VERSION_TIMEOUT_MS, encoding: 'utf8' }, (err, stdout) => {
      const version = stdout.trim().split('\n')[0] ?? '';
      resolve(err || version === '' ? null : version);
    });
  });
}

/**
 * The state directory read as start-up reads it (store/inspect.ts: the same
 * checks and loader, read-only, no lock): a refusal is the one start-up
 * would give, word for word; a torn last journal line is what start-up
 * would drop. Nothing in the directory changes.
 */
export async function checkSandbox(file: ConfigFile, env: NodeJS.ProcessEnv): Promise<{ check: Check; spec: SandboxSpec; usable: boolean }> {
  const off: SandboxSpec = { mode: 'off' };
  const host = { ...file, network: networkConfigOf(file), sandboxReadable: file.sandboxReadable ?? [] };
  const unusable = hostSandboxSpec('/nonexistent/bwrap', host, stringEnv(env));
  if (file.sandbox === 'off')
    return {
      check: warn('sandbox', 'off: turns run unconfined, with every right of the service user', `Only where bubblewrap cannot run. ${SANDBOX_ACTION}`),
      spec: off,
      usable: true,
    };
  if (process.platform !== 'linux')
    return { check: fail('sandbox', `bwrap is Linux only and this is ${process.platform}`, 'Set "sandbox": "off".'), spec: unusable, usable: false };
  let bwrap = file.bwrapPath ?? null;
  if (!bwrap) {
    for (const dir of (env.PATH ?? '').split(':').filter((d) => d.startsWith('/'))) {
      if (
        await stat(join(dir, 'bwrap')).then(
          (s) => s.isFile(),
          () => false,
        )
      ) {
        bwrap = join(dir, 'bwrap');
        break;
      }
    }
  }
  if (!bwrap)
    return {
      check: fail('sandbox', 'bwrap (the default sandbox) is not on PATH: every turn would fail sandbox_unavailable', SANDBOX_ACTION),
      spec: unusable,
      usable: false,
    };
  const health = await probeSandbox(bwrap);
  const spec = hostSandboxSpec(bwrap, host, stringEnv(env));
  if (!health.ok) return { check: fail('sandbox', `bwrap ${bwrap}: ${health.detail}`, SANDBOX_ACTION), spec, usable: false };
  return {
    check: ok('sandbox', `bwrap ${bwrap}: a trial run with the turn's flags works, and its seccomp filter refuses ptrace, pidfd_getfd and AF_UNIX sockets`),
    spec,
    usable: true,
  };
}

/** Whom turns may reach (issue 37): the proxy's allowlist, or a warning when turns share the host's network. */
function checkNetwork(file: ConfigFile): Check {
  const network = networkConfigOf(file);
  if (file.sandbox === 'off')
    return warn(
      'network',
      "unconfined: without the sandbox a turn reaches every host, the host's loopback and cloud metadata included",
      'Run turns in bubblewrap ("sandbox": "bwrap").',
    );
  if (network.mode === 'open') {
    return warn(
      'network',
      "open: turns share the host's network (its loopback services, cloud metadata at 169.254.169.254, the whole internet), so a prompt-injected turn can send out what it reads",
      'Remove "network": {"mode": "open"} and list the hosts turns need in "network": {"allow": [...]}.',
    );
  }
  const allowed = network.allow.length ? network.allow.join(', ') : 'nothing else';
  return ok('network', `proxy: turns reach Factory, the custom models' endpoints and ${allowed}; refusals are listed in each run's egress`);
}

/** droid's `cloudSessionSync` in the service user's Factory home (default true; org settings may override it). */
async function readCloudSync(env: NodeJS.ProcessEnv): Promise<{ value: boolean; explicit: boolean; path: string }> {
  const path = join(factoryDirOf(stringEnv(env)), 'settings.json');
  try {
    const settings = JSON.parse(await readFile(path, 'utf8')) as { cloudSessionSync?: unknown };
    if (typeof settings.cloudSessionSync === 'boolean') return { value: settings.cloudSessionSync, explicit: true, path };
  } catch {
    // Missing or unreadable: droid's default applies.
  }
  return { value: true, explicit: false, path };
}

async function checkCloudSync(env: NodeJS.ProcessEnv, factoryReachable: () => Promise<boolean>): Promise<Check> {
  const name = 'cloud sync';
  const sync = await readCloudSync(env);
  if (!sync.value) return ok(name, `cloudSessionSync is false in ${sync.path}: sessions stay on this host (not visible in Factory web)`);
  const how = sync.explicit ? `true in ${sync.path}` : `not set in ${sync.path} (droid's default: true)`;
  if (await factoryReachable()) return ok(name, `cloudSessionSync is ${how}: sessions mirror to Factory web (org settings may override)`);
  return warn(
    name,
    `cloudSessionSync is ${how}, but ${FACTORY_API.host} is unreachable from here: each Factory title rename then waits ~15 s on sync retries`,
    `On a host without a route to Factory, set "cloudSessionSync": false in ${sync.path}.`,
  );
}

function reachable(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host, port, timeout: REACH_TIMEOUT_MS });
    const done = (yes: boolean) => {
      socket.destroy();
      resolve(yes);
    };
    socket.once('connect', () => done(true));
    socket.once('timeout', () => done(false));
    socket.once('error', () => done(false));
  });
}

/** The human report: one line per check, then a summary. */
function formatChecks(checks: readonly Check[]): string[] {
  const width = Math.max(...checks.map((c) => c.name.length));
  const lines = checks.map((c) => `${c.status.padEnd(4)}  ${c.name.padEnd(width)}  ${c.detail}${c.action ? `\n${' '.repeat(width + 8)}→ ${c.action}` : ''}`);
  const failed = checks.filter((c) => c.status === 'fail').length;
  const warned = checks.filter((c) => c.status === 'warn').length;
  lines.push(
    failed
      ? `${failed} check(s) failed, ${warned} warning(s): fix the failures before registering the server.`
      : `all checks passed${warned ? ` (${warned} warning(s))` : ''}.`,
  );
  return lines;
}

export const doctorCommand = command({
  usage: ['--config /abs/config.json [--json]'],
  summary: [
    'check this host: config, droid, catalog, default model,',
    'state directory read as start-up reads it (read-only),',
    'its owner, approved roots, token,',
    "port, sandbox, droid's cloud sync; exit 1 on a failure",
  ],
  options: { config: { type: 'string' }, json: { type: 'boolean', default: false } },
  async run(values) {
    if (!values.config) throw new CommandRefusal('--config /absolute/path/to/config.json is required');
    const checks = await doctor(values.config);
    const failed = checks.some((c) => c.status === 'fail');
    if (values.json) out(JSON.stringify({ ok: !failed, checks }, null, 2));
    else for (const line of formatChecks(checks)) out(line);
    return failed ? 1 : 0;
  },
});
