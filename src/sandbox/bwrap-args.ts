/**
 * The bubblewrap arguments of a sandbox (sandbox.ts says what it confines)
 * and the environment droid gets in it. Pure.
 *
 * Each flag is there for a measured reason:
 * - `--cap-drop ALL`: without it a root droid remounted `/` read-write;
 * - `--ro-bind /proc/sys /proc/sys`: without it a host kernel setting changed;
 * - `--remount-ro /proc`: `/proc/<droid>/mem` is writable to droid's children
 *   otherwise (same user); the read-only mount refuses write opens of /proc's
 *   own files (reopening `/proc/<pid>/fd/N` follows the target's mount: droid's
 *   stdio are sockets, ENXIO);
 * - `--seccomp` (seccomp.ts) and `--disable-userns`: no ptrace, no taking
 *   droid's file descriptors, no new Unix sockets to the host's daemons;
 * - `/dev` and `/dev/shm` read-only, an empty read-only tmpfs over the user's
 *   runtime directory, and no socket addresses in droid's environment
 *   (confinedEnv);
 * - an empty read-only tmpfs over the private temp root (turn-paths.ts) but
 *   this turn's own TMPDIR: same user, so modes do not keep turns apart;
 * - a private TMPDIR, not `--tmpfs /tmp`: writes under `/tmp` must fail, not
 *   "succeed" into a throwaway mount;
 * - `--die-with-parent` and the PID namespace: when the worker's group is
 *   killed, every Execute child (droid starts each in its own session) dies
 *   with the namespace;
 * - never `--new-session`: it would take droid out of the worker's group;
 * - `--unshare-net` (issue 37): droid's only way out is its turn's proxy,
 *   reached on the namespace's loopback (egress/netns-listener.cts);
 * - empty tmpfs over the homes, the other approved roots and the host's
 *   data folders (reads.ts lists them): a turn reads what its work needs.
 * Binds come after `--ro-bind / /` and name real, existing paths.
 */
import { dirname, join } from 'node:path';
import { FACTORY_UNBOUND } from '../shared/host-paths.js';
import { isAtOrBelow } from '../util/paths.js';
import { PROXY_ENV, unsharedNetCommand, type EgressLaunch } from './egress/netns.js';

/** The per-turn tmpfs of droid's home is capped: droid's ripgrep is ~5 MB; a turn cannot fill the host's memory through it. */
const FACTORY_TMPFS_BYTES = 256 * 1024 * 1024;

export interface Confinement {
  /** The turn's workspace; null for a droid that opens no session (catalog read). */
  workspace: { path: string; writable: boolean } | null;
  /** Writable besides the workspace: a checkout session's git folder when its workspace is a subfolder (issue 21). */
  alsoWritable?: readonly string[];
  /** droid's own `.factory` folder. */
  factoryDir: string;
  /** Names of its host entries shown read-only (turn-paths.ts listFactoryEntries); the rest of it is a per-turn tmpfs. */
  factoryEntries: readonly string[];
  /** The private copy droid sees as `<factoryDir>/sessions`; null: no sessions at all (catalog reads). */
  sessionsCopy: string | null;
  /**
   * The session's own folder droid sees as `<factoryDir>/snapshots` (issue 40):
   * droid's copies of the files its tools changed, which a later turn's rewind
   * puts back; absent: a throwaway one in the tmpfs.
   */
  snapshotsDir?: string;
  /** Private per-turn TMPDIR; also the working directory when there is no workspace. */
  turnTmp: string;
  /** The service user's runtime directory (sockets of its daemons), covered when it exists. */
  runtimeDir: string | null;
  hiddenDirs: readonly string[];
  hiddenFiles: readonly string[];
  /**
   * What the sandboxed program may read besides the system: absent, all of `/`
   * (read-only); else `hidden` is covered by empty read-only tmpfs and only
   * `readable` in them (and the binds above) shown again, read-only.
   */
  reads?: { hidden: readonly string[]; readable: readonly string[] };
  /** absent or 'host': the host's network; 'none': loopback only; else only the proxy the launcher's helper hands out. */
  network?: 'host' | 'none' | EgressLaunch;
}

/** The file descriptor bwrap reads the seccomp program from (the spawner hands it over: util/child-fd3.ts). */
const SECCOMP_FD = 3;

