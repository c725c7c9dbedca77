/**
 * Starts `droid exec` in stream-jsonrpc mode and watches it die. Settings go
 * through the protocol, never through CLI flags.
 */
import type { ChildProcessWithoutNullStreams } from 'node:child_process';
import { accessSync, constants, statSync } from 'node:fs';
import { DroidConnection } from './connection.js';
import { DroidError } from './errors.js';
import { startDroid, type DroidLaunch, type StartedDroid } from './start-droid.js';
import { TextTail } from '../util/text.js';
import { epochMs } from '../util/epoch.js';

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
  /** Its proxy's listener when the sandbox gave droid its own network (launch.ts); null otherwise. */
  readonly egressListener: StartedDroid['egressListener'];
  kill(signal?: NodeJS.Signals): void;
}

export interface SpawnDroidOptions extends DroidLaunch {
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
  return adoptDroid(startDroid(options), options.requestTimeoutMs);
}

/** Speaks the protocol with a droid already started (startDroid), however long ago: its end was watched from the start. */
export function adoptDroid(started: StartedDroid, requestTimeoutMs?: number): DroidProcess {
  const child = started.child;
  const connection = new DroidConnection({
    input: child.stdout,
    output: child.stdin,
    defaultTimeoutMs: requestTimeoutMs,
  });
  let firstOutputAt: number | null = null;
  child.stdout.once('data', () => (firstOutputAt = epochMs()));
  const stderr = new TextTail(STDERR_TAIL_CHARS);
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (chunk: string) => stderr.push(chunk));

  const exited = started.ended.then(
    (end) =>
      new Promise<DroidExit>((resolve) => {
        if (end.kind === 'error') {
          connection.close(new DroidError('droid_spawn_failed', `could not start droid: ${end.error.message}`));
          return resolve({ code: null, signal: null });
        }
        // `exit` rather than `close`: a grandchild holding the pipes open must not
        // delay the verdict. Output already in flight gets a short moment to land.
        const { code, signal } = end;
        const finish = () => {
          connection.close(new DroidError('droid_exited', `droid exited (${signal ? `signal ${signal}` : `code ${code}`})`, true, { code, signal }));
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
      }),
  );

  return {
    child,
    connection,
    stderr,
    exited,
    get firstOutputAt() {
      return firstOutputAt;
    },
    egressListener: started.egressListener,
    kill: (signal) => started.kill(signal),
  };
}
