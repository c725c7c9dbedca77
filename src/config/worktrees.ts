/**
 * The `worktrees` key (issue 21): where session checkouts are made. The
 * directory must exist, be given by its canonical path (checkouts are
 * workspaces: locks compare canonical paths), lie inside an approved root
 * (a checkout is a workspace like any other) and be private to the service
 * user (checkouts hold the repository's content).
 */
import { realpath, stat } from 'node:fs/promises';
import { normalize } from 'node:path';
import { errCode, sharedMode } from '../util/errno.js';
import { isAtOrBelow } from '../util/paths.js';
import type { WorktreesConfig } from './schema.js';

/** The resolved setting, or the text that follows `"worktrees.directory"` in the refusal. */
export async function checkWorktrees(raw: { directory: string; maxCheckouts: number }, approvedRoots: readonly string[]): Promise<WorktreesConfig | string> {
  const directory = normalize(raw.directory).replace(/(.)\/$/, '$1');
  const shown = JSON.stringify(directory);
  let real: string;
  try {
    real = await realpath(directory);
  } catch (err) {
    return `${shown} cannot be resolved (${errCode(err) ?? 'unknown error'}); create it (mkdir -m 700) or remove the worktrees key`;
  }
  if (real !== directory) return `${shown} is not canonical (it resolves to ${JSON.stringify(real)}); give the resolved path`;
  const info = await stat(real);
  if (!info.isDirectory()) return `${shown} is not a directory`;
  if (!approvedRoots.some((root) => real !== root && isAtOrBelow(real, root))) {
    return `${shown} is not inside an approved root; checkouts are workspaces, so put the directory inside one of approvedDirectories`;
  }
  const uid = typeof process.getuid === 'function' ? process.getuid() : info.uid;
  if (info.uid !== uid) return `${shown} is owned by uid ${info.uid}, not the service user (${uid}); chown it to the service user`;
  const mode = sharedMode(info.mode);
  if (mode !== undefined) return `${shown} is accessible by group/other (mode ${mode}); checkouts hold repository content. Run: chmod 700 ${real}`;
  return { directory: real, maxCheckouts: raw.maxCheckouts };
}
