/**
 * `droid-mcp init`: writes a private (0600) config with the reference host's
 * defaults for what it is given, creates the state directory (0700) and, for
 * HTTP, a fresh private token file; then prints the registration lines for
 * MCP clients. The default model comes from the live catalog of the droid it
 * names (read as doctor reads it), or is `--model` checked against it. It
 * refuses to overwrite anything, and checks everything (through the real
 * config loader) before it writes anything.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { realpath, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, isAbsolute, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ConfigError } from '../../config/errors.js';
import { loadConfig, resolveDroid } from '../../config/load.js';
import { CONFIG_DEFAULTS, configFileSchema } from '../../config/schema.js';
import { prepareStateDir } from '../../store/state-dir.js';
import { errCode } from '../../util/errno.js';
import { exists } from '../../util/exists.js';
import { command, CommandRefusal, type OptionValues } from '../command.js';
import { choices, standardModels, suggestedDefault } from './default-model.js';
import { checkCatalog, checkSandbox } from './doctor.js';
import { out } from '../output.js';

interface InitOptions {
  configPath: string;
  approve: string[];
  state: string;
  http: boolean;
  port?: number;
  tokenFile?: string;
  publicUrl?: string;
  droidPath?: string;
  /** `--model`: checked against the live catalog; without it the catalog's suggested default (default-model.ts). */
  model?: string;
  name: string;
  /** The service user's environment (the catalog's droid runs with it); process.env unless a test says otherwise. */
  env?: NodeJS.ProcessEnv;
}

interface InitResult {
  config: Record<string, unknown>;
  /** Set when droid was not found: the config is written without droidPath, and doctor will say more. */
  droidMissing: string | null;
  /** Why no defaultModel was written (no catalog could be read), or null when one was. */
  modelMissing: string | null;
  registration: string[];
}

export class InitRefusal extends CommandRefusal {}

/** The reference host's launch defaults (spec of record, "Reference host setup"); its model is chosen from the live catalog (chooseModel). */
const REFERENCE_DEFAULTS = { reasoningEffort: 'high', maxAutonomy: 'high', maxConcurrentRuns: 4 } as const;

const CLI_ENTRY = fileURLToPath(new URL('../../cli.js', import.meta.url));

/** exists(), with a path that cannot be inspected refused in init's words. */
async function present(path: string): Promise<boolean> {
  return exists(path).catch((err: unknown) => {
    throw new InitRefusal(`${path} cannot be inspected (${errCode(err) ?? 'unknown error'})`);
  });
}

function absolute(flag: string, path: string): string {
  if (!isAbsolute(path)) throw new InitRefusal(`${flag} must be an absolute path; got ${JSON.stringify(path)}`);
  return path;
}

export async function init(options: InitOptions): Promise<InitResult> {
  const configPath = absolute('--config', options.configPath);
  if (await present(configPath)) throw new InitRefusal(`${configPath} already exists; init never overwrites a config (remove it or pick another path)`);
  if (!(await present(dirname(configPath)))) throw new InitRefusal(`the folder of ${configPath} does not exist; create it first (mode 700)`);
  if (options.approve.length === 0) throw new InitRefusal('give at least one --approve DIR (an existing project root)');
  const approved: string[] = [];
  for (const dir of options.approve) {
    const real = await realpath(absolute('--approve', dir)).catch(() => {
      throw new InitRefusal(
        `--approve ${dir} does not exist; init never creates project roots: create it first (as the service user: mkdir -p ${dir}) or name an existing folder`,
      );
    });
    if (!(await stat(real)).isDirectory()) throw new InitRefusal(`--approve ${dir} is not a directory`);
    if (!approved.includes(real)) approved.push(real);
  }
  const state = absolute('--state', options.state);
  const tokenFile = options.http ? absolute('--token-file', options.tokenFile ?? join(dirname(configPath), 'token')) : undefined;
  if (tokenFile && (await present(tokenFile)))
    throw new InitRefusal(`${tokenFile} already exists; init never overwrites a token file (pass --token-file for another path)`);

  let droidMissing: string | null = null;
  let droidPath: string | undefined;
  try {
    droidPath = await resolveDroid({ droidPath: options.droidPath });
  } catch (err) {
    if (options.droidPath !== undefined) throw new InitRefusal(err instanceof Error ? err.message : String(err));
    droidMissing = err instanceof Error ? err.message : String(err);
  }

  const configWith = (defaultModel: string | undefined): Record<string, unknown> => ({
    approvedDirectories: approved,
    stateDirectory: state,
    ...(droidPath !== undefined && { droidPath }),
    ...(defaultModel !== undefined && { defaultModel }),
    ...REFERENCE_DEFAULTS,
    ...(options.http && { transport: 'http', port: options.port ?? CONFIG_DEFAULTS.port, tokenFile }),
    ...(options.publicUrl !== undefined && { publicUrl: options.publicUrl }),
  });
  // The real loader judges the file before the catalog is read, and again with the model, before anything is written.
  await trialLoad(configWith(options.model), configPath, droidMissing);
  const chosen = await chooseModel(configWith(undefined), droidPath ?? null, options);
  const config = configWith(chosen.model);
  const text = await trialLoad(config, configPath, droidMissing);

  try {
    await prepareStateDir(state);
  } catch (err) {
    throw new InitRefusal(err instanceof Error ? err.message : String(err));
  }
  // `wx`: never overwrite, even if something appeared since the checks.
  if (tokenFile) writeFileSync(tokenFile, `${randomBytes(32).toString('base64url')}\n`, { mode: 0o600, flag: 'wx' });
  writeFileSync(configPath, text, { mode: 0o600, flag: 'wx' });

  return { config, droidMissing, modelMissing: chosen.missing, registration: registrationLines(options.name, configPath, config) };
}

