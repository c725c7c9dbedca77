/**
 * Where droid and the sandbox keep things on this host, as facts both the
 * config's placement rules and the sandbox rely on: one definition each, so
 * a check at start-up and a bind at turn start cannot disagree. Pure.
 */
import { homedir } from 'node:os';
import { join } from 'node:path';

/**
 * Entries of droid's home never shown to a sandboxed droid: its scratch
 * (measured writes, see sandbox/sandbox.ts), made afresh in the per-turn
 * tmpfs, and `sessions`, which a turn sees only as its private copy.
 */
export const FACTORY_UNBOUND: readonly string[] = ['cache', 'temp', 'snapshots', 'bin', 'logs', 'sessions'];

/** droid's own folder, as droid finds it: FACTORY_HOME_OVERRIDE, else HOME. */
export function factoryDirOf(env: Readonly<Record<string, string | undefined>>): string {
  return join(env.FACTORY_HOME_OVERRIDE || env.HOME || homedir(), '.factory');
}

/** This user's id (0 where the platform has none). */
export function currentUid(): number {
  return typeof process.getuid === 'function' ? process.getuid() : 0;
}

/** The one folder every per-turn folder of `uid` lives in, below the system temp folder `tmpDir`. */
export function privateTmpRootIn(tmpDir: string, uid: number): string {
  return join(tmpDir, `droid-mcp-${uid}`);
}
