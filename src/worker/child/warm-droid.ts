/**
 * Worker side of the warm pool: the droid a pre-forked worker spawns before
 * it knows its turn, and the rule for when a turn may use it.
 *
 * A warm droid is a plain `droid exec` process that has not opened a session,
 * started with exactly the environment a cold one gets, in a neutral private
 * folder. droid takes the workspace from the protocol (`initialize_session
 * {cwd}` / `load_session`), not from its process cwd: measured on 0.225.2,
 * tools run in the session's cwd, its AGENTS.md, project skills and custom
 * droids are loaded from there, and droid even moves its own process into
 * that cwd (test/wire/worker/warm-real-droid.test.ts). One thing is read from the
 * process's cwd at start and never again: whether project custom droids
 * exist (the Task tool's description differs). So a warm droid is used only
 * when no `.factory` folder other than the user's own lies in the workspace
 * or above it, nor above the warm droid's folder, and the user-level files
 * droid read at its start have not changed since: then both start alike.
 *
 * Never under a sandbox: bubblewrap's binds are fixed when droid is spawned,
 * before the workspace is known (see docs/ARCHITECTURE.md, "Warm pool").
 */
import { statSync } from 'node:fs';
import { stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { DroidClient } from '../../droid/client.js';
import { factoryDirOf } from '../../shared/host-paths.js';
import type { TurnSpec, WarmDroidSpec } from '../contract/protocol.js';

export interface WarmDroid {
  readonly spec: WarmDroidSpec;
  readonly client: DroidClient;
  /** What droid reads at start, as it was just before the spawn (`startInputs`). */
  readonly inputs: string;
}

export function spawnWarmDroid(spec: WarmDroidSpec): WarmDroid {
  // Taken before the spawn: a change while droid starts makes the turn go cold.
  const inputs = startInputsSync(spec);
  return { spec, inputs, client: DroidClient.spawn({ droidPath: spec.droidPath, env: spec.droidEnv, cwd: spec.dir }) };
}

/**
 * Files droid reads when it starts (its executable, the user-level settings,
 * MCP servers, instructions, custom droids, skills, commands, hooks), by
 * modification time and size. A warm droid is used only if these are still
 * what they were when it was spawned: droid reads its settings once, at start
 * (the follow-up bench toggles cloudSessionSync between turns).
 */
const START_INPUTS = ['settings.json', 'settings.local.json', 'mcp.json', 'AGENTS.md', 'droids', 'skills', 'commands', 'hooks'];

function startInputPaths(spec: WarmDroidSpec): string[] {
  const factory = factoryDirOf(spec.droidEnv);
  return [spec.droidPath, ...START_INPUTS.map((name) => join(factory, name))];
}

function describeStat(path: string, s: { mtimeMs: number; size: number } | null): string {
  return s ? `${path}:${s.mtimeMs}:${s.size}` : `${path}:-`;
}

function startInputsSync(spec: WarmDroidSpec): string {
  return startInputPaths(spec)
    .map((path) => {
      try {
        return describeStat(path, statSync(path));
      } catch {
        return describeStat(path, null);
      }
    })
    .join('|');
}

async function startInputs(spec: WarmDroidSpec): Promise<string> {
  const parts = await Promise.all(
    startInputPaths(spec).map((path) =>
      stat(path).then(
        (s) => describeStat(path, s),
        () => describeStat(path, null),
      ),
    ),
  );
  return parts.join('|');
}

/**
 * Whether a turn may use this warm droid: unconfined turns only, same
 * executable, same environment, and droid still running. Pure.
 */
export function warmFits(warm: WarmDroidSpec, alive: boolean, spec: Pick<TurnSpec, 'sandbox' | 'droidPath' | 'droidEnv'>): boolean {
  return alive && spec.sandbox.mode === 'off' && warm.droidPath === spec.droidPath && sameEnv(warm.droidEnv, spec.droidEnv);
}

/**
 * Project `.factory` folders droid could find from `dir` upwards: every
 * ancestor's `.factory` except droid's own user-level one. Pure.
 */
export function projectFactoryCandidates(dir: string, userFactoryDir: string): string[] {
  const out: string[] = [];
  for (let d = dir; ; d = dirname(d)) {
    const candidate = join(d, '.factory');
    if (candidate !== userFactoryDir) out.push(candidate);
    if (dirname(d) === d) return out;
  }
}

/**
 * Whether a turn in `workspace` starts alike on this warm droid and on a cold
 * one: no project `.factory` in or above the workspace, nor above the warm
 * droid's own folder (see the header). Errors count as "present": in doubt, cold.
 */
export async function startsAlike(warmDroid: WarmDroid, workspace: string): Promise<boolean> {
  const warm = warmDroid.spec;
  if ((await startInputs(warm)) !== warmDroid.inputs) return false;
  const user = factoryDirOf(warm.droidEnv);
  const candidates = [...projectFactoryCandidates(workspace, user), ...projectFactoryCandidates(warm.dir, user)];
  const present = await Promise.all(
    candidates.map((path) =>
      stat(path).then(
        () => true,
        (err: NodeJS.ErrnoException) => err.code !== 'ENOENT' && err.code !== 'ENOTDIR',
      ),
    ),
  );
  return !present.includes(true);
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
