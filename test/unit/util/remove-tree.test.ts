/**
 * removeTree against what a hostile turn can leave: a folder its owner may
 * not list or unlink. As a service user that is not root, `rmSync` throws
 * EACCES there (measured), and in the controller that was an unhandled
 * rejection. Root is not refused, so as root the check runs as `nobody`.
 */
import { spawnSync } from 'node:child_process';
import { chownSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { REPO_ROOT } from '../../support/paths.js';

const CHILD = `
import { mkdirSync, writeFileSync, chmodSync, rmSync, existsSync } from 'node:fs';
const { removeTree } = await import(process.argv[3]);
const dir = process.argv[2] + '/tree';
mkdirSync(dir + '/inner/deeper', { recursive: true });
writeFileSync(dir + '/inner/deeper/x', 'x');
chmodSync(dir + '/inner/deeper', 0o500);
chmodSync(dir + '/inner', 0o000);
let plain = 'removed';
try { rmSync(dir, { recursive: true, force: true }); } catch (e) { plain = e.code; }
console.log(JSON.stringify({ plain, removeTree: await removeTree(dir), gone: !existsSync(dir) }));
`;

it('removes a folder its owner may not list or unlink, where rmSync throws, and never rejects', () => {
  const base = mkdtempSync(join(tmpdir(), 'remove-tree-'));
  try {
    const asNobody = process.getuid?.() === 0;
    if (asNobody) chownSync(base, 65534, 65534);
    const script = join(base, 'child.mjs');
    writeFileSync(script, CHILD, { mode: 0o644 });
    const run = spawnSync(process.execPath, [script, base, join(REPO_ROOT, 'dist/src/util/remove-tree.js')], {
      encoding: 'utf8',
      ...(asNobody && { uid: 65534, gid: 65534 }),
    });
    expect(run.stderr).toBe('');
    expect(JSON.parse(run.stdout)).toEqual({ plain: 'EACCES', removeTree: null, gone: true });
  } finally {
    rmSync(base, { recursive: true, force: true });
  }
});
