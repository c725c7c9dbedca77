/**
 * The sandbox's trial run: the same flags a turn gets, around a child that
 * tries what the seccomp filter must refuse. Run at start-up and by doctor.
 */
import { spawn, type ChildProcessByStdio } from 'node:child_process';
import type { Readable } from 'node:stream';
import { accessSync, constants, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { handFd3 } from '../util/child-fd3.js';
import { sandboxLauncher, type SandboxLauncher } from './sandbox.js';
import { EPERM, seccompArchOf, SYSCALLS } from './seccomp.js';
import { prepareTurnPaths } from './turn-paths.js';

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
  if (getfd !== EPERM)
    return getfd === EBADF ? 'the seccomp filter did not load: pidfd_getfd reached the kernel' : `pidfd_getfd answered errno ${getfd}, not EPERM`;
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
      launcher = sandboxLauncher(bwrapPath, {
        workspace: { path: workspace, writable: true },
        factoryDir,
        factoryEntries,
        sessionsCopy,
        turnTmp,
        runtimeDir: null,
        hiddenDirs: [],
        hiddenFiles: [],
      });
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