/** The config's text, once the real loader accepts it (a droid not found is no refusal: init writes the config without it). */
async function trialLoad(config: Record<string, unknown>, configPath: string, droidMissing: string | null): Promise<string> {
  const text = `${JSON.stringify(config, null, 2)}\n`;
  const scratch = mkdtempSync(join(tmpdir(), 'droid-mcp-init-'));
  try {
    const trial = join(scratch, 'config.json');
    writeFileSync(trial, text, { mode: 0o600 });
    await loadConfig(trial).catch((err: unknown) => {
      if (err instanceof ConfigError && err.code === 'droid_not_found' && droidMissing) return;
      throw new InitRefusal(err instanceof Error ? err.message.replace(trial, configPath) : String(err));
    });
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
  return text;
}

/**
 * The default model, from the live catalog of this droid read as doctor reads
 * it (in the turn sandbox): `--model` if the catalog has it as a standard
 * model, else the suggested default. Never a model the catalog lacks: with
 * no catalog, `--model` is refused and no default is written.
 */
async function chooseModel(
  config: Record<string, unknown>,
  droidPath: string | null,
  options: InitOptions,
): Promise<{ model?: string; missing: string | null }> {
  const env = options.env ?? process.env;
  const file = configFileSchema.parse(config);
  const read = droidPath === null ? { check: null, models: null } : await checkCatalog(file, droidPath, await checkSandbox(file, env), env);
  const why = read.check?.status === 'fail' ? read.check.detail : 'droid was not found';
  if (!read.models) {
    if (options.model !== undefined)
      throw new InitRefusal(
        `--model ${options.model} cannot be checked against the live catalog (${why}); fix that (droid-mcp doctor says how), or leave --model out and set "defaultModel" later`,
      );
    return {
      missing: `no defaultModel was written: the live catalog could not be read (${why}); every create must name a model until you set one (doctor lists the choices)`,
    };
  }
  if (options.model === undefined) {
    const model = suggestedDefault(read.models);
    return model === undefined ? { missing: 'no defaultModel was written: the live catalog has no standard model' } : { model, missing: null };
  }
  if (!standardModels(read.models).some((m) => m.id === options.model)) {
    const what = read.models.some((m) => m.id === options.model)
      ? 'is a Fast variant (the host default must be a standard model)'
      : `is not in the live catalog of ${droidPath}`;
    throw new InitRefusal(`--model ${options.model} ${what}; choose one of: ${choices(read.models)}`);
  }
  return { model: options.model, missing: null };
}

/**
 * How to register the server with MCP clients. Never prints the token: shell
 * lines read the file, JSON shows where to paste it from.
 */
function registrationLines(name: string, configPath: string, config: Record<string, unknown>): string[] {
  const node = process.execPath;
  if (config.transport === 'http') {
    const url = typeof config.publicUrl === 'string' ? config.publicUrl : `http://127.0.0.1:${String(config.port)}/mcp`;
    const token = String(config.tokenFile);
    const headers = { Authorization: `Bearer <contents of ${token}>` };
    return [
      `Start the server (under your service manager): ${node} ${CLI_ENTRY} --config ${configPath}`,
      '',
      'Claude Code:',
      `  claude mcp add --scope user --transport http ${name} ${url} --header "Authorization: Bearer $(cat ${token})"`,
      '',
      'Amp (one key: merge it into the object in its settings.json, e.g. ~/.config/amp/settings.json):',
      `  "amp.mcpServers": ${JSON.stringify({ [name]: { url, headers } })}`,
      '',
      'Any client that reads an mcpServers JSON:',
      `  ${JSON.stringify({ mcpServers: { [name]: { type: 'http', url, headers } } })}`,
    ];
  }
  const args = [CLI_ENTRY, '--config', configPath];
  return [
    'Claude Code:',
    `  claude mcp add --scope user ${name} -- ${node} ${args.join(' ')}`,
    '',
    'Amp (one key: merge it into the object in its settings.json, e.g. ~/.config/amp/settings.json):',
    `  "amp.mcpServers": ${JSON.stringify({ [name]: { command: node, args } })}`,
    '',
    'Any client that reads an mcpServers JSON:',
    `  ${JSON.stringify({ mcpServers: { [name]: { command: node, args } } })}`,
  ];
}

const INIT_OPTIONS = {
  config: { type: 'string' },
  approve: { type: 'string', multiple: true },
  state: { type: 'string' },
  http: { type: 'boolean', default: false },
  port: { type: 'string' },
  'token-file': { type: 'string' },
  'public-url': { type: 'string' },
  droid: { type: 'string' },
  model: { type: 'string' },
  name: { type: 'string', default: 'droid-mcp' },
} as const;

/** The options as init() takes them; refuses what parseArgs cannot (missing, contradictory, out of range). */
function initOptions(values: OptionValues<typeof INIT_OPTIONS>): InitOptions {
  if (!values.config) throw new CommandRefusal('--config /absolute/path/for/config.json is required');
  if (!values.state) throw new CommandRefusal('--state /absolute/path/of/the/state/directory is required');
  if (!values.http && (values.port || values['token-file'] || values['public-url']))
    throw new CommandRefusal('--port, --token-file and --public-url go with --http');
  const port = values.port === undefined ? undefined : Number(values.port);
  if (port !== undefined && !(Number.isInteger(port) && port >= 1 && port <= 65535))
    throw new CommandRefusal(`--port must be an integer from 1 to 65535; got ${values.port}`);
  return {
    configPath: values.config,
    approve: values.approve ?? [],
    state: values.state,
    http: values.http,
    ...(port !== undefined && { port }),
    ...(values['token-file'] !== undefined && { tokenFile: values['token-file'] }),
    ...(values['public-url'] !== undefined && { publicUrl: values['public-url'] }),
    ...(values.droid !== undefined && { droidPath: values.droid }),
    ...(values.model !== undefined && { model: values.model }),
    name: values.name,
  };
}

export const initCommand = command({
  usage: [
    '--config /abs/config.json --approve DIR [--approve DIR …] --state DIR',
    '[--http [--port N] [--token-file FILE] [--public-url https://…/mcp]]',
    '[--droid PATH] [--model ID] [--name NAME]',
  ],
  summary: [
    'write a private config (never overwrites), the state',
    'directory (700) and, with --http, a new token file;',
    'each --approve DIR must exist; the default model is',
    "--model or one from droid's live catalog, checked there;",
    'print the lines that register the server',
  ],
  options: INIT_OPTIONS,
  async run(values) {
    const options = initOptions(values);
    const result = await init(options);
    out(`wrote ${options.configPath} (mode 600):`);
    for (const line of JSON.stringify(result.config, null, 2).split('\n')) out(`  ${line}`);
    out(`state directory ${options.state} is ready (mode 700)`);
    if (result.config.tokenFile) out(`wrote a new token to ${String(result.config.tokenFile)} (mode 600; it is never printed)`);
    if (result.droidMissing) out(`note: ${result.droidMissing}`);
    if (result.modelMissing) out(`note: ${result.modelMissing}`);
    out('');
    out(`Next: check the host with  droid-mcp doctor --config ${options.configPath}`);
    out('then register the server:');
    out('');
    for (const line of result.registration) out(line);
    return 0;
  },
});
