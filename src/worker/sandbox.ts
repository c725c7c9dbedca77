/**
 * The operating-system confinement of one turn (Linux, bubblewrap).
 *
 * Autonomy levels are droid policy, not a boundary: at `high` droid writes
 * anywhere its user can, and at `low`/`medium` it trusts the risk level the
 * model declares (measured, PROTOCOL.md). So droid runs inside a mount
 * namespace where everything is read-only except the turn's workspace
 * (writer turns only), droid's own `.factory` folder and a private TMPDIR;
 * the controller's state directory and the HTTP token file are hidden
 * (an empty read-only tmpfs, and /dev/null).
 *
 * Each flag is there for a measured reason (issue "Confine every turn"):
 * - `--cap-drop ALL`: without it a root droid remounted `/` read-write;
 * - `--ro-bind /proc/sys /proc/sys`: without it a host kernel setting changed;
 * - a private TMPDIR, not `--tmpfs /tmp`: writes under `/tmp` must fail, not
 *   "succeed" into a throwaway mount;
 * - `--die-with-parent` and the PID namespace: when the worker's group is
 *   killed, every Execute child (droid starts each in its own session) dies
 *   with the namespace;
 * - never `--new-session`: it would take droid out of the worker's group.
 * Binds come after `--ro-bind / /` and name real, existing paths.
 *
 * The network stays the host's: the model API needs it.
 */
import { spawn } from 'node:child_process';
import { accessSync, constants, mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { DroidError } from '../droid/errors.js';

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
    };

export interface Confinement {
  workspace: string;
  /** Writer turns (autonomy above off) may write the workspace; `off` turns may not. */
  workspaceWritable: boolean;
  /** droid's own `.factory` folder: sessions, settings, logs. */
  factoryDir: string;
  /** Private per-turn TMPDIR. */
  turnTmp: string;
  hiddenDirs: readonly string[];
  hiddenFiles: readonly string[];
}

export const SANDBOX_ACTION = 'Install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap) and make sure it can create user namespaces, or set "sandbox": "off" in the config to run turns unconfined.';

/** The bwrap arguments before the command. Pure. */
export function bwrapArgs(c: Confinement): string[] {
  const args = [
    '--die-with-parent',
    '--unshare-user',
    '--unshare-pid',
    '--unshare-ipc',
    '--unshare-uts',
    '--cap-drop',
    'ALL',
    '--ro-bind',
    '/',
    '/',
    '--dev',
    '/dev',
    '--proc',
    '/proc',
    '--ro-bind',
    '/proc/sys',
    '/proc/sys',
    '--bind',
    c.turnTmp,
    c.turnTmp,
    '--setenv',
    'TMPDIR',
    c.turnTmp,
    c.workspaceWritable ? '--bind' : '--ro-bind',
    c.workspace,
    c.workspace,
    '--bind',
    c.factoryDir,
    c.factoryDir,
  ];
  // Last, so a secret inside a writable bind is still hidden.
  // Read-only too: a write there must fail, not "succeed" into a throwaway mount.
  for (const dir of c.hiddenDirs) args.push('--tmpfs', dir, '--remount-ro', dir);
  for (const file of c.hiddenFiles) args.push('--ro-bind', '/dev/null', file);
  args.push('--chdir', c.workspace, '--');
  return args;
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

/** Paths a turn's sandbox needs: they must exist before bwrap binds them. */
export function prepareTurnPaths(factoryDir: string): { turnTmp: string; dispose(): void } {
  mkdirSync(factoryDir, { recursive: true, mode: 0o700 });
  const turnTmp = mkdtempSync(join(tmpdir(), 'droid-mcp-turn-'));
  return { turnTmp, dispose: () => rmSync(turnTmp, { recursive: true, force: true }) };
}

export interface SandboxHealth {
  ok: boolean;
  /** Why it is unusable, when it is. */
  detail: string | null;
}

const PROBE_TIMEOUT_MS = 5_000;

/**
 * A real trial run with the same flags a turn gets (`bwrap … -- /bin/true`):
 * a bwrap that is missing or cannot create namespaces (some containers,
 * AppArmor-restricted hosts) is found at start-up, not by the first turn.
 */
export async function probeSandbox(bwrapPath: string): Promise<SandboxHealth> {
  try {
    assertBwrapExecutable(bwrapPath);
  } catch (err) {
    return { ok: false, detail: (err as Error).message };
  }
  const root = mkdtempSync(join(tmpdir(), 'droid-mcp-probe-'));
  try {
    const workspace = join(root, 'workspace');
    const factoryDir = join(root, 'home', '.factory');
    const turnTmp = join(root, 'tmp');
    for (const dir of [workspace, factoryDir, turnTmp]) mkdirSync(dir, { recursive: true });
    const args = [...bwrapArgs({ workspace, workspaceWritable: true, factoryDir, turnTmp, hiddenDirs: [], hiddenFiles: [] }), '/bin/true'];
    return await new Promise<SandboxHealth>((resolve) => {
      const child = spawn(bwrapPath, args, { stdio: ['ignore', 'ignore', 'pipe'] });
      let stderr = '';
      child.stderr.setEncoding('utf8');
      child.stderr.on('data', (chunk: string) => (stderr = (stderr + chunk).slice(-2_000)));
      const timer = setTimeout(() => child.kill('SIGKILL'), PROBE_TIMEOUT_MS);
      child.once('error', (err) => {
        clearTimeout(timer);
        resolve({ ok: false, detail: `bubblewrap could not be started: ${err.message}` });
      });
      child.once('exit', (code, signal) => {
        clearTimeout(timer);
        if (code === 0) resolve({ ok: true, detail: null });
        else resolve({ ok: false, detail: `bubblewrap trial run failed (${signal ? `signal ${signal}` : `exit ${code}`}): ${stderr.trim() || 'no message'}` });
      });
    });
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}
