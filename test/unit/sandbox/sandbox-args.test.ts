import { describe, expect, it } from 'vitest';
import { bwrapArgs, confinedEnv, shownFactoryEntries, type Confinement } from '../../../src/sandbox/bwrap-args.js';
import { judgeProbe } from '../../../src/sandbox/probe.js';
import { sandboxLauncher } from '../../../src/sandbox/sandbox.js';

const base: Confinement = {
  workspace: { path: '/w', writable: true },
  factoryDir: '/h/.factory',
  factoryEntries: ['hooks', 'mcp.json', 'settings.json'],
  sessionsCopy: '/tmp/droid-mcp-0/sessions-r1',
  turnTmp: '/tmp/droid-mcp-0/turn-x',
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
    for (const bind of [at('--bind', '/w'), at('--bind', '/tmp/droid-mcp-0/turn-x'), at('--ro-bind', '/proc/sys')]) expect(bind).toBeGreaterThan(root);
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

  it("droid's home is a per-turn tmpfs with every host entry read-only on it; only the private sessions copy is bound writable", () => {
    const args = bwrapArgs(base);
    expect(pairAt(args, '--bind', '/h/.factory')).toBe(-1);
    const home = pairAt(args, '--tmpfs', '/h/.factory');
    expect(home).toBeGreaterThan(pairAt(args, '--ro-bind', '/'));
    for (const name of ['hooks', 'mcp.json', 'settings.json']) expect(pairAt(args, '--ro-bind', `/h/.factory/${name}`)).toBeGreaterThan(home);
    const copy = pairAt(args, '--bind', '/tmp/droid-mcp-0/sessions-r1');
    expect(args.slice(copy, copy + 3)).toEqual(['--bind', '/tmp/droid-mcp-0/sessions-r1', '/h/.factory/sessions']);
    const writable = args.flatMap((a, i) => (a === '--bind' ? [args[i + 2]] : []));
    expect(writable.sort()).toEqual(['/h/.factory/sessions', '/tmp/droid-mcp-0/turn-x', '/w']);
  });

  it("other turns' folders are covered: the private temp root is an empty read-only tmpfs but this turn's TMPDIR", () => {
    const args = bwrapArgs(base);
    const cover = pairAt(args, '--tmpfs', '/tmp/droid-mcp-0');
    expect(cover).toBeGreaterThan(0);
    expect(pairAt(args, '--bind', '/tmp/droid-mcp-0/turn-x')).toBeGreaterThan(cover);
    expect(pairAt(args, '--remount-ro', '/tmp/droid-mcp-0')).toBeGreaterThan(pairAt(args, '--bind', '/tmp/droid-mcp-0/turn-x'));
  });

  it('shows every entry of droid home but its scratch and sessions, and keeps the one holding droid itself', () => {
    const names = ['settings.json', 'mcp.json', 'bin', 'cache', 'sessions', 'logs', 'temp', 'snapshots', 'hooks'];
    expect(shownFactoryEntries(names, '/h/.factory')).toEqual(['hooks', 'mcp.json', 'settings.json']);
    expect(shownFactoryEntries(names, '/h/.factory', '/h/.factory/bin/droid')).toEqual(['bin', 'hooks', 'mcp.json', 'settings.json']);
    expect(shownFactoryEntries(names, '/h/.factory', '/usr/bin/droid')).toEqual(['hooks', 'mcp.json', 'settings.json']);
  });

  it('/proc, /dev, /dev/shm and the runtime directory are read-only', () => {
    const args = bwrapArgs(base);
    expect(pairAt(args, '--remount-ro', '/dev')).toBeGreaterThan(pairAt(args, '--tmpfs', '/dev/shm'));
    expect(pairAt(args, '--remount-ro', '/proc')).toBeGreaterThan(pairAt(args, '--proc', '/proc'));
    expect(pairAt(args, '--remount-ro', '/dev/shm')).toBeGreaterThan(pairAt(args, '--tmpfs', '/dev/shm'));
    expect(pairAt(args, '--remount-ro', '/run/user/7')).toBeGreaterThan(pairAt(args, '--tmpfs', '/run/user/7'));
  });

  it('a runtime directory holding a bound folder is left alone (covering it would hide the turn)', () => {
    const args = bwrapArgs({ ...base, runtimeDir: '/h' });
    expect(pairAt(args, '--tmpfs', '/h')).toBe(-1);
  });

  it('a read-only turn binds its workspace read-only', () => {
    const args = bwrapArgs({ ...base, workspace: { path: '/w', writable: false } });
    expect(pairAt(args, '--ro-bind', '/w')).toBeGreaterThan(0);
    expect(pairAt(args, '--bind', '/w')).toBe(-1);
  });

  it('a catalog droid gets nothing writable but its TMPDIR (and the throwaway home), and works there', () => {
    const args = bwrapArgs({ ...base, workspace: null, sessionsCopy: null });
    expect(args.flatMap((a, i) => (a === '--bind' ? [args[i + 2]] : []))).toEqual(['/tmp/droid-mcp-0/turn-x']);
    expect(pairAt(args, '--bind', '/h/.factory/sessions')).toBe(-1);
    expect(args.slice(-3)).toEqual(['--chdir', '/tmp/droid-mcp-0/turn-x', '--']);
  });
});

