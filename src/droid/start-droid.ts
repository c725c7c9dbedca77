/**
 * Spawning droid's process, and nothing else: kept free of the protocol
 * code (and its imports) so a cold worker can start droid before it loads
 * the rest of itself (worker/child/main.ts). process.ts wraps the result.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';

type StdioSlot = 'pipe' | 'ipc' | 'ignore';
import type { Server, Socket } from 'node:net';
import type { Writable } from 'node:stream';
import { handFd3 } from '../util/child-fd3.js';

const DROID_EXEC_ARGS = ['exec', '--input-format', 'stream-jsonrpc', '--output-format', 'stream-jsonrpc'];

/** How to start one droid: its executable, environment and cwd, optionally through a sandbox program. */
export interface DroidLaunch {
  droidPath: string;
  env: NodeJS.ProcessEnv;
  /** Working directory of the process; the session's cwd is set by protocol. */
  cwd?: string;
  /**
   * Runs droid through this program (a sandbox): `command ...args droidPath exec …`,
   * with `fd3` (the sandbox's seccomp program) readable on the program's fd 3.
   */
  launcher?: {
    command: string;
    args: readonly string[];
    fd3?: Uint8Array;
    /** The program hands back a listening socket over an IPC channel on fd 4 (sandbox/egress/netns.ts): droid's proxy. */
    egress?: boolean;
  };
  /**
   * Leads its own process group (a droid started outside any worker, so its
   * group can be killed whole), under a guard that kills that group when this
   * process dies (LIFELINE).
   */
  detached?: boolean;
}

/** The slot of the guard's lifeline: after the seccomp program (3) and the proxy's channel (4). */
const LIFELINE_FD = 5;

/**
 * The guard of a droid that leads its own group. Such a droid is no worker's:
 * nothing of ours is left to stop it when this process is killed outright, and
 * bubblewrap's `--die-with-parent` holds only once bubblewrap has set itself
 * up (its outer half after it cloned, the namespace's init after every mount),
 * so a controller killed in those milliseconds left the sandbox and droid
 * running under init (issue 38). The guard starts the program, closes what is
 * not its own, and waits; a watcher beside it reads the lifeline, a pipe whose
 * other end only this process holds, and at its end (this process gone, however)
 * kills the whole group. The guard exits with the program's status.
 */
const LIFELINE =
  // stdin through fd 6: a background command of a shell without job control reads /dev/null otherwise.
  `exec 6<&0; "$@" <&6 6<&- ${LIFELINE_FD}<&- & p=$!; ` +
  `( read _ <&${LIFELINE_FD}; kill -9 0 ) </dev/null >/dev/null 2>&1 6<&- & w=$!; ` +
  `exec 3<&- 4<&- ${LIFELINE_FD}<&- 6<&-; wait $p; s=$?; kill $w 2>/dev/null; exit $s`;

/**
 * The listening socket of droid's proxy, as it arrived: it accepts at once,
 * so connections droid made before the proxy was attached are held, paused,
 * until `take` hands them over (and stops holding).
 */
export interface EgressListener {
  server: Server;
  take(): Socket[];
}

/** How a started droid ended before anyone watched it: its exit, or the spawn's error. */
export type EarlyEnd = { kind: 'exit'; code: number | null; signal: NodeJS.Signals | null } | { kind: 'error'; error: Error };

export interface StartedDroid {
  readonly child: ChildProcessWithoutNullStreams;
  /** Settles on the child's `exit` or `error`, whichever comes first, however late the caller looks. */
  readonly ended: Promise<EarlyEnd>;
  /**
   * The listening socket of droid's proxy (a sandbox with its own network), as
   * it arrives; rejects when the channel closes without it. null: droid uses
   * the host's network.
   */
  readonly egressListener: Promise<EgressListener> | null;
  /** Signals droid if it runs (see `signalDroid`). */
  kill(signal?: NodeJS.Signals): void;
}

/**
 * Signals a droid child only while it runs. A child whose spawn failed has
 * no pid, and signalling it could reach pid 0, this process's own group
 * (the worker's, with everything in it).
 */
function signalDroid(child: ChildProcessWithoutNullStreams, signal: NodeJS.Signals = 'SIGTERM'): void {
  if (child.pid !== undefined && child.exitCode === null && child.signalCode === null) child.kill(signal);
}

/** Spawns droid (no checks: the caller made them) and starts watching its end at once, so none is missed. */
export function startDroid(launch: DroidLaunch): StartedDroid {
  const [command, args] = launch.launcher
    ? [launch.launcher.command, [...launch.launcher.args, launch.droidPath, ...DROID_EXEC_ARGS]]
    : [launch.droidPath, DROID_EXEC_ARGS];
  const fd3 = launch.launcher?.fd3;
  const egress = launch.launcher?.egress === true;
  const guarded = launch.detached === true;
  const stdio: StdioSlot[] = egress ? ['pipe', 'pipe', 'pipe', 'pipe', 'ipc'] : fd3 ? ['pipe', 'pipe', 'pipe', 'pipe'] : ['pipe', 'pipe', 'pipe'];
  const child = spawn(guarded ? '/bin/sh' : command, guarded ? ['-c', LIFELINE, 'droid-mcp-lifeline', command, ...args] : args, {
    cwd: launch.cwd,
    env: launch.env,
    detached: guarded,
    stdio: guarded ? [...stdio, ...Array<StdioSlot>(LIFELINE_FD - stdio.length).fill('ignore'), 'pipe'] : stdio,
  }) as ChildProcessWithoutNullStreams;
  const egressListener = egress ? listenerOf(child) : null;
  const ended = new Promise<EarlyEnd>((resolve) => {
    child.once('error', (error) => resolve({ kind: 'error', error }));
    child.once('exit', (code, signal) => resolve({ kind: 'exit', code, signal }));
  });
  // Held open, unwritten, for the guard's life; closed once it has ended.
  if (guarded) void ended.then(() => (child.stdio as unknown as Array<Writable | null>)[LIFELINE_FD]?.destroy());
  if (fd3) handFd3(child, fd3);
  return { child, ended, egressListener, kill: (signal) => signalDroid(child, signal) };
}

/** The first handle on the child's IPC channel (one message, then the channel is closed); anything else is refused. */
function listenerOf(child: ChildProcessWithoutNullStreams): Promise<EgressListener> {
  const listener = new Promise<EgressListener>((resolve, reject) => {
    const gone = () => reject(new Error("the sandbox's proxy listener never arrived (its helper ended or failed first)"));
    child.once('disconnect', gone);
    child.once('error', gone);
    child.once('message', (message: unknown, handle: unknown) => {
      child.off('disconnect', gone);
      // Only the helper ever holds the channel, and only one message is read: droid never gets it.
      if (child.connected) child.disconnect();
      const isServer =
        typeof handle === 'object' && handle !== null && typeof (handle as Server).listen === 'function' && typeof (handle as Server).address === 'function';
      const kind = typeof message === 'object' && message !== null ? (message as { kind?: unknown }).kind : undefined;
      if (kind === 'egress-listener' && isServer) resolve(holding(handle as Server));
      else reject(new Error("the sandbox's proxy listener sent something else than its listening socket"));
    });
  });
  listener.catch(() => undefined);
  return listener;
}

function holding(server: Server): EgressListener {
  const held: Socket[] = [];
  const hold = (socket: Socket) => {
    socket.pause();
    socket.on('error', () => socket.destroy());
    held.push(socket);
  };
  server.on('connection', hold);
  return {
    server,
    take: () => {
      server.off('connection', hold);
      return held.splice(0);
    },
  };
}
