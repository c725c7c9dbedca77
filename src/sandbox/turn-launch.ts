/**
 * How a turn's droid is started, and where its git calls run: bwrap in
 * front of droid with the turn's binds, or droid alone when the operator
 * turned the sandbox off. One function for both sides of the worker: the
 * runner computes it to let a cold worker spawn droid first thing
 * (worker/child/main.ts), and the worker computes it again and uses that
 * early droid only if both agree (worker/child/run-turn.ts).
 */
import type { DroidLaunch } from '../droid/start-droid.js';
import { DroidError } from '../droid/errors.js';
import { factoryDirOf } from '../shared/host-paths.js';
import { confinedEnv } from './bwrap-args.js';
import { assertBwrapExecutable, checkConfinement, networkOf, type SandboxLauncher, type SandboxSpec } from './sandbox.js';
import { listFactoryEntries, runtimeDirOf, turnReads } from './turn-paths.js';

/** What of a turn decides its launch (a TurnSpec has all of it). */
export interface TurnLaunchInput {
  droidPath: string;
  droidEnv: Record<string, string>;
  workspace: string;
  alsoWritable?: readonly string[] | undefined;
  /** Shown read-only besides the workspace: a checkout's borrowed repository objects. */
  alsoReadable?: readonly string[] | undefined;
  autonomy: string;
  sandbox: SandboxSpec;
}

export interface TurnLaunch {
  droid: DroidLaunch;
  /** The same confinement with a read-only workspace, for git (evidence/git.ts); null without a sandbox. */
  git: SandboxLauncher | null;
}

/** Fails `sandbox_unavailable` (nothing started) when the sandbox cannot confine this turn. */
export function turnLaunch(spec: TurnLaunchInput): TurnLaunch {
  const sandbox = spec.sandbox;
  if (sandbox.mode === 'off') return { droid: { droidPath: spec.droidPath, env: spec.droidEnv, cwd: spec.workspace }, git: null };
  assertBwrapExecutable(sandbox.bwrapPath);
  // The runner (controller side) owns the private sessions copy and TMPDIR: it copies back and removes them after the group is gone.
  const turnTmp = sandbox.turnTmp;
  if (!sandbox.sessionsCopy || !turnTmp)
    throw new DroidError('sandbox_unavailable', 'the turn came without its private sessions folder or TMPDIR; nothing was submitted');
  const factoryDir = factoryDirOf(spec.droidEnv);
  const confinement = {
    factoryDir,
    factoryEntries: listFactoryEntries(factoryDir, spec.droidPath),
    turnTmp,
    sessionsCopy: sandbox.sessionsCopy,
    ...(sandbox.snapshotsDir && { snapshotsDir: sandbox.snapshotsDir }),
    runtimeDir: runtimeDirOf(spec.droidEnv),
    hiddenDirs: sandbox.hiddenDirs,
    hiddenFiles: sandbox.hiddenFiles,
    ...turnReads(sandbox.reads, spec.droidPath, spec.workspace, spec.alsoReadable),
    network: networkOf(sandbox),
  };
  // Read-only (Spec mode) turns get a read-only workspace from the OS, not only from droid.
  const workspace = { path: spec.workspace, writable: spec.autonomy !== 'off' };
  const alsoWritable = workspace.writable ? (spec.alsoWritable ?? []) : [];
  const checked = checkConfinement(sandbox.bwrapPath, { ...confinement, workspace, alsoWritable });
  return {
    droid: { droidPath: spec.droidPath, env: confinedEnv(spec.droidEnv), cwd: spec.workspace, launcher: checked.launcher(workspace) },
    // git reads a repository the turn may have rigged (config, attributes): it gets no more rights than the turn.
    // ...and no network at all: it needs none.
    git: checked.launcher({ path: spec.workspace, writable: false }, 'none'),
  };
}

/**
 * Where two launches differ (program, arguments, environment, cwd, fd 3
 * bytes, network), or null when they start the same thing.
 */
export function launchDifference(a: DroidLaunch, b: DroidLaunch): string | null {
  const envOf = (l: DroidLaunch) =>
    Object.entries(l.env)
      .sort(([k1], [k2]) => (k1 < k2 ? -1 : k1 > k2 ? 1 : 0))
      .flat()
      .map(String);
  const bytes = (l: DroidLaunch) => Buffer.from(l.launcher?.fd3 ?? []).toString('base64');
  const lists: Array<[string, readonly string[], readonly string[]]> = [
    [
      'program',
      [a.droidPath, a.cwd ?? '', a.launcher?.command ?? '', String(a.detached ?? false), String(a.launcher?.egress ?? false)],
      [b.droidPath, b.cwd ?? '', b.launcher?.command ?? '', String(b.detached ?? false), String(b.launcher?.egress ?? false)],
    ],
    ['argument', a.launcher?.args ?? [], b.launcher?.args ?? []],
    ['environment', envOf(a), envOf(b)],
    ['fd 3', [bytes(a)], [bytes(b)]],
  ];
  for (const [what, x, y] of lists) {
    const i = x.findIndex((v, k) => v !== y[k]);
    if (i >= 0 || x.length !== y.length)
      return `${what} ${i >= 0 ? i : Math.min(x.length, y.length)}: ${JSON.stringify(x[i] ?? null).slice(0, 120)} vs ${JSON.stringify(y[i] ?? y[x.length] ?? null).slice(0, 120)}`;
  }
  return null;
}
