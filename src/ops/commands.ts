/**
 * The operator commands of `droid-mcp`: init, doctor, --version, --help.
 * Loaded by src/cli.ts with a dynamic import, so the server never loads the
 * stdout writer. Returns the exit status.
 */
import { parseArgs } from 'node:util';
import { SERVER_VERSION } from '../mcp/server.js';
import { doctor, formatChecks } from './doctor.js';
import { init, InitRefusal, REFERENCE_DEFAULTS } from './init.js';
import { out } from './output.js';

export const HELP = `droid-mcp ${SERVER_VERSION}: an MCP server that runs and steers Factory droid sessions on this host

Usage:
  droid-mcp --config /abs/config.json        serve MCP (stdio, or HTTP when the config says so)
  droid-mcp init --config /abs/config.json --approve DIR [--approve DIR …] --state DIR
                 [--http [--port N] [--token-file FILE] [--public-url https://…/mcp]]
                 [--droid PATH] [--model ID] [--name NAME]
                                             write a private config (never overwrites), the state
                                             directory (700) and, with --http, a new token file;
                                             print the lines that register the server
  droid-mcp doctor --config /abs/config.json [--json]
                                             check this host: config, droid, catalog, default model,
                                             state directory and its owner, approved roots, token,
                                             port, sandbox, droid's cloud sync; exit 1 on a failure
  droid-mcp --version | --help

Installation, registration, upgrades and recovery: HANDOFF.md.`;

/** Wrong arguments: said on stderr with exit status 2. */
class UsageError extends Error {}

export async function runCommand(args: readonly string[]): Promise<number> {
  if (args[0] !== 'init' && args[0] !== 'doctor') {
    if (args.includes('--version')) out(SERVER_VERSION);
    else out(HELP);
    return 0;
  }
  try {
    return args[0] === 'init' ? await runInit(args.slice(1)) : await runDoctor(args.slice(1));
  } catch (err) {
    if (err instanceof InitRefusal || err instanceof UsageError || (err instanceof TypeError && 'code' in err && String(err.code).startsWith('ERR_PARSE_ARGS'))) {
      process.stderr.write(`droid-mcp ${args[0]}: ${err.message}\n(droid-mcp --help shows the usage)\n`);
      return 2;
    }
    throw err;
  }
}

async function runInit(args: readonly string[]): Promise<number> {
  const { values } = parseArgs({
    args: [...args],
    strict: true,
    options: {
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
    },
  });
  if (!values.config) throw new UsageError('--config /absolute/path/for/config.json is required');
  if (!values.state) throw new UsageError('--state /absolute/path/of/the/state/directory is required');
  if (!values.http && (values.port || values['token-file'] || values['public-url'])) throw new UsageError('--port, --token-file and --public-url go with --http');
  const port = values.port === undefined ? undefined : Number(values.port);
  if (port !== undefined && !(Number.isInteger(port) && port >= 1 && port <= 65535)) throw new UsageError(`--port must be an integer from 1 to 65535; got ${values.port}`);
  const result = await init({
    configPath: values.config,
    approve: values.approve ?? [],
    state: values.state,
    http: values.http,
    ...(port !== undefined && { port }),
    ...(values['token-file'] !== undefined && { tokenFile: values['token-file'] }),
    ...(values['public-url'] !== undefined && { publicUrl: values['public-url'] }),
    ...(values.droid !== undefined && { droidPath: values.droid }),
    defaultModel: values.model ?? REFERENCE_DEFAULTS.defaultModel,
    name: values.name,
  });
  out(`wrote ${values.config} (mode 600):`);
  for (const line of JSON.stringify(result.config, null, 2).split('\n')) out(`  ${line}`);
  out(`state directory ${values.state} is ready (mode 700)`);
  if (result.config.tokenFile) out(`wrote a new token to ${String(result.config.tokenFile)} (mode 600; it is never printed)`);
  if (result.droidMissing) out(`note: ${result.droidMissing}`);
  out('');
  out(`Next: check the host with  droid-mcp doctor --config ${values.config}`);
  out('then register the server:');
  out('');
  for (const line of result.registration) out(line);
  return 0;
}

async function runDoctor(args: readonly string[]): Promise<number> {
  const { values } = parseArgs({ args: [...args], strict: true, options: { config: { type: 'string' }, json: { type: 'boolean', default: false } } });
  if (!values.config) throw new UsageError('--config /absolute/path/to/config.json is required');
  const checks = await doctor(values.config);
  const failed = checks.some((c) => c.status === 'fail');
  if (values.json) out(JSON.stringify({ ok: !failed, checks }, null, 2));
  else for (const line of formatChecks(checks)) out(line);
  return failed ? 1 : 0;
}