/** The bwrap arguments before the command. Pure. */
export function bwrapArgs(c: Confinement): string[] {
  const network = c.network ?? 'host';
  const args = [
    '--die-with-parent',
    '--unshare-user',
    '--unshare-pid',
    '--unshare-ipc',
    '--unshare-uts',
    ...(network === 'host' ? [] : ['--unshare-net']),
    '--disable-userns',
    '--cap-drop',
    'ALL',
    '--ro-bind',
    '/',
    '/',
    '--dev',
    '/dev',
    '--tmpfs',
    '/dev/shm',
    '--remount-ro',
    '/dev/shm',
    // A write under /dev must fail, not "succeed" into the throwaway tmpfs (device nodes still work).
    '--remount-ro',
    '/dev',
    '--proc',
    '/proc',
    '--ro-bind',
    '/proc/sys',
    '/proc/sys',
    '--remount-ro',
    '/proc',
  ];
  // Reads first: everything bound below may land inside a covered folder, and is bound back on top of it.
  const covered = c.reads ? coveredDirs(c.reads.hidden, c.workspace?.path ?? null) : [];
  for (const dir of covered) args.push('--tmpfs', dir);
  // Shown again before the turn's own binds, so none of them (droid's home tmpfs, the sessions copy, the workspace) can be
  // covered by a shown folder; a path that would uncover a covered folder whole (a home) is never shown.
  const hidden = c.reads?.hidden ?? [];
  for (const path of c.reads?.readable ?? []) {
    if (covered.some((dir) => isAtOrBelow(path, dir)) && !hidden.some((dir) => isAtOrBelow(dir, path))) args.push('--ro-bind', path, path);
  }
  // Other turns' TMPDIRs and sessions copies sit beside this one: covered, and only ours bound back.
  const tmpRoot = dirname(c.turnTmp);
  args.push('--tmpfs', tmpRoot, '--bind', c.turnTmp, c.turnTmp, '--remount-ro', tmpRoot, '--setenv', 'TMPDIR', c.turnTmp);
  if (c.workspace) args.push(c.workspace.writable ? '--bind' : '--ro-bind', c.workspace.path, c.workspace.path);
  for (const path of c.alsoWritable ?? []) args.push('--bind', path, path);
  // droid's home: a throwaway tmpfs, its host entries read-only on top of it.
  args.push('--size', String(FACTORY_TMPFS_BYTES), '--tmpfs', c.factoryDir);
  for (const name of c.factoryEntries) args.push('--ro-bind', join(c.factoryDir, name), join(c.factoryDir, name));
  if (c.sessionsCopy) args.push('--bind', c.sessionsCopy, join(c.factoryDir, 'sessions'));
  if (c.snapshotsDir) args.push('--bind', c.snapshotsDir, join(c.factoryDir, 'snapshots'));
  // A runtime directory holding a bound path (an odd host) stays: covering it would hide the turn's own folders;
  // its sockets are still refused by the seccomp filter.
  const bound = [c.turnTmp, c.factoryDir, ...(c.workspace ? [c.workspace.path] : []), ...(c.alsoWritable ?? [])];
  const runtimeDir = c.runtimeDir;
  if (runtimeDir && !bound.some((path) => isAtOrBelow(path, runtimeDir))) args.push('--tmpfs', runtimeDir, '--remount-ro', runtimeDir);
  // Last, so a secret inside a writable bind is still hidden.
  // Read-only too: a write there must fail, not "succeed" into a throwaway mount.
  for (const dir of c.hiddenDirs) args.push('--tmpfs', dir, '--remount-ro', dir);
  for (const file of c.hiddenFiles) args.push('--ro-bind', '/dev/null', file);
  // Read-only once everything inside is in place: a write there fails instead of landing in the throwaway tmpfs.
  for (const dir of covered) args.push('--remount-ro', dir);
  // A workspace bound inside a covered folder is another filesystem than the tmpfs holding its repository's .git:
  // git stops its search for the repository there unless told it may cross.
  if (covered.length > 0) args.push('--setenv', 'GIT_DISCOVERY_ACROSS_FILESYSTEM', '1');
  if (typeof network === 'object') {
    for (const [key, value] of Object.entries(PROXY_ENV)) args.push('--setenv', key, value);
    // A proxy bypass list would send those hosts nowhere (there is no other route) or around the allowlist.
    args.push('--unsetenv', 'NO_PROXY', '--unsetenv', 'no_proxy');
  }
  args.push('--seccomp', String(SECCOMP_FD), '--chdir', c.workspace?.path ?? c.turnTmp, '--');
  if (typeof network === 'object') args.push(...unsharedNetCommand(network));
  return args;
}

/**
 * The folders to cover, outermost only: one inside another is covered with
 * it, and one inside the workspace is the workspace's to show. Pure.
 */
function coveredDirs(hidden: readonly string[], workspace: string | null): string[] {
  const unique = [...new Set(hidden)].filter((dir) => dir !== '/' && !(workspace !== null && isAtOrBelow(dir, workspace) && dir !== workspace));
  return unique.filter((dir) => !unique.some((other) => other !== dir && isAtOrBelow(dir, other))).sort();
}

/** Which entries of droid's home a sandboxed droid sees (read-only): all but FACTORY_UNBOUND, plus the one holding droid itself. Pure. */
export function shownFactoryEntries(names: readonly string[], factoryDir: string, droidPath?: string): string[] {
  const holdsDroid = droidPath !== undefined && isAtOrBelow(droidPath, factoryDir) ? droidPath.slice(factoryDir.length + 1).split('/')[0] : undefined;
  return names.filter((name) => name === holdsDroid || !FACTORY_UNBOUND.includes(name)).sort();
}

/**
 * Environment variables that name a way to a daemon of the host (agents,
 * buses, terminal multiplexers, displays, a unix Docker socket, the runtime
 * directory): droid's environment goes without them under the sandbox.
 */
const SOCKET_VARS = [
  'SSH_AUTH_SOCK',
  'SSH_AGENT_PID',
  'GPG_AGENT_INFO',
  'DBUS_SESSION_BUS_ADDRESS',
  'DBUS_SYSTEM_BUS_ADDRESS',
  'TMUX',
  'TMUX_PANE',
  'STY',
  'DISPLAY',
  'WAYLAND_DISPLAY',
  'WAYLAND_SOCKET',
  'XDG_RUNTIME_DIR',
  'XAUTHORITY',
  'NOTIFY_SOCKET',
  'LISTEN_FDS',
  'LISTEN_PID',
  'LISTEN_FDNAMES',
];

/** droid's environment under the sandbox. Pure. */
export function confinedEnv(env: Readonly<Record<string, string>>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(env)) {
    if (SOCKET_VARS.includes(key)) continue;
    if (key === 'DOCKER_HOST' && !/^(tcp|ssh|https?):\/\//i.test(value)) continue;
    out[key] = value;
  }
  return out;
}
