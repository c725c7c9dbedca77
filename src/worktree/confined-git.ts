/**
 * git for the controller's own work on checkouts and their repositories
 * (make, bring a branch back, inspect, check before removal), run the way
 * the evidence code runs it (evidence/git.ts: bounded time, no hooks, pager,
 * fsmonitor, system or global config) and, when the sandbox is on, inside
 * the same bubblewrap confinement as a turn with only the folders that one
 * call must write. A repository's own config is under a writer turn's
 * control (its checkout's, or the repository's when a session without a
 * checkout writes there), so git here can do no more than such a turn could.
 */
import { git, GitUnavailable } from '../evidence/git.js';
import type { SandboxSpec } from '../sandbox/sandbox.js';
import { checkConfinement } from '../sandbox/sandbox.js';
import { listFactoryEntries, prepareTurnPaths, runtimeDirOf } from '../sandbox/turn-paths.js';
import { factoryDirOf } from '../shared/host-paths.js';

export interface GitHost {
  sandbox: SandboxSpec;
  droidEnv: Record<string, string>;
  gitPath?: string;
}

export interface GitCall {
  /** Working directory (and the sandbox's workspace bind). */
  cwd: string;
  /** Whether `cwd` is writable to this call. */
  writable: boolean;
  /** Other folders this call may write. */
  alsoWritable?: readonly string[];
  timeoutMs: number;
  /** A TMPDIR the caller made and removes (its files outlive the call; the only other place this call may write); else a fresh one. */
  turnTmp?: string;
}

export { GitUnavailable };

/** Runs one git command; resolves its stdout, rejects GitUnavailable (or sandbox_unavailable). */
export async function confinedGit(host: GitHost, call: GitCall, args: readonly string[], stdin?: string): Promise<string> {
  const deadline = Date.now() + call.timeoutMs;
  const gitPath = host.gitPath ?? 'git';
  if (host.sandbox.mode === 'off') return git({ workspace: call.cwd, launcher: null, deadline, gitPath }, args, stdin);
  const factoryDir = factoryDirOf(host.droidEnv);
  const given = call.turnTmp;
  const paths = given ? { turnTmp: given, factoryEntries: listFactoryEntries(factoryDir), dispose: async () => null } : prepareTurnPaths(factoryDir);
  try {
    const workspace = { path: call.cwd, writable: call.writable };
    const checked = checkConfinement(host.sandbox.bwrapPath, {
      workspace,
      alsoWritable: call.alsoWritable ?? [],
      factoryDir,
      factoryEntries: paths.factoryEntries,
      sessionsCopy: null,
      turnTmp: paths.turnTmp,
      runtimeDir: runtimeDirOf(host.droidEnv),
      hiddenDirs: host.sandbox.hiddenDirs,
      hiddenFiles: host.sandbox.hiddenFiles,
    });
    return await git({ workspace: call.cwd, launcher: checked.launcher(workspace), deadline, gitPath }, args, stdin);
  } finally {
    await paths.dispose();
  }
}
