import { mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { componentsBelow, openBeneath } from '../../../../../src/worker/child/session/open-beneath.js';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function tree(): { root: string; outside: string } {
  const base = realpathSync(mkdtempSync(join(tmpdir(), 'beneath-')));
  dirs.push(base);
  const root = join(base, 'ws');
  mkdirSync(join(root, 'd'), { recursive: true });
  writeFileSync(join(root, 'd', 'f.txt'), 'inside\n');
  const outside = join(base, 'secret');
  mkdirSync(outside);
  writeFileSync(join(outside, 'f.txt'), 'secret\n');
  return { root, outside };
}

describe('openBeneath', () => {
  it('opens a file inside the root, and says when nothing is there', async () => {
    const { root } = tree();
    const handle = await openBeneath(root, join(root, 'd', 'f.txt'));
    expect((await handle!.readFile('utf8')).toString()).toBe('inside\n');
    await handle!.close();
    expect(await openBeneath(root, join(root, 'd', 'none.txt'))).toBeNull();
    expect(await openBeneath(root, join(root, 'none', 'f.txt'))).toBeNull();
  });

  it('never follows a link: a folder or the file itself swapped for one leads nowhere outside', async () => {
    const { root, outside } = tree();
    rmSync(join(root, 'd'), { recursive: true });
    symlinkSync(outside, join(root, 'd'));
    await expect(openBeneath(root, join(root, 'd', 'f.txt'))).rejects.toThrow();
    symlinkSync(join(outside, 'f.txt'), join(root, 'link.txt'));
    await expect(openBeneath(root, join(root, 'link.txt'))).rejects.toThrow();
  });

  it('takes only plain paths inside the root', () => {
    expect(componentsBelow('/ws', '/ws/a/b')).toEqual(['a', 'b']);
    for (const path of ['/ws/../x', '/ws', '/elsewhere/a', 'ws/a', '/ws/a/../../x', '/ws//a']) expect(componentsBelow('/ws', path), path).toBeNull();
  });
});
