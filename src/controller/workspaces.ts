import { realpath, stat } from 'node:fs/promises';
import { isAbsolute, normalize, sep } from 'node:path';
import { ControllerError } from '../shared/public-error.js';
import { isAtOrBelow } from '../util/paths.js';

/**
 * True when `child` is `parent` or below it, compared by whole path segments
 * (`/approved-evil` is not inside `/approved`). Purely lexical: callers pass
 * canonical paths. Relative input is never "inside" anything, so a mistake
 * fails closed.
 */
export function isSameOrInside(child: string, parent: string): boolean {
  if (!isAbsolute(child) || !isAbsolute(parent)) return false;
  return isAtOrBelow(lexical(child), lexical(parent));
}

/** Two trees overlap when one is an ancestor of, descendant of, or equal to the other. */
export function treesOverlap(a: string, b: string): boolean {
  return isSameOrInside(a, b) || isSameOrInside(b, a);
}

function stripTrailingSep(p: string): string {
  return p.length > 1 && p.endsWith(sep) ? p.slice(0, -1) : p;
}

/** Canonical paths (the usual input, on hot paths like find) skip normalize(). */
function lexical(p: string): string {
  return stripTrailingSep(p.includes('/.') || p.includes('//') ? normalize(p) : p);
}

const LIST_ACTION = 'Pass an absolute path from droid_list_workspaces, or an existing directory inside one of those roots.';
const APPROVE_ACTION =
  'Use a root listed by droid_list_workspaces or a directory inside one. To approve a new project, the operator adds its root to approvedDirectories in the controller config (one-time setup) and restarts the controller when idle.';

/**
 * Resolves a caller-supplied workspace to its canonical directory, or rejects
 * it. Approval is decided on the real path, so symlinks and `..` cannot
 * escape the roots. Messages echo only the caller's own string, never where
 * it actually resolves, so rejections do not reveal paths outside the roots.
 */
export async function resolveWorkspace(requested: string, approvedRoots: readonly string[]): Promise<string> {
  // Tool input reaches here from JSON, so the declared type is not trusted.
  if (typeof requested !== 'string' || requested === '') {
    throw new ControllerError('workspace_invalid', 'workspace must be a non-empty string.', LIST_ACTION);
  }
  const shown = JSON.stringify(requested.length > 200 ? `${requested.slice(0, 200)}…` : requested);
  if (requested.includes('\0')) {
    throw new ControllerError('workspace_invalid', 'workspace must not contain a NUL character.', LIST_ACTION);
  }
  if (!isAbsolute(requested)) {
    throw new ControllerError('workspace_invalid', `workspace ${shown} is not an absolute path (relative paths and "~" are not expanded).`, LIST_ACTION);
  }

  // Both at once: one round trip through the thread pool instead of two, on every create's and send's
  // path (issue 38). stat follows the links realpath resolves; its answer is used only after approval.
  const [resolved, info] = await Promise.allSettled([realpath(requested), stat(requested)]);
  if (resolved.status === 'rejected') {
    // Any resolution failure (missing, a file in the middle, loop, no access) means
    // there is no directory to launch in; the cause stays local.
    throw new ControllerError('workspace_not_found', `workspace ${shown} does not exist or cannot be resolved.`, LIST_ACTION);
  }
  const real = resolved.value;

  // Approval before type checks, so an outside path's kind is not disclosed either.
  if (!approvedRoots.some((root) => isSameOrInside(real, root))) {
    throw new ControllerError('workspace_not_approved', `workspace ${shown} is not inside an approved directory.`, APPROVE_ACTION);
  }

  if (info.status === 'rejected') {
    throw new ControllerError('workspace_not_found', `workspace ${shown} does not exist or cannot be resolved.`, LIST_ACTION);
  }
  const isDir = info.value.isDirectory();
  if (!isDir) {
    throw new ControllerError('workspace_not_a_directory', `workspace ${shown} is not a directory.`, LIST_ACTION);
  }
  return real;
}
