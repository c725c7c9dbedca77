/**
 * Snapshots of a workspace's git state before and after a turn, for the
 * changed-files evidence (the diff itself is pure, in change-set.ts).
 *
 * Git runs in the worker with a bounded time, never with the caller's hooks,
 * pager, fsmonitor, external diff or textconv, and without system or global
 * config. A repository's own config and attributes are under the turn's
 * control (a writer turn may edit `.git/config` or `.gitattributes`, e.g. a
 * clean filter that runs a command), so when droid is confined by the sandbox,
 * git is confined the same way, with the workspace read-only: git can then do
 * no more than the turn itself could. With the sandbox off, droid already ran
 * unconfined, so running git unconfined adds nothing.
 *
 * Any failure (not a work tree, git missing, too slow, refused ownership)
 * means "unknown" (null), never "no changes".
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { handFd3 } from '../util/child-fd3.js';
import { lstat } from 'node:fs/promises';
import { join } from 'node:path';
import type { ChangeSet } from '../shared/evidence-types.js';
import { capChanges, diffTreeStates, parseNameStatusZ, parsePorcelainV2Z, type CommittedChange, type DirtyPath, type TreeState } from './change-set.js';

export interface Launcher {
  command: string;
  args: readonly string[];
  /** Bytes for the launcher's fd 3 (bwrap's seccomp program). */
  fd3?: Uint8Array;
}

export interface GitOptions {
  workspace: string;
  /** bwrap (read-only workspace) in front of git, or null to run it directly. */
  launcher: Launcher | null;
  /** Every git call of one snapshot together must finish by then (epoch ms). */
  deadline: number;
  gitPath?: string;
}

/** More dirty paths than this: contents are not hashed and the change set is unknown. */
const MAX_DIRTY_PATHS = 20_000;
const MAX_OUTPUT_BYTES = 32 * 1024 * 1024;

export class GitUnavailable extends Error {}

/** Fixed options: no hooks, no pager, no fsmonitor, no optional locks, no external helpers. */
const HARDENING = [
  '-c',
  'core.hooksPath=/dev/null',
  '-c',
  'core.pager=cat',
  '-c',
  'core.fsmonitor=false',
  '-c',
  'core.untrackedCache=false',
  '-c',
  'color.ui=false',
  '--no-optional-locks',
  '--no-pager',
];

function gitEnv(): Record<string, string> {
  const env: Record<string, string> = {
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_GLOBAL: '/dev/null',
    GIT_TERMINAL_PROMPT: '0',
    GIT_OPTIONAL_LOCKS: '0',
    LC_ALL: 'C',
    PATH: process.env.PATH ?? '/usr/bin:/bin',
  };
  if (process.env.HOME) env.HOME = process.env.HOME;
  return env;
}

/** Runs one git command in the workspace; resolves its stdout, rejects GitUnavailable. Checkouts (src/worktree/) run their git through it too. */
export function git(opts: GitOptions, args: readonly string[], stdin?: string): Promise<string> {
  const remaining = opts.deadline - Date.now();
  if (remaining <= 0) return Promise.reject(new GitUnavailable('git time budget exhausted'));
  const gitArgs = [...HARDENING, ...args];
  const gitPath = opts.gitPath ?? 'git';
  const [command, argv] = opts.launcher ? [opts.launcher.command, [...opts.launcher.args, gitPath, ...gitArgs]] : [gitPath, gitArgs];
  return new Promise((resolve, reject) => {
    const fd3 = opts.launcher?.fd3;
    const child = spawn(command, argv, {
      cwd: opts.workspace,
      env: gitEnv(),
      stdio: ['pipe', 'pipe', 'pipe', fd3 ? 'pipe' : 'ignore'],
    }) as ChildProcessWithoutNullStreams;
    if (fd3) handFd3(child, fd3);
    const out: Buffer[] = [];
    let size = 0;
    let err = '';
    const timer = setTimeout(() => child.kill('SIGKILL'), remaining);
    child.stdout.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_OUTPUT_BYTES) child.kill('SIGKILL');
      else out.push(c);
    });
    child.stderr.setEncoding('utf8').on('data', (d: string) => (err = (err + d).slice(-500)));
    child.stdin.on('error', () => undefined);
    child.stdin.end(stdin ?? '');
    child.once('error', (e) => {
      clearTimeout(timer);
      reject(new GitUnavailable(`git could not start: ${e.message}`));
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolve(Buffer.concat(out).toString('utf8'));
      else reject(new GitUnavailable(`git ${args[0]} failed (${signal ?? code}): ${err.trim()}`));
    });
  });
}

/** The tree's state now; null when the workspace is not inside a git work tree (or git fails). */
export async function snapshotTree(opts: GitOptions): Promise<TreeState | null> {
  try {
    // One call: inside a work tree, and the workspace's path below the repository root.
    const [inside, prefix = ''] = (await git(opts, ['rev-parse', '--is-inside-work-tree', '--show-prefix'])).split('\n');
    if (inside !== 'true') return null;
    const { state } = await readState(opts, prefix);
    prefixes.set(state, prefix);
    return state;
  } catch (err) {
    if (err instanceof GitUnavailable) return null;
    throw err;
  }
}

