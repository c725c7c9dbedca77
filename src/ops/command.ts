/**
 * The shape every operator command has (`droid-mcp <name> …`, dispatched by
 * commands.ts): its options in node:util parseArgs form, its lines of the one
 * help text, and what it runs with the parsed values. One argument style for
 * all of them: strict options, no positionals, usage errors exit 2.
 */
import type { parseArgs, ParseArgsConfig } from 'node:util';

type Options = NonNullable<ParseArgsConfig['options']>;

/** What parseArgs (strict) returns for these options. */
export type OptionValues<O extends Options> = ReturnType<typeof parseArgs<{ options: O; strict: true }>>['values'];

/**
 * A command that will not run as asked (bad arguments, or a refusal such as
 * init's): the dispatcher says why on stderr, with the usage, exit status 2.
 */
export class CommandRefusal extends Error {}

/** The refusal of a command that must not run beside a server that holds the state: exit 3 (as `status` while busy), no usage line. */
export class ServerRunning extends CommandRefusal {}

/** A command that failed partway for a reason it can name (a tar that failed): exit 1, the message without a stack trace. */
export class CommandFailure extends Error {}

export interface Command<O extends Options = Options> {
  /** Its arguments after `droid-mcp <name> `, one string per help line. */
  usage: readonly string[];
  /** What it does, one string per help line. */
  summary: readonly string[];
  options: O;
  /** Returns the exit status. */
  run(values: OptionValues<O>): Promise<number>;
}

/** Checks a command's `run` against its own options; the dispatcher holds them all alike. */
export function command<const O extends Options>(spec: Command<O>): Command {
  return spec as unknown as Command;
}
