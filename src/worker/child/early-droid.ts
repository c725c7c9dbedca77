/**
 * A turn's droid started from the runner's launch before the worker has
 * validated its `run` message and made its own launch (the worker then
 * decides: run-turn.ts turnDroid). Used by the entry of a cold worker
 * (main.ts) and by a pool worker holding no droid (worker.ts). Small on
 * purpose: on a cold worker's path to spawning droid.
 */
import { accessSync, constants, realpathSync, statSync } from 'node:fs';
import { startDroid, type DroidLaunch, type StartedDroid } from '../../droid/start-droid.js';
import { fromWireLaunch, launchOfRun } from '../contract/worker-process.js';

export interface EarlyDroid {
  started: StartedDroid;
  launch: DroidLaunch;
  spawnedAt: number;
}

/**
 * droid from the launch of a `run` message, when it carries one and its cwd
 * is still the directory it names (the check every start makes before droid
 * runs: a path swapped for a symlink meanwhile gets no droid here);
 * otherwise none, and the worker starts droid itself.
 */
export function startEarly(run: unknown): EarlyDroid | undefined {
  const wire = launchOfRun(run);
  if (!wire) return undefined;
  try {
    if (realpathSync(wire.cwd) !== wire.cwd || !statSync(wire.cwd).isDirectory()) return undefined;
    const launch = fromWireLaunch(wire);
    // A program that cannot run is not tried here (the worker's own check names it).
    accessSync(launch.launcher?.command ?? launch.droidPath, constants.X_OK);
    // Date.now(), as util/epoch.ts (not imported: this module stays small on a cold worker's path).
    return { started: startDroid(launch), launch, spawnedAt: Date.now() };
  } catch {
    // The worker's own checks name what is wrong.
    return undefined;
  }
}

/** Still running: one started before its run may have died while it waited. */
export function earlyAlive(early: EarlyDroid): boolean {
  const child = early.started.child;
  return child.pid !== undefined && child.exitCode === null && child.signalCode === null;
}

/**
 * A process's first spawn is its slowest: in a warm worker `startDroid`
 * took 6–12 ms the first time and 3–4 ms after (Node's spawn path runs
 * cold once). A pool worker that will spawn its turn's droid itself (a
 * sandboxed pool: bwrap's binds are fixed at spawn) pays that while idle,
 * on one throwaway child started the same way: this Node's `--version`
 * (it ignores the arguments after), fd 3 written. It ends by itself within
 * milliseconds, in the worker's group; a failure costs only the saving.
 */
export function warmSpawnPath(): void {
  try {
    const { child } = startDroid({
      droidPath: process.execPath,
      env: {},
      launcher: { command: process.execPath, args: ['--version'], fd3: new Uint8Array(1) },
    });
    child.stdout.resume();
    child.stderr.resume();
  } catch {
    // The turn's own spawn is checked and reported as ever.
  }
}
