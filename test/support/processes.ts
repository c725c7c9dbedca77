// Leak detection: every droid/worker a test starts carries
// DROID_MCP_TEST_TAG=<tag> in its env, and children inherit it, so scanning
// /proc finds whatever outlived the test, however it was started.
import { readFileSync } from 'node:fs';
import { processesTagged, waitUntilNoneTagged } from '../../src/testbed/processes.js';
import { AHEAD_TITLE, POOL_ARG, WARM_IDLE_TITLE } from '../../src/worker/contract/worker-process.js';

export const TAG_VAR = 'DROID_MCP_TEST_TAG';

function read(path: string): string | undefined {
  try {
    return readFileSync(path, 'latin1'); // /proc files are bytes, not necessarily UTF-8
  } catch {
    return undefined; // vanished or not ours to read
  }
}

/** Live (non-zombie) processes whose initial env holds exactly TAG_VAR=<tag>; never this process. */
export function pidsWithEnvTag(tag: string): number[] {
  return processesTagged(TAG_VAR, tag);
}

/**
 * Tagged processes that belong to no turn yet: the server's idle warm pool
 * (workers whose title says they wait for a turn) and the workers holding a
 * droid booted for a session's next turn, with the members of their process
 * groups (a pre-spawned droid). The pool lives as long as the server; a
 * droid booted ahead until its turn comes, or a while after.
 */
export function idlePoolPids(tag: string): Set<number> {
  // Idle by title (a pool's, or one holding a droid booted for a next turn), or forked for the pool and not yet running its own code.
  return groupsLedBy(tag, (cmdline) => cmdline.startsWith(WARM_IDLE_TITLE) || cmdline.startsWith(AHEAD_TITLE) || cmdline.split('\0').includes(POOL_ARG));
}

/** Tagged processes of workers holding a droid booted for a session's next turn, and that droid: no turn's yet. */
export function aheadPids(tag: string): Set<number> {
  return groupsLedBy(tag, (cmdline) => cmdline.startsWith(AHEAD_TITLE));
}

/** Tagged processes whose process group leader's command line (its title) passes `leader`, the leaders included. */
function groupsLedBy(tag: string, leader: (cmdline: string) => boolean): Set<number> {
  const pids = pidsWithEnvTag(tag);
  const leaders = new Set(
    pids.filter((pid) => {
      const cmdline = read(`/proc/${pid}/cmdline`);
      return cmdline !== undefined && leader(cmdline);
    }),
  );
  const out = new Set<number>();
  for (const pid of pids) {
    const stat = read(`/proc/${pid}/stat`);
    const pgid = stat ? Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]) : -1;
    if (leaders.has(pid) || leaders.has(pgid)) out.add(pid);
  }
  return out;
}

/** Tagged processes other than `except` and the idle warm pool: what turns left running. */
export function turnPids(tag: string, except: number[] = []): number[] {
  const idle = idlePoolPids(tag);
  return pidsWithEnvTag(tag).filter((pid) => !except.includes(pid) && !idle.has(pid));
}

function describe(pid: number): string {
  const cmd = read(`/proc/${pid}/cmdline`)?.split('\0').filter(Boolean).join(' ');
  return `${pid} ${cmd ?? '(gone)'}`;
}

/** Polls until no tagged process is left; throws naming the survivors. */
export async function waitForNoProcesses(tag: string, timeoutMs = 5_000): Promise<void> {
  const left = await waitUntilNoneTagged(TAG_VAR, tag, timeoutMs);
  if (left.length > 0) throw new Error(`processes tagged ${tag} still alive after ${timeoutMs} ms:\n${left.map(describe).join('\n')}`);
}

/** Workers holding a droid booted for a session's next turn, by their title. */
export function aheadWorkers(tag: string): number[] {
  return [...aheadPids(tag)].filter((pid) => read(`/proc/${pid}/cmdline`)?.startsWith(AHEAD_TITLE));
}