describe('bwrapArgs: reads and network (issue 37)', () => {
  const reads = {
    hidden: ['/root', '/home', '/home/svc', '/h', '/roots/a', '/roots/a/inner', '/w/nested-root'],
    readable: ['/h/.gitconfig', '/h/.factory', '/w/x', '/elsewhere', '/home/svc', '/roots'],
  };
  it('covers the outermost hidden folders before any bind, shows readable paths inside them, and makes them read-only last', () => {
    const args = bwrapArgs({ ...base, reads });
    const at = (flag: string, path: string) => pairAt(args, flag, path);
    for (const dir of ['/root', '/home', '/h', '/roots/a']) {
      expect(at('--tmpfs', dir)).toBeGreaterThan(at('--ro-bind', '/'));
      expect(at('--tmpfs', dir)).toBeLessThan(at('--bind', '/w'));
      expect(at('--remount-ro', dir)).toBeGreaterThan(at('--ro-bind', '/dev/null'));
    }
    // Nested in a covered one, or inside the workspace (the workspace's to show): not covered again.
    expect(at('--tmpfs', '/roots/a/inner')).toBe(-1);
    expect(at('--tmpfs', '/w/nested-root')).toBe(-1);
    // Shown read-only, inside a cover only, and before the turn's own binds: none of them can be covered by a shown folder
    // (a shown droid's home lies under its per-turn tmpfs).
    expect(at('--ro-bind', '/h/.gitconfig')).toBeGreaterThan(at('--tmpfs', '/h'));
    expect(at('--ro-bind', '/h/.gitconfig')).toBeLessThan(at('--bind', '/w'));
    expect(at('--ro-bind', '/h/.factory')).toBeLessThan(at('--tmpfs', '/h/.factory'));
    expect(at('--ro-bind', '/w/x')).toBe(-1);
    expect(at('--ro-bind', '/elsewhere')).toBe(-1);
    // A shown path never uncovers a hidden folder whole (a home, a root above a covered one).
    expect(at('--ro-bind', '/home/svc')).toBe(-1);
    expect(at('--ro-bind', '/roots')).toBe(-1);
    // git finds a repository whose .git sits in the covered folder above a bound workspace.
    expect(args[at('--setenv', 'GIT_DISCOVERY_ACROSS_FILESYSTEM') + 2]).toBe('1');
    expect(bwrapArgs(base)).not.toContain('GIT_DISCOVERY_ACROSS_FILESYSTEM');
  });

  it('own network: a namespace, proxy variables, no bypass list, and the listener helper before droid', () => {
    const args = bwrapArgs({ ...base, network: { nodePath: '/usr/bin/node', helperPath: '/opt/dm/netns-listener.cjs' } });
    expect(args).toContain('--unshare-net');
    for (const key of ['HTTP_PROXY', 'HTTPS_PROXY', 'ALL_PROXY', 'http_proxy', 'https_proxy', 'all_proxy'])
      expect(args[pairAt(args, '--setenv', key) + 2]).toBe('http://127.0.0.1:3128');
    expect(pairAt(args, '--unsetenv', 'NO_PROXY')).toBeGreaterThan(0);
    expect(pairAt(args, '--unsetenv', 'no_proxy')).toBeGreaterThan(0);
    const command = args.slice(args.indexOf('--') + 1);
    expect(command.slice(0, 2)).toEqual(['/bin/sh', '-c']);
    expect(command.slice(-2)).toEqual(['/usr/bin/node', '/opt/dm/netns-listener.cjs']);
    // The helper alone holds the channel; droid gets neither the descriptor nor its variable.
    expect(command[2]).toMatch(/NODE_CHANNEL_FD=4 .* 4<&4 & unset NODE_CHANNEL_FD NODE_CHANNEL_SERIALIZATION_MODE; exec 4>&-; exec "\$@"$/);
    const none = bwrapArgs({ ...base, network: 'none' });
    expect(none).toContain('--unshare-net');
    expect(none.some((a) => a.includes('PROXY'))).toBe(false);
    expect(none.at(-1)).toBe('--');
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

describe('sandboxLauncher', () => {
  it('refuses a workspace that holds or sits in droid home or the private temp root, before anything starts', () => {
    const bwrap = '/bin/true';
    const at = (path: string) => () => sandboxLauncher(bwrap, { ...base, factoryDir: '/h/.factory', workspace: { path, writable: true } });
    for (const path of ['/h', '/h/.factory', '/h/.factory/hooks', '/tmp/droid-mcp-0', '/tmp/droid-mcp-0/turn-x/sub', '/']) {
      expect(at(path), path).toThrow(/overlaps droid's home or the sandbox's private folders/);
    }
    expect(at('/w')).not.toThrow();
  });
});
