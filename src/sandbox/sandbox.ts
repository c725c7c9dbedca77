/**
 * The operating-system confinement of every droid process (Linux, bubblewrap):
 * each turn's, and every short-lived droid the controller or an operator
 * command starts (the catalog read, doctor, verify-route).
 *
 * Autonomy levels are droid policy, not a boundary: at `high` droid writes
 * anywhere its user can, and at `low`/`medium` it trusts the risk level the
 * model declares (measured, docs/PROTOCOL-NOTES.md). Every turn is treated as hostile,
 * so droid runs in a mount namespace where everything is read-only except
 * the turn's workspace (writer turns only), a private TMPDIR and what droid
 * must write under its own home, measured (docs/PROTOCOL-NOTES.md). droid's
 * home (`~/.factory`) is a per-turn tmpfs holding read-only binds of every
 * entry the host's has (settings, `mcp.json`, hooks, custom droids, skills,
 * commands, plugins, auth): a turn cannot change what a later droid does,
 * while what droid creates there (first-start files, locks, caches) lands
 * in the tmpfs and is gone with the turn. Apart from that:
 * - `sessions/`: a private per-turn copy holding only this session's files
 *   (session-copy.ts); the controller copies back only those afterwards, so
 *   no turn can read or rewrite another session's transcript;
 * - droid's caches and scratch folders (`cache`, `temp`, `snapshots`, `bin`
 *   where droid extracts ripgrep, `logs`) are not bound: droid makes them
 *   afresh in the tmpfs.
 * The state directory and the HTTP token file are hidden (an empty
 * read-only tmpfs, and /dev/null).
 *
 * Reads (issue 37): the homes, every approved root, and the host's data
 * folders (READ_HIDDEN) are covered by empty tmpfs; the turn's workspace,
 * droid's home, git's identity and the operator's `sandboxReadable` list are
 * shown again, read-only but the workspace.
 *
 * Network (issue 37): droid runs in its own network namespace whose only
 * way out is a proxy that allows the model endpoints and the operator's
 * `network.allow` (egress/); `network: {mode: "open"}` keeps the host's.
 * THREAT-MODEL.md says what a turn can still reach.
 *
 * This file is what the rest of the controller uses: the spec a worker gets
 * and the launcher that runs a program confined. The parts: bwrap-args.ts
 * (the pure argument builder, with each flag's reason, and the environment),
 * turn-paths.ts (the host paths a sandbox is built from: the private temp
 * root, a turn's TMPDIR, droid's home), seccomp.ts (the filter), probe.ts
 * (the trial run at start-up), session-copy.ts (a turn's sessions folder).
 */
