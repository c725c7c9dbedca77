import { describe, expect, it } from 'vitest';
import { bwrapArgs } from '../../src/worker/sandbox.js';

const base = { workspace: '/w', factoryDir: '/h/.factory', turnTmp: '/tmp/t', hiddenDirs: ['/state'], hiddenFiles: ['/token'] };

describe('bwrapArgs', () => {
  it('binds after the read-only root, hides secrets last, and never starts a new session', () => {
    const args = bwrapArgs({ ...base, workspaceWritable: true });
    const at = (flag: string, path: string) => args.findIndex((a, i) => a === flag && args[i + 1] === path);
    const root = at('--ro-bind', '/');
    expect(root).toBeGreaterThanOrEqual(0);
    for (const bind of [at('--bind', '/w'), at('--bind', '/h/.factory'), at('--bind', '/tmp/t'), at('--ro-bind', '/proc/sys')]) expect(bind).toBeGreaterThan(root);
    expect(at('--tmpfs', '/state')).toBeGreaterThan(at('--bind', '/w'));
    expect(args.indexOf('--remount-ro')).toBeGreaterThan(at('--tmpfs', '/state'));
    expect(args.slice(args.indexOf('/dev/null') - 1, args.indexOf('/dev/null') + 2)).toEqual(['--ro-bind', '/dev/null', '/token']);
    expect(args).toContain('--die-with-parent');
    expect(args).toContain('--unshare-pid');
    expect(args.slice(args.indexOf('--cap-drop'), args.indexOf('--cap-drop') + 2)).toEqual(['--cap-drop', 'ALL']);
    expect(args).not.toContain('--new-session');
    expect(args).not.toContain('--unshare-net');
    expect(args.slice(-3)).toEqual(['--chdir', '/w', '--']);
  });

  it('a read-only turn binds its workspace read-only', () => {
    const args = bwrapArgs({ ...base, workspaceWritable: false });
    expect(args.findIndex((a, i) => a === '--ro-bind' && args[i + 1] === '/w')).toBeGreaterThan(0);
    expect(args.findIndex((a, i) => a === '--bind' && args[i + 1] === '/w')).toBe(-1);
  });
});
