/**
 * Segment-wise containment of absolute paths that are already canonical
 * (`/a/b` is below `/a`, `/ab` is not). Pure; the one copy every layer uses
 * (the controller's lexical rules in workspaces.ts normalize first, then ask this).
 */

/** `path` is `dir` or below it. A trailing `/` on `dir` is allowed (an environment value need not be canonical). */
export function isAtOrBelow(path: string, dir: string): boolean {
  return path === dir || path.startsWith(dir.endsWith('/') ? dir : `${dir}/`);
}

/** One of the two holds the other (or they are the same path). */
export function overlaps(a: string, b: string): boolean {
  return isAtOrBelow(a, b) || isAtOrBelow(b, a);
}