import { accessSync, constants, existsSync, lstatSync, realpathSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { DroidError } from '../droid/errors.js';
import { bwrapArgs, type Confinement } from './bwrap-args.js';
import { isAtOrBelow, overlaps } from '../util/paths.js';
import { hostSeccompFilter } from './seccomp.js';
import { egressLaunchOfThisServer, type EgressLaunch } from './egress/netns.js';
import { userInfo } from 'node:os';

/** A droid's network: the host's, or only its proxy (egress/), with the operator's list unless the session asked for model-only. */
export type NetworkSpec = { mode: 'open' } | ({ mode: 'proxy'; allow: string[]; modelOnly?: boolean } & EgressLaunch);

/** What a sandboxed droid reads: `hidden` covered, `readable` in them shown again (read-only). */
export interface ReadSpec {
  hidden: string[];
  readable: string[];
}

/**
 * The host's folders no turn needs (issue 37): other users' homes, services'
 * data and logs, mounts, runtime sockets, systemd's and containers' secrets. The service user's home and the
 * approved roots are added per host (hostReads).
 */
const READ_HIDDEN: readonly string[] = [
  '/root',
  '/home',
  '/srv',
  '/mnt',
  '/media',
  '/run/user',
  '/run/credentials',
  '/run/secrets',
  '/var/lib',
  '/var/log',
  '/var/mail',
  '/var/tmp',
];

/**
 * git's identity: what the service user's home shows by default. Not all of
 * `~/.config/git`: git-credential-store keeps `credentials` there.
 */
const HOME_READABLE: readonly string[] = ['.gitconfig', '.config/git/config', '.config/git/ignore', '.config/git/attributes'];

/** The spec of every sandbox this server starts, from its config: hidden secrets, reads, and network. */
export function hostSandboxSpec(
  bwrapPath: string,
  config: {
    stateDirectory: string;
    tokenFile?: string | null | undefined;
    approvedDirectories: readonly string[];
    network: { mode: 'proxy' | 'open'; allow: readonly string[] };
    sandboxReadable: readonly string[];
  },
  droidEnv: Readonly<Record<string, string | undefined>>,
): SandboxSpec {
  const egress = egressLaunchOfThisServer();
  const network: NetworkSpec = config.network.mode === 'open' ? { mode: 'open' } : { mode: 'proxy', allow: [...config.network.allow], ...egress };
  const homes = [userInfo().homedir, ...(droidEnv.HOME ? [droidEnv.HOME] : [])];
  const reads = hostReads(homes, config.approvedDirectories, config.sandboxReadable, [egress.nodePath, egress.helperPath]);
  return sandboxSpecFor(bwrapPath, config.stateDirectory, config.tokenFile, { network, reads });
}

/** What every sandbox on this host hides and shows. Pure. */
function hostReads(homes: readonly string[], approvedRoots: readonly string[], readable: readonly string[], programs: readonly string[]): ReadSpec {
  const uniqueHomes = [...new Set(homes.filter((h) => h.startsWith('/') && h !== '/'))];
  return {
    hidden: [...READ_HIDDEN, ...uniqueHomes, ...approvedRoots],
    readable: [...uniqueHomes.flatMap((home) => HOME_READABLE.map((name) => join(home, name))), ...readable, ...programs],
  };
}

/** What the controller tells a worker about confinement. */
export type SandboxSpec =
  | { mode: 'off' }
  | {
      mode: 'bwrap';
      bwrapPath: string;
      /** Absent: the host's network (specs made before issue 37, tests of other guards); the controller always states it. */
      network?: NetworkSpec;
      /** Absent: all of `/` readable; the controller always states it. */
      reads?: ReadSpec;
      /** Directories replaced by an empty, read-only tmpfs inside the sandbox. */
      hiddenDirs: string[];
      /** Files replaced by /dev/null inside the sandbox. */
      hiddenFiles: string[];
      /** The private copy of this session's droid files, made by the controller's side of the worker (runner.ts). */
      sessionsCopy?: string;
      /** The turn's private TMPDIR, made and removed by the runner as well. */
      turnTmp?: string;
      /** The session's own folder of droid's file snapshots (issue 40), made by the runner and kept with the session. */
      snapshotsDir?: string;
    };

/** The sandbox of every droid this controller starts: the state directory and the token file are hidden from all of them. Pure. */
export function sandboxSpecFor(
  bwrapPath: string,
  stateDirectory: string,
  tokenFile: string | null | undefined,
  confine?: { network: NetworkSpec; reads: ReadSpec },
): SandboxSpec {
  return {
    mode: 'bwrap',
    bwrapPath,
    hiddenDirs: [stateDirectory],
    hiddenFiles: tokenFile ? [tokenFile] : [],
    ...(confine && { network: confine.network, reads: confine.reads }),
  };
}

export const SANDBOX_ACTION =
  'Install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap) and make sure it can create user namespaces, or set "sandbox": "off" in the config to run turns unconfined.';

/** A program run inside the sandbox: `command ...args <target> <targetArgs>`, with the seccomp program on fd 3. */
export interface SandboxLauncher {
  command: string;
  args: readonly string[];
  /** Bytes the launched program reads from fd 3 (bwrap: the seccomp filter). */
  fd3: Uint8Array;
  /** The program hands back its proxy's listener (egress/netns.ts) over an IPC channel on fd 4. */
  egress?: true;
}

/** The network confinement a spec asks for: the proxy, or the host's. */
export function networkOf(spec: { network?: NetworkSpec }): Confinement['network'] {
  const network = spec.network;
  return network?.mode === 'proxy' ? { nodePath: network.nodePath, helperPath: network.helperPath } : 'host';
}

/** bwrap with these binds, and this host's seccomp filter; `sandbox_unavailable` when either is missing. */
export function sandboxLauncher(bwrapPath: string, confinement: Confinement): SandboxLauncher {
  return checkConfinement(bwrapPath, confinement).launcher(confinement.workspace);
}

/**
 * The host checks of a confinement, made once: bwrap runs, the workspace
 * overlaps none of the private folders, a filter exists, which hidden paths
 * exist. `launcher` then builds the bwrap line for a workspace bind (a turn's
 * own, or the read-only one its git calls get) without checking again.
 */
export function checkConfinement(
  bwrapPath: string,
  confinement: Confinement,
): { launcher(workspace: Confinement['workspace'], network?: Confinement['network']): SandboxLauncher } {
  assertBwrapExecutable(bwrapPath);
  // Fail closed: a writable workspace that holds (or sits in) droid's home or the per-turn folders would undo their binds.
  const workspace = confinement.workspace?.path;
  const real = (path: string) => (existsSync(path) ? realpathSync(path) : path);
  const guarded = [confinement.factoryDir, dirname(confinement.turnTmp), ...(confinement.sessionsCopy ? [confinement.sessionsCopy] : [])].map(real);
  const writable = [...(workspace ? [workspace] : []), ...(confinement.alsoWritable ?? [])];
  if (writable.some((w) => guarded.some((path) => overlaps(path, w)))) {
    throw new DroidError(
      'sandbox_unavailable',
      `the workspace ${writable.join(', ')} overlaps droid's home or the sandbox's private folders; nothing was started. Approve project folders only`,
    );
  }
  // A link there would be bound at its target (a checkout's .git swapped for the repository's): each must be a real directory, itself.
  for (const path of confinement.alsoWritable ?? []) {
    const info = existsSync(path) ? lstatSync(path) : null;
    if (!info?.isDirectory() || realpathSync(path) !== path) {
      throw new DroidError(
        'sandbox_unavailable',
        `${path}, which this turn must write besides its workspace, is not a real directory (a link, a file, missing or under a link); nothing was started. Inspect it before continuing the session`,
      );
    }
  }
  const filter = hostSeccompFilter();
  if (!filter) throw new DroidError('sandbox_unavailable', `no seccomp filter exists for this architecture (${process.arch}). ${SANDBOX_ACTION}`);
  // A secret that does not exist yet (doctor before the first start) has nothing to hide, and bwrap mounts only over existing paths;
  // placement (config/placement.ts) keeps both out of every folder a turn can write, so none can appear there during a turn.
  const existing = (paths: readonly string[]) => paths.filter((path) => existsSync(path));
  // droid's real sessions folder, when it is a link elsewhere, is hidden at its target too (other sessions' transcripts).
  const sessions = join(confinement.factoryDir, 'sessions');
  const sessionsTarget = existsSync(sessions) ? realpathSync(sessions) : sessions;
  const hiddenDirs = [
    ...confinement.hiddenDirs,
    ...(sessionsTarget !== sessions && !isAtOrBelow(sessionsTarget, confinement.factoryDir) ? [sessionsTarget] : []),
  ];
  const hidden = {
    hiddenDirs: existing(hiddenDirs),
    hiddenFiles: existing(confinement.hiddenFiles),
    ...(confinement.reads && { reads: { hidden: existingDirs(confinement.reads.hidden), readable: existing(confinement.reads.readable) } }),
  };
  return {
    launcher: (bind, network = confinement.network) => ({
      command: bwrapPath,
      args: bwrapArgs({ ...confinement, ...hidden, workspace: bind, ...(network && { network }) }),
      fd3: filter,
      ...(typeof network === 'object' && { egress: true }),
    }),
  };
}

/** The directories that exist, at their real paths (a `/home` that links elsewhere is covered where it leads). */
function existingDirs(paths: readonly string[]): string[] {
  const out = new Set<string>();
  for (const path of paths) {
    try {
      if (statSync(path).isDirectory()) out.add(realpathSync(path));
    } catch {
      // Nothing there to hide.
    }
  }
  return [...out];
}

/** Fails before anything starts when the configured bwrap cannot be run. */
export function assertBwrapExecutable(bwrapPath: string): void {
  try {
    if (!statSync(bwrapPath).isFile()) throw new Error('not a file');
    accessSync(bwrapPath, constants.X_OK);
  } catch {
    throw new DroidError('sandbox_unavailable', `the sandbox program (bubblewrap) is not an executable file at ${bwrapPath}. ${SANDBOX_ACTION}`);
  }
}
