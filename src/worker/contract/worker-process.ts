/**
 * What a worker process needs before it has loaded the rest of itself
 * (worker/child/main.ts): its titles and pool argument, and the droid
 * launch the runner computed for it, as it crosses IPC. No zod here: this
 * module is on a cold worker's path to spawning droid, and so is its
 * every import.
 */
import type { DroidLaunch } from '../../droid/start-droid.js';
// Its type only: the schema (and zod) stay off this path.
import type { WireLaunch } from './protocol.js';

/**
 * Process title of a pool worker while it waits for a turn (ps, /proc/<pid>/cmdline):
 * operators and leak checks can tell an idle warm worker from a turn's. Reset when the turn comes.
 */
export const WARM_IDLE_TITLE = 'droid-mcp warm worker (idle)';
export const WORKER_TITLE = 'droid-mcp worker';
/**
 * Process title of a worker holding a droid booted for a session's next turn
 * (controller/turns/next-turn-droids.ts) until that turn comes: no turn's yet, like an idle pool worker's.
 */
export const AHEAD_TITLE = 'droid-mcp worker (ahead)';
/** Argument of a worker forked for the pool: it is idle (WARM_IDLE_TITLE) from its first moment. */
export const POOL_ARG = '--pool';

/** The droid launch as it crosses IPC; its schema, with what it means, is in protocol.ts. */
export type { WireLaunch };

export function toWireLaunch(launch: DroidLaunch): WireLaunch {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(launch.env)) if (value !== undefined) env[key] = value;
  const launcher = launch.launcher && {
    command: launch.launcher.command,
    args: [...launch.launcher.args],
    fd3: Buffer.from(launch.launcher.fd3 ?? []).toString('base64'),
    ...(launch.launcher.egress && { egress: true as const }),
  };
  return { droidPath: launch.droidPath, env, cwd: launch.cwd ?? '/', ...(launcher && { launcher }) };
}

export function fromWireLaunch(wire: WireLaunch): DroidLaunch {
  const launcher = wire.launcher && {
    command: wire.launcher.command,
    args: wire.launcher.args,
    fd3: Buffer.from(wire.launcher.fd3, 'base64'),
    ...(wire.launcher.egress === true && { egress: true }),
  };
  return { droidPath: wire.droidPath, env: wire.env, cwd: wire.cwd, ...(launcher && { launcher }) };
}

const isStrings = (v: unknown): v is string[] => Array.isArray(v) && v.every((x) => typeof x === 'string');

/**
 * The launch of a `run` (or an early `launch`) message, checked only as far
 * as spawning needs (strings where strings go); null when there is none or
 * it is malformed. The run is validated in full (ipc.ts) before the droid is used.
 */
export function launchOfRun(raw: unknown): WireLaunch | null {
  const type = typeof raw === 'object' && raw !== null ? (raw as { type?: unknown }).type : undefined;
  if (type !== 'run' && type !== 'launch') return null;
  const launch = (raw as { launch?: unknown }).launch as Partial<WireLaunch> | undefined;
  if (typeof launch !== 'object' || launch === null) return null;
  const { droidPath, env, cwd, launcher } = launch;
  if (typeof droidPath !== 'string' || typeof cwd !== 'string' || !cwd.startsWith('/')) return null;
  if (typeof env !== 'object' || env === null || !Object.values(env).every((v) => typeof v === 'string')) return null;
  if (
    launcher !== undefined &&
    (typeof launcher !== 'object' || launcher === null || typeof launcher.command !== 'string' || !isStrings(launcher.args) || typeof launcher.fd3 !== 'string')
  )
    return null;
  return launch as WireLaunch;
}
