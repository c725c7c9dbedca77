/**
 * What a turn changed in a git work tree, from two snapshots of its state:
 * `git status --porcelain=v2 -z` plus git blob ids of the dirty paths, taken
 * before and after the turn. Pure: the git calls live in git.ts.
 *
 * Comparing content ids (not only status letters) is what catches a file that
 * was already dirty before the turn and was changed again by it. Renames are
 * found here, not by git: a deleted path and an added path with the same blob
 * id. Paths are relative to the workspace.
 */

import type { ChangeSet } from '../shared/evidence-types.js';

/** One dirty path as `git status` saw it, with its content id when it exists on disk. */
export interface DirtyPath {
  /**
   * The two status letters (`XY`), e.g. ` M`, `??`, `A `, ` D`; or `CL` in an
   * "after" state for a path that was dirty before and is clean now, whose
   * current content (or absence) is then given by `blob`.
   */
  xy: string;
  /** Git blob id of the file on disk; null when the path does not exist. */
  blob: string | null;
}

export interface TreeState {
  /** Commit at HEAD; null on an unborn branch. */
  head: string | null;
  dirty: ReadonlyMap<string, DirtyPath>;
}

/** What changed between HEAD moves during the turn (the turn committed), as `git diff --name-status`. */
export type CommittedChange = 'A' | 'M' | 'D';

const MAX_CHANGED_PATHS = 200;

/**
 * Parses `git status --porcelain=v2 --branch -z --no-renames`: the HEAD
 * commit (`# branch.oid`, `(initial)` on an unborn branch) and `XY` per path,
 * with v2's `.` written as a space so the letters read as in v1.
 */
export function parsePorcelainV2Z(output: string): { head: string | null; entries: Map<string, string> } {
  let head: string | null = null;
  const entries = new Map<string, string>();
  for (const record of output.split('\0')) {
    if (record.startsWith('# branch.oid ')) {
      const oid = record.slice('# branch.oid '.length);
      head = oid === '(initial)' ? null : oid;
    } else if (record.startsWith('? ')) {
      entries.set(record.slice(2), '??');
    } else if (record.startsWith('1 ') || record.startsWith('u ')) {
      // 1 XY sub mH mI mW hH hI path; u XY sub m1 m2 m3 mW h1 h2 h3 path
      const fields = record.startsWith('1 ') ? 8 : 10;
      const parts = record.split(' ');
      if (parts.length <= fields) continue;
      entries.set(parts.slice(fields).join(' '), parts[1]!.replace(/\./g, ' '));
    }
  }
  return { head, entries };
}

/** Parses `git diff --name-status -z --no-renames`: `S\0path\0` pairs. */
export function parseNameStatusZ(output: string): Map<string, CommittedChange> {
  const parts = output.split('\0');
  const out = new Map<string, CommittedChange>();
  for (let i = 0; i + 1 < parts.length; i += 2) {
    const status = parts[i]![0];
    const path = parts[i + 1]!;
    if (path === '') continue;
    out.set(path, status === 'A' ? 'A' : status === 'D' ? 'D' : 'M');
  }
  return out;
}

/** Whether a dirty path (by its status letters) exists at HEAD: untracked and newly added ones do not. */
function inHead(xy: string): boolean {
  return xy !== '??' && xy[0] !== 'A';
}

interface Side {
  exists: boolean;
  /** Content id when known; null = "as at HEAD" (clean) or absent. */
  blob: string | null;
}

/**
 * The changes from `before` to `after`. `committed` lists what differs
 * between the two HEADs when the turn moved HEAD (empty otherwise).
 * `headBlobs` gives the old HEAD's blob id of paths that were clean before
 * and are gone after (for rename detection); missing entries are fine.
 */
export function diffTreeStates(
  before: TreeState,
  after: TreeState,
  committed: ReadonlyMap<string, CommittedChange> = new Map(),
  headBlobs: ReadonlyMap<string, string> = new Map(),
): Omit<ChangeSet, 'truncated' | 'outsideWorkspace'> {
  const candidates = new Set<string>([...before.dirty.keys(), ...after.dirty.keys(), ...committed.keys()]);
  const added: Array<{ path: string; blob: string | null }> = [];
  const deleted: Array<{ path: string; blob: string | null }> = [];
  const modified: string[] = [];
  for (const path of candidates) {
    const b = beforeSide(path, before, after, committed, headBlobs);
    const a = afterSide(path, after, committed);
    if (!b.exists && !a.exists) continue;
    if (!b.exists) added.push({ path, blob: a.blob });
    else if (!a.exists) deleted.push({ path, blob: b.blob });
    else if (changed(path, before, after, committed, b, a)) modified.push(path);
  }
  // A deleted and an added path with the same content: a rename.
  const renamed: Array<{ from: string; to: string }> = [];
  const addedByBlob = new Map<string, string[]>();
  for (const a of added) if (a.blob) addedByBlob.set(a.blob, [...(addedByBlob.get(a.blob) ?? []), a.path]);
  const renamedTo = new Set<string>();
  const keptDeleted: string[] = [];
  for (const d of deleted.sort((x, y) => cmp(x.path, y.path))) {
    const to = d.blob
      ? addedByBlob
          .get(d.blob)
          ?.sort(cmp)
          .find((p) => !renamedTo.has(p))
      : undefined;
    if (to) {
      renamedTo.add(to);
      renamed.push({ from: d.path, to });
    } else keptDeleted.push(d.path);
  }
  return {
    added: added
      .map((a) => a.path)
      .filter((p) => !renamedTo.has(p))
      .sort(cmp),
    modified: modified.sort(cmp),
    deleted: keptDeleted,
    renamed,
  };
}

