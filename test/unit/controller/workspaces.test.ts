import { mkdir, mkdtemp, realpath, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ControllerError } from '../../../src/shared/public-error.js';
import { isSameOrInside, resolveWorkspace, treesOverlap } from '../../../src/controller/workspaces.js';

let tmp: string;
let approved: string;
let outside: string;
let roots: string[];

beforeEach(async () => {
  tmp = await realpath(await mkdtemp(join(tmpdir(), 'droid-mcp-ws-')));
  approved = join(tmp, 'approved');
  outside = join(tmp, 'outside');
  await mkdir(join(approved, 'repo', 'src'), { recursive: true });
  await mkdir(join(tmp, 'approved-evil'));
  await mkdir(join(outside, 'secret-project'), { recursive: true });
  roots = [approved];
});

afterEach(async () => {
  await rm(tmp, { recursive: true, force: true });
});

async function rejection(requested: string, code: string): Promise<ControllerError> {
  const err = await resolveWorkspace(requested, roots).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ControllerError);
  const ce = err as ControllerError;
  expect(ce.code).toBe(code);
  expect(ce.retryable).toBe(false);
  expect(ce.action.length).toBeGreaterThan(0);
  return ce;
}

describe('resolveWorkspace', () => {
  it('accepts an approved root itself', async () => {
    await expect(resolveWorkspace(approved, roots)).resolves.toBe(approved);
    await expect(resolveWorkspace(`${approved}/`, roots)).resolves.toBe(approved);
  });

  it('accepts a subdirectory and returns its canonical path', async () => {
    await expect(resolveWorkspace(join(approved, 'repo', 'src'), roots)).resolves.toBe(join(approved, 'repo', 'src'));
    await expect(resolveWorkspace(`${approved}/repo/./src/../src`, roots)).resolves.toBe(join(approved, 'repo', 'src'));
  });

  it('rejects .. traversal that lands outside the roots', async () => {
    const err = await rejection(`${approved}/repo/../../outside/secret-project`, 'workspace_not_approved');
    expect(err.message).not.toContain(join(outside, 'secret-project'));
  });

  it('rejects a sibling that only shares a name prefix', async () => {
    await rejection(join(tmp, 'approved-evil'), 'workspace_not_approved');
  });

  it('rejects a symlink inside a root that points outside, without revealing its target', async () => {
    const link = join(approved, 'escape');
    await symlink(join(outside, 'secret-project'), link);
    const err = await rejection(link, 'workspace_not_approved');
    expect(err.message).toContain(link);
    expect(err.message).not.toContain('secret-project');
    expect(err.action).toContain('approvedDirectories');
    expect(err.action).toMatch(/restart/i);
  });

  it('rejects a symlinked parent path component that escapes', async () => {
    await symlink(outside, join(approved, 'out'));
    await rejection(join(approved, 'out', 'secret-project'), 'workspace_not_approved');
  });

  it('accepts a symlink spelling outside the roots that resolves inside one', async () => {
    const link = join(outside, 'shortcut');
    await symlink(join(approved, 'repo'), link);
    await expect(resolveWorkspace(join(link, 'src'), roots)).resolves.toBe(join(approved, 'repo', 'src'));
  });

  it('rejects a missing path', async () => {
    const err = await rejection(join(approved, 'nope'), 'workspace_not_found');
    expect(err.message).toContain(join(approved, 'nope'));
  });

  it('rejects a file inside a root', async () => {
    await writeFile(join(approved, 'README.md'), 'x');
    await rejection(join(approved, 'README.md'), 'workspace_not_a_directory');
    await rejection(join(approved, 'README.md', 'sub'), 'workspace_not_found');
  });

  it('does not disclose whether an outside path is a file', async () => {
    await writeFile(join(outside, 'notes.txt'), 'x');
    await rejection(join(outside, 'notes.txt'), 'workspace_not_approved');
  });

  it('rejects relative, ~, empty, NUL and non-string input', async () => {
    await rejection('approved/repo', 'workspace_invalid');
    await rejection('~/repo', 'workspace_invalid');
    await rejection('', 'workspace_invalid');
    await rejection(`${approved}\0/repo`, 'workspace_invalid');
    await rejection(42 as unknown as string, 'workspace_invalid');
  });

  it('rejects everything when no roots are approved', async () => {
    roots = [];
    await rejection(approved, 'workspace_not_approved');
  });

  it('accepts paths inside any of several roots', async () => {
    roots = [join(tmp, 'approved-evil'), approved];
    await expect(resolveWorkspace(join(approved, 'repo'), roots)).resolves.toBe(join(approved, 'repo'));
  });
});

describe('path tree helpers', () => {
  it('isSameOrInside compares whole segments', () => {
    expect(isSameOrInside('/a/b', '/a/b')).toBe(true);
    expect(isSameOrInside('/a/b/c', '/a/b')).toBe(true);
    expect(isSameOrInside('/a/b/', '/a/b')).toBe(true);
    expect(isSameOrInside('/a/b', '/a/b/')).toBe(true);
    expect(isSameOrInside('/a/bc', '/a/b')).toBe(false);
    expect(isSameOrInside('/a', '/a/b')).toBe(false);
    expect(isSameOrInside('/x/y', '/')).toBe(true);
    expect(isSameOrInside('/a/b/../../c', '/a')).toBe(false);
  });

  it('isSameOrInside fails closed on relative input', () => {
    expect(isSameOrInside('a/b', 'a')).toBe(false);
    expect(isSameOrInside('/a/b', 'a')).toBe(false);
  });

  it('treesOverlap is symmetric: equal, ancestor and descendant overlap', () => {
    expect(treesOverlap('/w/repo', '/w/repo')).toBe(true);
    expect(treesOverlap('/w', '/w/repo/src')).toBe(true);
    expect(treesOverlap('/w/repo/src', '/w')).toBe(true);
  });

  it('treesOverlap: siblings and prefix-named siblings do not overlap', () => {
    expect(treesOverlap('/w/repo', '/w/repo2')).toBe(false);
    expect(treesOverlap('/w/repo2', '/w/repo')).toBe(false);
    expect(treesOverlap('/w/a', '/w/b')).toBe(false);
  });
});