/** The workspace's prefix in its repository, per "before" state (the workspace does not move during a turn). */
const prefixes = new WeakMap<TreeState, string>();

async function readState(opts: GitOptions, prefix: string, extraPaths: readonly string[] = []): Promise<{ state: TreeState; extraBlobs: Map<string, string> }> {
  // HEAD and the dirty paths in one call; paths are relative to the repository root.
  const status = await git(opts, ['status', '--porcelain=v2', '--branch', '-z', '--no-renames', '--untracked-files=all', '--ignore-submodules=all', '--', '.']);
  const { head, entries } = parsePorcelainV2Z(status);
  if (entries.size > MAX_DIRTY_PATHS) throw new GitUnavailable(`more than ${MAX_DIRTY_PATHS} dirty paths`);
  const rel = (p: string) => (p.startsWith(prefix) ? p.slice(prefix.length) : p);
  const paths = new Map<string, string>();
  for (const [p, xy] of entries) paths.set(rel(p), xy);
  const blobs = await hashPaths(opts, [...new Set([...paths.keys(), ...extraPaths])]);
  const dirty = new Map<string, DirtyPath>();
  for (const [p, xy] of paths) dirty.set(p, { xy, blob: blobs.get(p) ?? null });
  const extraBlobs = new Map<string, string>();
  for (const p of extraPaths) if (!dirty.has(p) && blobs.has(p)) extraBlobs.set(p, blobs.get(p)!);
  return { state: { head, dirty }, extraBlobs };
}

/** Git blob ids of the paths that exist as regular files (or symlinks); others are absent from the map. */
async function hashPaths(opts: GitOptions, paths: readonly string[]): Promise<Map<string, string>> {
  const present: string[] = [];
  for (const p of paths) {
    if (p.includes('\n')) continue; // cannot go through --stdin-paths; reads as absent
    const st = await lstat(join(opts.workspace, p)).catch(() => null);
    if (st && (st.isFile() || st.isSymbolicLink())) present.push(p);
  }
  const out = new Map<string, string>();
  if (present.length === 0) return out;
  // --no-filters: a clean filter from the repository's attributes never runs.
  const ids = (await git(opts, ['hash-object', '--no-filters', '--stdin-paths'], `${present.join('\n')}\n`)).trim().split('\n');
  present.forEach((p, i) => {
    if (ids[i]) out.set(p, ids[i]!);
  });
  return out;
}

/**
 * The changes since `before`, capped; null when they cannot be known.
 * `outsideWorkspace` comes from the turn's tool calls.
 */
export async function changesSince(before: TreeState, opts: GitOptions, outsideWorkspace: boolean): Promise<ChangeSet | null> {
  try {
    const prefix = prefixes.get(before) ?? '';
    const { state: after, extraBlobs } = await readState(opts, prefix, [...before.dirty.keys()]);
    let committed = new Map<string, CommittedChange>();
    if (before.head !== after.head && before.head && after.head) {
      committed = parseNameStatusZ(
        await git(opts, ['diff', '--name-status', '-z', '--no-renames', '--no-ext-diff', '--no-textconv', '--relative', before.head, after.head, '--', '.']),
      );
    } else if (before.head !== after.head) {
      return null; // a HEAD born or lost during the turn: not worth guessing
    }
    // Paths dirty before and clean now carry their current content (or absence) as a
    // pseudo-entry, so it is compared with what they held before (diffTreeStates).
    const afterDirty = new Map(after.dirty);
    for (const p of before.dirty.keys()) if (!after.dirty.has(p)) afterDirty.set(p, { xy: 'CL', blob: extraBlobs.get(p) ?? null });
    const headBlobs = await oldHeadBlobs(opts, prefix, before, after, committed);
    const diff = diffTreeStates(before, { head: after.head, dirty: afterDirty }, committed, headBlobs);
    return capChanges(diff, outsideWorkspace);
  } catch (err) {
    if (err instanceof GitUnavailable) return null;
    throw err;
  }
}

/** Old-HEAD blob ids of paths clean before and gone now, so a rename of a committed file is seen. */
async function oldHeadBlobs(
  opts: GitOptions,
  prefix: string,
  before: TreeState,
  after: TreeState,
  committed: ReadonlyMap<string, CommittedChange>,
): Promise<Map<string, string>> {
  const gone: string[] = [];
  for (const [p, d] of after.dirty) if (d.blob === null && !before.dirty.has(p)) gone.push(p);
  for (const [p, c] of committed) if (c === 'D' && !before.dirty.has(p)) gone.push(p);
  const out = new Map<string, string>();
  if (!before.head || gone.length === 0) return out;
  const listing = await git(opts, ['ls-tree', '-z', '--full-name', before.head, '--', ...gone.slice(0, 1_000)]).catch(() => '');
  for (const rec of listing.split('\0')) {
    const m = /^\d+ blob ([0-9a-f]+)\t(.*)$/s.exec(rec);
    if (m) out.set(m[2]!.startsWith(prefix) ? m[2]!.slice(prefix.length) : m[2]!, m[1]!);
  }
  return out;
}