function beforeSide(
  path: string,
  before: TreeState,
  after: TreeState,
  committed: ReadonlyMap<string, CommittedChange>,
  headBlobs: ReadonlyMap<string, string>,
): Side {
  const dirty = before.dirty.get(path);
  if (dirty) return { exists: dirty.blob !== null, blob: dirty.blob };
  // Clean before: as at the old HEAD.
  const commit = committed.get(path);
  if (commit) return { exists: commit !== 'A', blob: headBlobs.get(path) ?? null };
  const now = after.dirty.get(path);
  return { exists: now ? inHead(now.xy) : true, blob: headBlobs.get(path) ?? null };
}

function afterSide(path: string, after: TreeState, committed: ReadonlyMap<string, CommittedChange>): Side {
  const dirty = after.dirty.get(path);
  if (dirty) return { exists: dirty.blob !== null, blob: dirty.blob };
  // Clean after: as at the new HEAD.
  const commit = committed.get(path);
  return { exists: commit !== 'D', blob: null };
}

function changed(path: string, before: TreeState, after: TreeState, committed: ReadonlyMap<string, CommittedChange>, b: Side, a: Side): boolean {
  const wasDirty = before.dirty.has(path);
  const isDirty = after.dirty.has(path);
  if (wasDirty && isDirty) return b.blob !== a.blob;
  // Clean on both sides: changed only if a commit of the turn changed it.
  if (!wasDirty && !isDirty) return committed.has(path);
  // Dirty on exactly one side: it differs from HEAD on that side only. With
  // HEAD unmoved that is a change; with HEAD moved, the turn may have
  // committed exactly the earlier dirty content (compare when both ids are known).
  if (wasDirty && committed.has(path) && b.blob !== null && a.blob !== null) return b.blob !== a.blob;
  return true;
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Caps the four lists to `max` paths in all, in order added, modified, deleted, renamed. */
export function capChanges(changes: Omit<ChangeSet, 'truncated' | 'outsideWorkspace'>, outsideWorkspace: boolean, max = MAX_CHANGED_PATHS): ChangeSet {
  let room = max;
  const take = <T>(list: T[]): T[] => {
    const kept = list.slice(0, Math.max(0, room));
    room -= kept.length;
    return kept;
  };
  const total = changes.added.length + changes.modified.length + changes.deleted.length + changes.renamed.length;
  const capped = {
    added: take(changes.added),
    modified: take(changes.modified),
    deleted: take(changes.deleted),
    renamed: take(changes.renamed),
  };
  return { ...capped, truncated: total - (max - room), outsideWorkspace };
}

const PATH_ARG = /"(?:file_path|filePath|path|directory_path|dir_path|folder|cwd)"\s*:\s*"(\/(?:[^"\\]|\\.)*)"/g;
const COMMAND_ARG = /"command"\s*:\s*"((?:[^"\\]|\\.)*)"/g;

/**
 * Whether any tool input names an absolute path outside the workspace (by
 * path segments). `inputs` are the tool inputs as (possibly truncated) JSON
 * text. Only the usual path arguments are read, plus absolute paths in shell
 * commands: a hint for the caller, not proof either way.
 */
export function namesPathOutside(inputs: readonly string[], workspace: string): boolean {
  const root = workspace.endsWith('/') ? workspace.slice(0, -1) : workspace;
  const isOutside = (raw: string) => {
    const p = normalize(raw);
    return p !== root && !p.startsWith(`${root}/`);
  };
  for (const text of inputs) {
    for (const m of text.matchAll(PATH_ARG)) if (isOutside(unescape(m[1]!))) return true;
    for (const c of text.matchAll(COMMAND_ARG)) {
      const command = unescape(c[1]!);
      for (const m of command.matchAll(/(?:^|[\s'"=>])(\/[^\s'";|&<>()]+)/g)) {
        const p = m[1]!;
        // Devices and the usual system programs are not writes anyone cares about.
        if (/^\/(dev|proc|usr|bin|sbin|lib|lib64)(\/|$)/.test(p)) continue;
        if (isOutside(p)) return true;
      }
    }
  }
  return false;
}

function unescape(json: string): string {
  try {
    return JSON.parse(`"${json}"`) as string;
  } catch {
    return json;
  }
}

/** Collapses `.` and `..` segments of an absolute path. */
function normalize(p: string): string {
  const out: string[] = [];
  for (const seg of p.split('/')) {
    if (seg === '' || seg === '.') continue;
    if (seg === '..') out.pop();
    else out.push(seg);
  }
  return `/${out.join('/')}`;
}
