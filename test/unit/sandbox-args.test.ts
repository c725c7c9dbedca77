import { describe, expect, it } from 'vitest';
import { bwrapArgs, confinedEnv, judgeProbe, type Confinement } from '../../src/worker/sandbox.js';

const base: Confinement = {
  workspace: { path: '/w', writable: true },
  factoryDir: '/h/.factory',
  sessionsCopy: '/tmp/s',
  scratch: true,
  turnTmp: '/tmp/t',
  runtimeDir: '/run/user/7',
  hiddenDirs: ['/state'],
  hiddenFiles: ['/token'],
};
const pairAt = (args: string[], flag: string, path: string) => args.findIndex((a, i) => a === flag && args[i + 1] === path);

describe('bwrapArgs', () => {
  it('binds after the read-only root, hides secrets last, and never starts a new session', () => {
    const args = bwrapArgs(base);
    const at = (flag: string, path: string) => pairAt(args, flag, path);
    const root = at('--ro-bind', '/');
    expect(root).toBeGreaterThanOrEqual(0);
    for (const bind of [at('--bind', '/w'), at('--bind', '/tmp/t'), at('--ro-bind', '/proc/sys')]) expect(bind).toBeGreaterThan(root);
    expect(at('--tmpfs', '/state')).toBeGreaterThan(at('--bind', '/w'));
    expect(args.slice(args.indexOf('/dev/null') - 1, args.indexOf('/dev/null') + 2)).toEqual(['--ro-bind', '/dev/null', '/token']);
    expect(args).toContain('--die-with-parent');
    expect(args).toContain('--unshare-pid');
    expect(args).toContain('--disable-userns');
    expect(args.slice(args.indexOf('--cap-drop'), args.indexOf('--cap-drop') + 2)).toEqual(['--cap-drop', 'ALL']);
    expect(args).not.toContain('--new-session');
    expect(args).not.toContain('--unshare-net');
    expect(args.slice(-5)).toEqual(['--seccomp', '3', '--chdir', '/w', '--']);
  });

  it("droid's home stays read-only: only the private sessions copy and per-turn scratch tmpfs are writable there", () => {
    const args = bwrapArgs(base);
    expect(pairAt(args, '--bind', '/h/.factory')).toBe(-1);
    expect(args.slice(pairAt(args, '--bind', '/tmp/s'), pairAt(args, '--bind', '/tmp/s') + 3)).toEqual(['--bind', '/tmp/s', '/h/.factory/sessions']);
    for (const dir of ['cache', 'temp', 'snapshots', 'bin']) expect(pairAt(args, '--tmpfs', `/h/.factory/${dir}`)).toBeGreaterThan(0);
    const writable = args.flatMap((a, i) => (a === '--bind' ? [args[i + 2]] : []));
    expect(writable.sort()).toEqual(['/h/.factory/sessions', '/tmp/t', '/w']);
  });

  it('/proc, /dev/shm and the runtime directory are read-only', () => {
    const args = bwrapArgs(base);
    expect(pairAt(args, '--remount-ro', '/proc')).toBeGreaterThan(pairAt(args, '--proc', '/proc'));
    expect(pairAt(args, '--remount-ro', '/dev/shm')).toBeGreaterThan(pairAt(args, '--tmpfs', '/dev/shm'));
    expect(pairAt(args, '--remount-ro', '/run/user/7')).toBeGreaterThan(pairAt(args, '--tmpfs', '/run/user/7'));
  });

  it('a runtime directory holding a bound folder is left alone (covering it would hide the turn)', () => {
    const args = bwrapArgs({ ...base, runtimeDir: '/' + 'tmp' });
    expect(pairAt(args, '--tmpfs', '/tmp')).toBe(-1);
  });

  it('a read-only turn binds its workspace read-only', () => {
    const args = bwrapArgs({ ...base, workspace: { path: '/w', writable: false } });
    expect(pairAt(args, '--ro-bind', '/w')).toBeGreaterThan(0);
    expect(pairAt(args, '--bind', '/w')).toBe(-1);
  });

  it('a catalog droid gets nothing writable but its TMPDIR, and works there', () => {
    const args = bwrapArgs({ ...base, workspace: null, sessionsCopy: null, scratch: false });
    expect(args.flatMap((a, i) => (a === '--bind' ? [args[i + 2]] : []))).toEqual(['/tmp/t']);
    expect(args.filter((a) => a.startsWith('/h/.factory'))).toEqual([]);
    expect(args.slice(-3)).toEqual(['--chdir', '/tmp/t', '--']);
  });
});

describe('confinedEnv', () => {
  it("drops every socket address of the host's daemons and keeps the rest", () => {
    const env = {
      HOME: '/h',
      PATH: '/bin',
      SSH_AUTH_SOCK: '/run/ssh',
      DBUS_SESSION_BUS_ADDRESS: 'unix:path=/run/bus',
      TMUX: '/tmp/tmux-0/default,1,0',
      STY: '1.pts',
      DISPLAY: ':0',
      WAYLAND_DISPLAY: 'wayland-0',
      XDG_RUNTIME_DIR: '/run/user/0',
      DOCKER_HOST: 'unix:///var/run/docker.sock',
    };
    expect(confinedEnv(env)).toEqual({ HOME: '/h', PATH: '/bin' });
    expect(confinedEnv({ DOCKER_HOST: 'tcp://10.0.0.1:2375' })).toEqual({ DOCKER_HOST: 'tcp://10.0.0.1:2375' });
  });
});

describe('judgeProbe (the start-up trial run)', () => {
  it('passes only when pidfd_getfd, ptrace and AF_UNIX are all refused with EPERM', () => {
    expect(judgeProbe('getfd=1 ptrace=1 unix=1\n')).toBeNull();
    expect(judgeProbe('getfd=9 ptrace=1 unix=1\n')).toContain('did not load');
    expect(judgeProbe('getfd=1 ptrace=0 unix=1\n')).toContain('ptrace');
    expect(judgeProbe('getfd=1 ptrace=1 unix=0\n')).toContain('AF_UNIX');
    expect(judgeProbe('')).toContain('no verdict');
  });
});
