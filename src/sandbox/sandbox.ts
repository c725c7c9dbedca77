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
 * - an empty read-only tmpfs over the private temp root (privateTmpRoot) but
 *   this turn's own TMPDIR: same user, so modes do not keep turns apart;
 * - a private TMPDIR, not `--tmpfs /tmp`: writes under `/tmp` must fail, not
 *   "succeed" into a throwaway mount;
 * - `--die-with-parent` and the PID namespace: when the worker's group is
 *   killed, every Execute child (droid starts each in its own session) dies
 *   with the namespace;
 * - never `--new-session`: it would take droid out of the worker's group.
 * Binds come after `--ro-bind / /` and name real, existing paths.
 *
 * The network stays the host's: the model API needs it (THREAT-MODEL.md
 * says what a turn can still reach).
 */
import { spawn, type ChildProcessByStdio } from 'node:child_process';
import type { Readable } from 'node:stream';
import { accessSync, constants, existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, realpathSync, rmSync, statSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { DroidError } from '../droid/errors.js';
import { handFd3 } from '../util/child-fd3.js';
import { removeTree } from '../util/remove-tree.js';
import { EPERM, hostSeccompFilter, seccompArchOf, SYSCALLS } from './seccomp.js';

/** What the controller tells a worker about confinement. */
export type SandboxSpec =
  | { mode: 'off' }
  | {
      mode: 'bwrap';
      bwrapPath: string;
      /** Directories replaced by an empty, read-only tmpfs inside the sandbox. */
      hiddenDirs: string[];
      /** Files replaced by /dev/null inside the sandbox. */
      hiddenFiles: string[];
      /** The private copy of this session's droid files, made by the controller's side of the worker (runner.ts). */
      sessionsCopy?: string;
      /** The turn's private TMPDIR, made and removed by the runner as well. */
      turnTmp?: string;
    };

/** The sandbox of every droid this controller starts: the state directory and the token file are hidden from all of them. Pure. */
export function sandboxSpecFor(bwrapPath: string, stateDirectory: string, tokenFile: string | null | undefined): SandboxSpec {
  return { mode: 'bwrap', bwrapPath, hiddenDirs: [stateDirectory], hiddenFiles: tokenFile ? [tokenFile] : [] };
}

/**
 * Entries of droid's home never shown to a sandboxed droid: its scratch
 * (measured writes, see the header), made afresh in the per-turn tmpfs, and
 * `sessions`, which a turn sees only as its private copy.
 */
export const FACTORY_UNBOUND = ['cache', 'temp', 'snapshots', 'bin', 'logs', 'sessions'] as const;
/** The per-turn tmpfs of droid's home is capped: droid's ripgrep is ~5 MB; a turn cannot fill the host's memory through it. */
const FACTORY_TMPFS_BYTES = 256 * 1024 * 1024;

export interface Confinement {
  /** The turn's workspace; null for a droid that opens no session (catalog read). */
  workspace: { path: string; writable: boolean } | null;
  /** droid's own `.factory` folder. */
  factoryDir: string;
  /** Names of its host entries shown read-only (listFactoryEntries); the rest of it is a per-turn tmpfs. */
  factoryEntries: readonly string[];
  /** The private copy droid sees as `<factoryDir>/sessions`; null: no sessions at all (catalog reads). */
  sessionsCopy: string | null;
  /** Private per-turn TMPDIR; also the working directory when there is no workspace. */
  turnTmp: string;
  /** The service user's runtime directory (sockets of its daemons), covered when it exists. */
  runtimeDir: string | null;
  hiddenDirs: readonly string[];
  hiddenFiles: readonly string[];
}

/** The file descriptor bwrap reads the seccomp program from (the spawner hands it over: util/child-fd3.ts). */
export const SECCOMP_FD = 3;

export const SANDBOX_ACTION = 'Install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap) and make sure it can create user namespaces, or set "sandbox": "off" in the config to run turns unconfined.';

/** The bwrap arguments before the command. Pure. */
export function bwrapArgs(c: Confinement): string[] {
  const args = [
    '--die-with-parent',
    '--unshare-user',
    '--unshare-pid',
    '--unshare-ipc',
    '--unshare-uts',
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
  // Other turns' TMPDIRs and sessions copies sit beside this one: covered, and only ours bound back.
  const tmpRoot = dirname(c.turnTmp);
  args.push('--tmpfs', tmpRoot, '--bind', c.turnTmp, c.turnTmp, '--remount-ro', tmpRoot, '--setenv', 'TMPDIR', c.turnTmp);
  if (c.workspace) args.push(c.workspace.writable ? '--bind' : '--ro-bind', c.workspace.path, c.workspace.path);
  // droid's home: a throwaway tmpfs, its host entries read-only on top of it.
  args.push('--size', String(FACTORY_TMPFS_BYTES), '--tmpfs', c.factoryDir);
  for (const name of c.factoryEntries) args.push('--ro-bind', join(c.factoryDir, name), join(c.factoryDir, name));
  if (c.sessionsCopy) args.push('--bind', c.sessionsCopy, join(c.factoryDir, 'sessions'));
  // A runtime directory holding a bound path (an odd host) stays: covering it would hide the turn's own folders;
  // its sockets are still refused by the seccomp filter.
  const bound = [c.turnTmp, c.factoryDir, ...(c.workspace ? [c.workspace.path] : [])];
  const runtimeDir = c.runtimeDir;
  if (runtimeDir && !bound.some((path) => isAtOrBelow(path, runtimeDir))) args.push('--tmpfs', runtimeDir, '--remount-ro', runtimeDir);
  // Last, so a secret inside a writable bind is still hidden.
  // Read-only too: a write there must fail, not "succeed" into a throwaway mount.
  for (const dir of c.hiddenDirs) args.push('--tmpfs', dir, '--remount-ro', dir);
  for (const file of c.hiddenFiles) args.push('--ro-bind', '/dev/null', file);
  args.push('--seccomp', String(SECCOMP_FD), '--chdir', c.workspace?.path ?? c.turnTmp, '--');
  return args;
}

function isAtOrBelow(path: string, dir: string): boolean {
  return path === dir || path.startsWith(dir.endsWith('/') ? dir : `${dir}/`);
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

/** The service user's runtime directory (XDG_RUNTIME_DIR, else /run/user/<uid>), when it exists. */
export function runtimeDirOf(env: Readonly<Record<string, string>>): string | null {
  const uid = typeof process.getuid === 'function' ? process.getuid() : null;
  const candidates = [env.XDG_RUNTIME_DIR, uid === null ? undefined : `/run/user/${uid}`];
  for (const dir of candidates) {
    if (dir && dir.startsWith('/') && isDirectory(dir)) return dir;
  }
  return null;
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

/** A program run inside the sandbox: `command ...args <target> <targetArgs>`, with the seccomp program on fd 3. */
export interface SandboxLauncher {
  command: string;
  args: readonly string[];
  /** Bytes the launched program reads from fd 3 (bwrap: the seccomp filter). */
  fd3: Uint8Array;
}

/** bwrap with these binds, and this host's seccomp filter; `sandbox_unavailable` when either is missing. */
export function sandboxLauncher(bwrapPath: string, confinement: Confinement): SandboxLauncher {
  assertBwrapExecutable(bwrapPath);
  // Fail closed: a writable workspace that holds (or sits in) droid's home or the per-turn folders would undo their binds.
  const workspace = confinement.workspace?.path;
  const real = (path: string) => (existsSync(path) ? realpathSync(path) : path);
  const guarded = [confinement.factoryDir, dirname(confinement.turnTmp), ...(confinement.sessionsCopy ? [confinement.sessionsCopy] : [])].map(real);
  if (workspace && guarded.some((path) => isAtOrBelow(path, workspace) || isAtOrBelow(workspace, path))) {
    throw new DroidError('sandbox_unavailable', `the workspace ${workspace} overlaps droid's home or the sandbox's private folders; nothing was started. Approve project folders only`);
  }
  const filter = hostSeccompFilter();
  if (!filter) throw new DroidError('sandbox_unavailable', `no seccomp filter exists for this architecture (${process.arch}). ${SANDBOX_ACTION}`);
  // A secret that does not exist yet (doctor before the first start) has nothing to hide, and bwrap mounts only over existing paths;
  // placement (config/placement.ts) keeps both out of every folder a turn can write, so none can appear there during a turn.
  const existing = (paths: readonly string[]) => paths.filter((path) => existsSync(path));
  // droid's real sessions folder, when it is a link elsewhere, is hidden at its target too (other sessions' transcripts).
  const sessions = join(confinement.factoryDir, 'sessions');
  const sessionsTarget = existsSync(sessions) ? realpathSync(sessions) : sessions;
  const hiddenDirs = [...confinement.hiddenDirs, ...(sessionsTarget !== sessions && !isAtOrBelow(sessionsTarget, confinement.factoryDir) ? [sessionsTarget] : [])];
  const hidden = { hiddenDirs: existing(hiddenDirs), hiddenFiles: existing(confinement.hiddenFiles) };
  return { command: bwrapPath, args: bwrapArgs({ ...confinement, ...hidden }), fd3: filter };
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

/** droid's own folder, as droid finds it: FACTORY_HOME_OVERRIDE, else HOME. */
export function factoryDirOf(env: Readonly<Record<string, string>>): string {
  return join(env.FACTORY_HOME_OVERRIDE || env.HOME || homedir(), '.factory');
}

/** Which entries of droid's home a sandboxed droid sees (read-only): all but FACTORY_UNBOUND, plus the one holding droid itself. Pure. */
export function shownFactoryEntries(names: readonly string[], factoryDir: string, droidPath?: string): string[] {
  const holdsDroid = droidPath !== undefined && isAtOrBelow(droidPath, factoryDir) ? droidPath.slice(factoryDir.length + 1).split('/')[0] : undefined;
  return names.filter((name) => name === holdsDroid || !(FACTORY_UNBOUND as readonly string[]).includes(name)).sort();
}

/**
 * The one folder every per-turn folder of this user lives in (TMPDIRs,
 * private sessions copies): `<tmpdir>/droid-mcp-<uid>`, a real directory of
 * ours with mode 700. Every sandbox covers it with an empty read-only tmpfs
 * and binds back only its own TMPDIR, so no turn sees another turn's files
 * (same user: modes do not separate them). Refused when someone else made it.
 */
export function privateTmpRoot(): string {
  const uid = typeof process.getuid === 'function' ? process.getuid() : 0;
  const root = join(tmpdir(), `droid-mcp-${uid}`);
  try {
    mkdirSync(root, { mode: 0o700 });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  const info = lstatSync(root);
  if (!info.isDirectory() || info.uid !== uid || (info.mode & 0o077) !== 0) {
    throw new DroidError('sandbox_unavailable', `${root} is not a private directory of this user (a symlink, another owner or a shared mode); remove it and retry`);
  }
  return root;
}

/** The entries of droid's home a sandbox shows, listed now (bwrap binds only existing paths); the home is made when missing. */
export function listFactoryEntries(factoryDir: string, droidPath?: string): string[] {
  mkdirSync(factoryDir, { recursive: true, mode: 0o700 });
  return shownFactoryEntries(readdirSync(factoryDir), factoryDir, droidPath);
}

/** A turn's private TMPDIR, `turn-<name>` in the private temp root (a random name when none is given); `dispose` never rejects. */
export function makeTurnTmp(name?: string): { turnTmp: string; dispose(): Promise<string | null> } {
  const root = privateTmpRoot();
  let turnTmp: string;
  if (name === undefined) turnTmp = mkdtempSync(join(root, 'turn-'));
  else {
    turnTmp = join(root, `turn-${name}`);
    mkdirSync(turnTmp, { mode: 0o700 });
  }
  return { turnTmp, dispose: () => removeTree(turnTmp) };
}

/**
 * What a short-lived sandbox needs from the host: a private TMPDIR, and the
 * entries of droid's home to show. `droidPath` inside droid's home keeps
 * its entry visible.
 */
export function prepareTurnPaths(factoryDir: string, droidPath?: string): { turnTmp: string; factoryEntries: string[]; dispose(): Promise<string | null> } {
  const factoryEntries = listFactoryEntries(factoryDir, droidPath);
  return { ...makeTurnTmp(), factoryEntries };
}

export interface SandboxHealth {
  ok: boolean;
  /** Why it is unusable, when it is. */
  detail: string | null;
}

const PROBE_TIMEOUT_MS = 5_000;
/** perl-base is essential on Debian: its `syscall` reaches any call by number, which Node cannot. */
const PERL = '/usr/bin/perl';
const EBADF = 9;

/**
 * What the trial run's child does under the turn's flags: call
 * `pidfd_getfd` with a bad descriptor (EBADF unfiltered, EPERM when the
 * filter holds), `ptrace(PTRACE_SEIZE)` on its parent (SEIZE, not ATTACH:
 * an unfiltered success must not leave the parent stopped), and open an
 * `AF_UNIX` socket; it prints the errno of each.
 */
function probeScript(ptrace: number, pidfdGetfd: number): string {
  return [
    'my $pid = fork();',
    'if ($pid == 0) {',
    `  syscall(${pidfdGetfd}, -1, 0, 0); my $g = $! + 0;`,
    `  syscall(${ptrace}, 0x4206, getppid(), 0, 0); my $p = $! + 0;`,
    '  my $u = socket(my $s, 1, 1, 0) ? 0 : $! + 0;',
    '  print "getfd=$g ptrace=$p unix=$u\\n"; exit 0;',
    '}',
    'waitpid($pid, 0);',
  ].join(' ');
}

/** Reads the probe's line. Pure. */
export function judgeProbe(stdout: string): string | null {
  const m = /getfd=(\d+) ptrace=(\d+) unix=(\d+)/.exec(stdout);
  if (!m) return `the trial run printed no verdict (${JSON.stringify(stdout.slice(0, 200))})`;
  const [getfd, ptrace, unix] = [Number(m[1]), Number(m[2]), Number(m[3])];
  if (getfd !== EPERM) return getfd === EBADF ? 'the seccomp filter did not load: pidfd_getfd reached the kernel' : `pidfd_getfd answered errno ${getfd}, not EPERM`;
  if (ptrace !== EPERM) return `a sandboxed child could ptrace its parent (errno ${ptrace})`;
  if (unix !== EPERM) return `a sandboxed process could open an AF_UNIX socket (errno ${unix})`;
  return null;
}

/**
 * A real trial run with the same flags a turn gets: a bwrap that is missing
 * or cannot create namespaces (some containers, AppArmor-restricted hosts),
 * or a seccomp filter that does not load or does not hold, is found at
 * start-up (and by doctor), not by the first turn.
 */
export async function probeSandbox(bwrapPath: string): Promise<SandboxHealth> {
  const root = mkdtempSync(join(tmpdir(), 'droid-mcp-probe-'));
  let disposeTurnTmp: () => Promise<unknown> = async () => null;
  try {
    const workspace = join(root, 'workspace');
    const factoryDir = join(root, 'home', '.factory');
    const sessionsCopy = join(root, 'sessions');
    for (const dir of [workspace, factoryDir, sessionsCopy]) mkdirSync(dir, { recursive: true });
    let launcher: SandboxLauncher;
    try {
      // Inside the try: a private temp root someone else made is a failed trial, not a crash of start-up.
      const { turnTmp, factoryEntries, dispose } = prepareTurnPaths(factoryDir);
      disposeTurnTmp = dispose;
      launcher = sandboxLauncher(bwrapPath, { workspace: { path: workspace, writable: true }, factoryDir, factoryEntries, sessionsCopy, turnTmp, runtimeDir: null, hiddenDirs: [], hiddenFiles: [] });
    } catch (err) {
      return { ok: false, detail: err instanceof Error ? err.message : String(err) };
    }
    try {
      accessSync(PERL, constants.X_OK);
    } catch {
      return { ok: false, detail: `the trial run needs ${PERL} (Debian's essential perl-base) to prove the seccomp filter` };
    }
    const arch = seccompArchOf(process.arch)!;
    const index = arch === 'x86_64' ? 0 : 1;
    const args = [...launcher.args, PERL, '-e', probeScript(SYSCALLS.ptrace[index], SYSCALLS.pidfd_getfd[index])];
    return await new Promise<SandboxHealth>((resolve) => {
      const child = spawn(launcher.command, args, { stdio: ['ignore', 'pipe', 'pipe', 'pipe'] }) as ChildProcessByStdio<null, Readable, Readable>;
      handFd3(child, launcher.fd3);
      let stdout = '';
      let stderr = '';
      child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout = (stdout + chunk).slice(-2_000)));
      child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr = (stderr + chunk).slice(-2_000)));
      const timer = setTimeout(() => child.kill('SIGKILL'), PROBE_TIMEOUT_MS);
      child.once('error', (err) => {
        clearTimeout(timer);
        resolve({ ok: false, detail: `bubblewrap could not be started: ${err.message}` });
      });
      child.once('close', (code, signal) => {
        clearTimeout(timer);
        if (code !== 0) {
          resolve({ ok: false, detail: `bubblewrap trial run failed (${signal ? `signal ${signal}` : `exit ${code}`}): ${stderr.trim() || 'no message'}` });
          return;
        }
        const problem = judgeProbe(stdout);
        resolve(problem === null ? { ok: true, detail: null } : { ok: false, detail: `bubblewrap trial run: ${problem}` });
      });
    });
  } finally {
    await disposeTurnTmp();
    rmSync(root, { recursive: true, force: true });
  }
}
