/**
 * The operator commands of `droid-mcp`: the one dispatcher and the one help
 * text. `droid-mcp <command> [options]` for init, doctor, status, backup,
 * restore, the verification commands and the demo; `--version`, `--help`.
 * Loaded by src/cli.ts with a dynamic import, so the server never loads the
 * stdout writer. Returns the
 * exit status: a refusal (bad arguments included) is 2, a server holding the
 * state is 3, a failure or an unexpected error 1.
 */
import { parseArgs } from 'node:util';
import { demoCommand } from '../demo/demo.js';
import { SERVER_VERSION } from '../mcp/server.js';
import { acceptanceCommand } from './verify/acceptance-check.js';
import { backupCommand } from './state/backup.js';
import { CommandFailure, CommandRefusal, ServerRunning, type Command } from './command.js';
import { doctorCommand } from './setup/doctor.js';
import { initCommand } from './setup/init.js';
import { smokeCommand, verifyLiveCommand } from './verify/lifecycle.js';
import { restoreCommand } from './state/restore.js';
import { statusCommand } from './state/status.js';
import { out } from './output.js';
import { verifyRouteCommand } from './verify/verify-route.js';

/** In help order, under their headings. */
const GROUPS: ReadonlyArray<[heading: string, commands: Record<string, Command>]> = [
  ['Set up and check a host:', { init: initCommand, doctor: doctorCommand }],
  ['Run a host:', { status: statusCommand, backup: backupCommand, restore: restoreCommand }],
  [
    'Verify against a droid login (disposable private state; prints assertions and versions only):',
    { smoke: smokeCommand, 'verify-live': verifyLiveCommand, acceptance: acceptanceCommand, 'verify-route': verifyRouteCommand },
  ],
  ['Try it offline:', { demo: demoCommand }],
];
const COMMANDS: Record<string, Command> = Object.assign({}, ...GROUPS.map(([, commands]) => commands));

const SUMMARY_COLUMN = 45;

function helpOf(name: string, c: Command): string[] {
  const [first, ...rest] = c.usage;
  const lead = `  droid-mcp ${name} `;
  return [`${lead}${first}`, ...rest.map((line) => `${' '.repeat(lead.length)}${line}`), ...c.summary.map((line) => `${' '.repeat(SUMMARY_COLUMN)}${line}`)];
}

function help(): string {
  return [
    `droid-mcp ${SERVER_VERSION}: an MCP server that runs and steers Factory droid sessions on this host`,
    '',
    'Usage:',
    '  droid-mcp --config /abs/config.json        serve MCP (stdio, or HTTP when the config says so)',
    '  droid-mcp --version | --help',
    ...GROUPS.flatMap(([heading, commands]) => ['', heading, ...Object.entries(commands).flatMap(([name, c]) => helpOf(name, c))]),
    '',
    'Installation, registration, upgrades and recovery: HANDOFF.md.',
  ].join('\n');
}

function isParseError(err: unknown): err is TypeError {
  return err instanceof TypeError && 'code' in err && String(err.code).startsWith('ERR_PARSE_ARGS');
}

export async function runCommand(args: readonly string[]): Promise<number> {
  if (args.includes('--version')) {
    out(SERVER_VERSION);
    return 0;
  }
  if (args.includes('--help') || args.includes('-h')) {
    out(help());
    return 0;
  }
  const name = args[0] ?? '';
  const chosen = COMMANDS[name];
  if (!chosen) {
    process.stderr.write(`droid-mcp: unknown command ${JSON.stringify(name)}\n(droid-mcp --help lists the commands)\n`);
    return 2;
  }
  try {
    const { values } = parseArgs({ args: args.slice(1), options: chosen.options, strict: true, allowPositionals: false });
    return await chosen.run(values);
  } catch (err) {
    if (err instanceof ServerRunning || err instanceof CommandFailure) {
      process.stderr.write(`droid-mcp ${name}: ${err.message}\n`);
      return err instanceof ServerRunning ? 3 : 1;
    }
    if (err instanceof CommandRefusal || isParseError(err)) {
      process.stderr.write(`droid-mcp ${name}: ${err.message}\nusage: droid-mcp ${name} ${chosen.usage.join(' ')}\n`);
      return 2;
    }
    process.stderr.write(`droid-mcp ${name}: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    return 1;
  }
}
