/**
 * Worker side of the warm pool: the droid a pre-forked worker spawns before
 * it knows its turn, and the rule for when a turn may use it.
 *
 * A warm droid is a plain `droid exec` process that has not opened a session,
 * started with exactly the environment a cold one gets, in a neutral private
 * folder. droid takes the workspace from the protocol (`initialize_session
 * {cwd}` / `load_session`), not from its process cwd: measured on 0.225.2,
 * tools run in the session's cwd and its AGENTS.md and project `.factory/`
 * are loaded from there (test/wire/warm-real-droid.test.ts).
 *
 * Never under a sandbox: bubblewrap's binds are fixed when droid is spawned,
 * before the workspace is known (see docs/ARCHITECTURE.md, "Warm pool").
 */
import { DroidClient } from '../droid/client.js';
import type { TurnSpec, WarmDroidSpec } from './protocol.js';

export interface WarmDroid {
  readonly spec: WarmDroidSpec;
  readonly client: DroidClient;
}

export function spawnWarmDroid(spec: WarmDroidSpec): WarmDroid {
  return { spec, client: DroidClient.spawn({ droidPath: spec.droidPath, env: spec.droidEnv, cwd: spec.dir }) };
}

/**
 * Whether a turn may use this warm droid: unconfined turns only, same
 * executable, same environment, and droid still running. Pure.
 */
export function warmFits(warm: WarmDroidSpec, alive: boolean, spec: Pick<TurnSpec, 'sandbox' | 'droidPath' | 'droidEnv'>): boolean {
  return alive && spec.sandbox.mode === 'off' && warm.droidPath === spec.droidPath && sameEnv(warm.droidEnv, spec.droidEnv);
}

function sameEnv(a: Readonly<Record<string, string>>, b: Readonly<Record<string, string>>): boolean {
  const keys = Object.keys(a);
  if (keys.length !== Object.keys(b).length) return false;
  return keys.every((k) => Object.hasOwn(b, k) && a[k] === b[k]);
}

/** Whether droid's process is still running and its connection open. */
export function warmAlive(warm: WarmDroid): boolean {
  const child = warm.client.process.child;
  return child.exitCode === null && child.signalCode === null && !warm.client.process.connection.closed;
}
