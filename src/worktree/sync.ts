/**
 * Bringing a session's branch back from its checkout into the repository,
 * without ever running the checkout's git while the repository is writable.
 *
 * The checkout's config, refs and object store are the turn's: a git that
 * serves from the checkout (upload-pack, pack-objects) reads that config, and
 * older gits ran commands named there (git < 2.39.4 / 2.45.1). So the branch
 * travels as a bundle: made in the checkout in a sandbox where nothing but a
 * private scratch folder is writable, checked for size, then fetched into the
 * repository in a sandbox where only the repository's git folder is writable
 * (a bundle is data: fetching it runs nothing of the checkout's). The fetch
 * is a fast-forward only, never forced.
 */
import { lstat, readdir, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { CheckoutRecord } from '../shared/checkout-types.js';
import { makeTurnTmp } from '../sandbox/turn-paths.js';
import { confinedGit, type GitHost } from './confined-git.js';

/** What one turn may bring back: beyond it the branch stays in the checkout (README "Parallel writers"). */
export const MAX_SYNC_BYTES = 100 * 1024 * 1024;
/** A whole sync (measure, bundle, fetch) may take this long: it delays the turn's final record. */
const SYNC_BUDGET_MS = 20_000;
/** Neutralized for the checkout's git: what it could otherwise start or consult. */
const CHECKOUT_HARDENING = ['-c', 'core.alternateRefsCommand=', '-c', 'uploadpack.packObjectsHook=', '-c', 'gc.auto=0', '-c', 'maintenance.auto=false'];

/** Syncs into one repository run one at a time, so a failed fetch's leftovers are surely its own. */
const chains = new Map<string, Promise<unknown>>();

/** Fast-forwards the repository's branch to the checkout's. Resolves null when done (or nothing to do), else why it could not be. */
export function syncBranch(host: GitHost, rec: CheckoutRecord): Promise<string | null> {
  const previous = chains.get(rec.gitDir) ?? Promise.resolve();
  const next = previous.then(() => syncNow(host, rec));
  const settled = next.catch(() => undefined);
  chains.set(rec.gitDir, settled);
  void settled.then(() => chains.get(rec.gitDir) === settled && chains.delete(rec.gitDir));
  return next;
}

async function syncNow(host: GitHost, rec: CheckoutRecord): Promise<string | null> {
  const cloneGit = join(rec.path, '.git');
  const info = await lstat(cloneGit).catch(() => null);
  // A gitfile or a link would make "the checkout's branch" whatever repository it names.
  if (!info?.isDirectory()) return `the checkout's .git is not a real directory (${info ? 'a file or a link' : 'missing'})`;
  const ref = `refs/heads/${rec.branch}`;
  const scratch = makeTurnTmp();
  const deadline = Date.now() + SYNC_BUDGET_MS;
  const left = () => Math.max(1, deadline - Date.now());
  try {
    const inClone = {
      cwd: rec.path,
      writable: false,
      get timeoutMs() {
        return left();
      },
      turnTmp: scratch.turnTmp,
    };
    const cloneArgs = ['--git-dir', cloneGit, ...CHECKOUT_HARDENING];
    const tip = (await confinedGit(host, inClone, [...cloneArgs, 'rev-parse', '--verify', '--quiet', `${ref}^{commit}`]).catch(() => '')).trim();
    if (!tip) return `the checkout has no branch ${rec.branch}`;
    const held = await mainTip(host, rec, left());
    if (held === tip) return null;
    const exclude = held ? [`^${held}`] : rec.base ? [`^${rec.base}`] : [];
    const bytes = Number((await confinedGit(host, inClone, [...cloneArgs, 'rev-list', '--objects', '--disk-usage', ref, ...exclude, '--'])).trim());
    if (!(bytes <= MAX_SYNC_BYTES)) return `the branch's new objects take ${mib(bytes)}, over the ${mib(MAX_SYNC_BYTES)} a turn may bring back`;
    const bundle = join(scratch.turnTmp, 'branch.bundle');
    await confinedGit(host, inClone, [...cloneArgs, 'bundle', 'create', '--quiet', bundle, ref, ...exclude]);
    const size = (await stat(bundle)).size;
    if (size > MAX_SYNC_BYTES) return `the branch's bundle is ${mib(size)}, over the ${mib(MAX_SYNC_BYTES)} a turn may bring back`;
    return await fetchBundle(host, rec, bundle, { turnTmp: scratch.turnTmp, timeoutMs: left() });
  } catch (err) {
    const late = Date.now() >= deadline ? ` within the ${SYNC_BUDGET_MS / 1000} s a sync may take` : '';
    return `git could not bring the branch back${late} (${(err as Error).message})`;
  } finally {
    await scratch.dispose();
  }
}

/** The repository's branch tip, or null when it has none. */
async function mainTip(host: GitHost, rec: CheckoutRecord, timeoutMs: number): Promise<string | null> {
  const call = { cwd: rec.gitDir, writable: false, timeoutMs };
  const out = await confinedGit(host, call, ['--git-dir', rec.gitDir, 'rev-parse', '--verify', '--quiet', `refs/heads/${rec.branch}^{commit}`]).catch(() => '');
  return out.trim() || null;
}

async function fetchBundle(host: GitHost, rec: CheckoutRecord, bundle: string, limits: { turnTmp: string; timeoutMs: number }): Promise<string | null> {
  const ref = `refs/heads/${rec.branch}`;
  const before = new Set(await tmpObjects(rec.gitDir));
  const args = [
    '--git-dir',
    rec.gitDir,
    '-c',
    'gc.auto=0',
    '-c',
    'maintenance.auto=false',
    'fetch',
    '--quiet',
    '--no-tags',
    '--no-write-fetch-head',
    '--no-recurse-submodules',
    '--',
    bundle,
    `${ref}:${ref}`,
  ];
  try {
    await confinedGit(host, { cwd: rec.gitDir, writable: true, ...limits }, args);
    return null;
  } catch (err) {
    // A fetch cut short leaves its temporary objects behind; only those that appeared during it go.
    for (const path of await tmpObjects(rec.gitDir)) if (!before.has(path)) await rm(path, { force: true }).catch(() => undefined);
    return `the repository did not take the branch (diverged, too slow, or git failed: ${(err as Error).message})`;
  }
}

/** git's temporary object files in a repository (tmp_obj_*, tmp_pack_*, tmp_idx_*). */
async function tmpObjects(gitDir: string): Promise<string[]> {
  const objects = join(gitDir, 'objects');
  const out: string[] = [];
  for (const dir of await readdir(objects).catch(() => [])) {
    if (!/^([0-9a-f]{2}|pack|incoming-.*)$/.test(dir)) continue;
    for (const name of await readdir(join(objects, dir)).catch(() => [])) if (name.startsWith('tmp_')) out.push(join(objects, dir, name));
  }
  return out;
}

const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
