/**
 * Starts `droid exec` in stream-jsonrpc mode and watches it die. Settings go
 * through the protocol, never through CLI flags.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { handFd3 } from '../util/child-fd3.js';
import { accessSync, constants, statSync } from 'node:fs';
import { DroidConnection } from './connection.js';
import { DroidError } from './errors.js';
import { TextTail } from '../util/text.js';
import { epochMs } from '../util/epoch.js';

const DROID_EXEC_ARGS = ['exec', '--input-format', 'stream-jsonrpc', '--output-format', 'stream-jsonrpc'];
const STDERR_TAIL_CHARS = 16_000;
const EXIT_DRAIN_MS = 200;

export interface DroidExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface DroidProcess {
  readonly child: ChildProcessWithoutNullStreams;
  readonly connection: DroidConnection;
  readonly stderr: TextTail;
  /** Settles once the process has exited and its pipes are closed. */
  readonly exited: Promise<DroidExit>;
  /** When droid's first output arrived (epoch ms), or null before it: a turn's start timeline. */
  readonly firstOutputAt: number | null;
  kill(signal?: NodeJS.Signals): void;
}

export interface SpawnDroidOptions {
  droidPath: string;
  env: NodeJS.ProcessEnv;
  /** Working directory of the process; the session's cwd is set by protocol. */
  cwd?: string;
  /**
   * Runs droid through this program (a sandbox): `command ...args droidPath exec …`,
   * with `fd3` (the sandbox's seccomp program) readable on the program's fd 3.
   */
  launcher?: { command: string; args: readonly string[]; fd3?: Uint8Array };
  /** Leads its own process group (a droid started outside any worker, so its group can be killed whole). */
  detached?: boolean;
  requestTimeoutMs?: number;
}

/** Fails with `droid_not_found` before spawning when the binary is unusable. */
export function assertDroidExecutable(droidPath: string): void {
  const hint = 'Install the Factory droid CLI (curl -fsSL https://app.factory.ai/cli | sh) or set droidPath to its absolute path.';
  let isFile = false;
  try {
    isFile = statSync(droidPath).isFile();
    accessSync(droidPath, constants.X_OK);
  } catch {
    throw new DroidError('droid_not_found', `droid CLI not found or not executable at the configured droidPath. ${hint}`);
  }
  if (!isFile) throw new DroidError('droid_not_found', `the configured droidPath is not a file. ${hint}`);
}

export function spawnDroid(options: SpawnDroidOptions): DroidProcess {
  assertDroidExecutable(options.droidPath);
  const [command, args] = options.launcher
    ? [options.launcher.command, [...options.launcher.args, options.droidPath, ...DROID_EXEC_ARGS]]
    : [options.droidPath, DROID_EXEC_ARGS];
  const fd3 = options.launcher?.fd3;
  const child = spawn(command, args, {
    cwd: options.cwd,
    env: options.env,
    detached: options.detached ?? false,
    stdio: fd3 ? ['pipe', 'pipe', 'pipe', 'pipe'] : ['pipe', 'pipe', 'pipe'],
  }) as ChildProcessWithoutNullStreams;
  if (fd3) handFd3(child, fd3);
  const connection = new DroidConnection({
    input: child.stdout,
    output: child.stdin,
    defaultTimeoutMs: options.requestTimeoutMs,
  });
  let firstOutputAt: number | null = null;
  child.stdout.once('data', () => (firstOutputAt = epochMs()));
  const stderr = new TextTail(STDERR_TAIL_CHARS);
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (chunk: string) => stderr.push(chunk));

  const exited = new Promise<DroidExit>((resolve) => {
    child.once('error', (err) => {
      connection.close(new DroidError('droid_spawn_failed', `could not start droid: ${err.message}`));
      resolve({ code: null, signal: null });
    });
    // `exit` rather than `close`: a grandchild holding the pipes open must not
    // delay the verdict. Output already in flight gets a short moment to land.
    child.once('exit', (code, signal) => {
      const finish = () => {
        connection.close(
          new DroidError('droid_exited', `droid exited (${signal ? `signal ${signal}` : `code ${code}`})`, true, { code, signal }),
        );
        resolve({ code, signal });
      };
      if (child.stdout.readableEnded) finish();
      else {
        const timer = setTimeout(finish, EXIT_DRAIN_MS);
        child.stdout.once('end', () => {
          clearTimeout(timer);
          finish();
        });
      }
    });
  });

  return {
    child,
    connection,
    stderr,
    exited,
    get firstOutputAt() {
      return firstOutputAt;
    },
    kill(signal: NodeJS.Signals = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    },
  };
}
