/**
 * The seccomp program (src/sandbox/seccomp.ts), checked three ways:
 * - its syscall numbers against libseccomp's own tables (`scmp_sys_resolver`,
 *   Debian package `seccomp`, installed by .ci/run), for both architectures;
 * - by the kernel, which validates it at load and runs it: under bwrap with
 *   the turn's flags, every denied call whose unfiltered answer differs from
 *   EPERM answers EPERM, and its permitted neighbours do not;
 * - by a small classic-BPF evaluator, for the structure of both architectures'
 *   blocks (the aarch64 block cannot run on this host).
 */
import { execFileSync, spawn } from 'node:child_process';
import { handFd3 } from '../../../src/util/child-fd3.js';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  AF_UNIX,
  AUDIT_ARCH,
  buildSeccompProgram,
  DENY_RULES,
  encodeProgram,
  EPERM,
  SYSCALLS,
  TIOCLINUX,
  TIOCSTI,
  type BpfInstruction,
  type SeccompArch,
} from '../../../src/sandbox/seccomp.js';
import { bwrapArgs } from '../../../src/sandbox/bwrap-args.js';
import { probeSandbox } from '../../../src/sandbox/probe.js';
import { sandboxLauncher } from '../../../src/sandbox/sandbox.js';
import { prepareTurnPaths } from '../../../src/sandbox/turn-paths.js';

const ALLOW = 0x7fff0000;
const KILL = 0x80000000;
const DENY = 0x00050000 | EPERM;

function resolve(arch: SeccompArch, name: string): number | null {
  const out = execFileSync('scmp_sys_resolver', ['-a', arch, name], { encoding: 'utf8' }).trim();
  const n = Number(out);
  return n < 0 ? null : n;
}

describe('seccomp: syscall numbers', () => {
  for (const arch of ['x86_64', 'aarch64'] as const) {
    it(`every number in the table is libseccomp's for ${arch}`, () => {
      const index = arch === 'x86_64' ? 0 : 1;
      const wrong = Object.entries(SYSCALLS).filter(([name, nrs]) => resolve(arch, name) !== nrs[index]);
      expect(wrong).toEqual([]);
    });
  }
});

/** Runs a program over one seccomp_data (little-endian: each argument's low word first). */
function evaluate(program: readonly BpfInstruction[], data: { arch: number; nr: number; args?: number[] }): number {
  const word = (offset: number): number => {
    if (offset === 0) return data.nr >>> 0;
    if (offset === 4) return data.arch >>> 0;
    const arg = (offset - 16) / 8;
    if (!Number.isInteger(arg)) throw new Error(`load of the high word at ${offset}`);
    return (data.args?.[arg] ?? 0) >>> 0;
  };
  let a = 0;
  for (let pc = 0; pc < program.length; pc++) {
    const ins = program[pc];
    if (ins.code === 0x20) a = word(ins.k);
    else if (ins.code === 0x54) a = (a & ins.k) >>> 0;
    else if (ins.code === 0x15) pc += a === ins.k ? ins.jt : ins.jf;
    else if (ins.code === 0x35) pc += a >= ins.k ? ins.jt : ins.jf;
    else if (ins.code === 0x06) return ins.k;
    else throw new Error(`unknown opcode ${ins.code}`);
  }
  throw new Error('fell off the end');
}

describe('seccomp: the program', () => {
  const program = buildSeccompProgram(['x86_64', 'aarch64']);
  for (const arch of ['x86_64', 'aarch64'] as const) {
    const index = arch === 'x86_64' ? 0 : 1;
    const nr = (name: keyof typeof SYSCALLS) => SYSCALLS[name][index]!;
    const run = (name: keyof typeof SYSCALLS | number, args?: number[]) =>
      evaluate(program, { arch: AUDIT_ARCH[arch], nr: typeof name === 'number' ? name : nr(name), args });

    it(`${arch}: every plain rule denies with EPERM; other calls pass`, () => {
      for (const rule of DENY_RULES.filter((r) => !r.arg && SYSCALLS[r.syscall][index] !== null)) expect(run(rule.syscall), rule.syscall).toBe(DENY);
      for (const allowed of arch === 'x86_64' ? [0, 1, 2, 57, 59, 231] : [63, 64, 56, 220, 221, 94]) expect(run(allowed)).toBe(ALLOW);
    });

    it(`${arch}: sockets by allowlist (IPv4, IPv6, netlink; stream and seqpacket pairs) and terminal injection denied`, () => {
      expect(run('socket', [AF_UNIX, 1])).toBe(DENY);
      expect(run('socket', [2, 1])).toBe(ALLOW); // AF_INET
      expect(run('socket', [10, 2])).toBe(ALLOW); // AF_INET6, datagram
      expect(run('socket', [16, 3])).toBe(ALLOW); // AF_NETLINK
      for (const family of [17, 38, 40, 0x10000 | 2]) expect(run('socket', [family, 1]), `family ${family}`).toBe(DENY); // packet, alg, vsock, junk high bits
      expect(run('socketpair', [AF_UNIX, 2 | 0x80000])).toBe(DENY); // SOCK_DGRAM | SOCK_CLOEXEC
      expect(run('socketpair', [AF_UNIX, 3])).toBe(DENY); // SOCK_RAW: the kernel makes a datagram pair of it
      expect(run('socketpair', [AF_UNIX, 1 | 0x80000])).toBe(ALLOW); // SOCK_STREAM | SOCK_CLOEXEC
      expect(run('socketpair', [AF_UNIX, 5 | 0x800])).toBe(ALLOW); // SOCK_SEQPACKET | SOCK_NONBLOCK
      expect(run('ioctl', [0, TIOCSTI])).toBe(DENY);
      expect(run('ioctl', [0, TIOCLINUX])).toBe(DENY);
      expect(run('ioctl', [0, 0x5413])).toBe(ALLOW); // TIOCGWINSZ
    });
  }

  it('a foreign architecture and the x32 ABI are killed', () => {
    expect(evaluate(program, { arch: 0x40000003, nr: 26 })).toBe(KILL); // i386: its 26 is ptrace
    expect(evaluate(program, { arch: AUDIT_ARCH.x86_64, nr: 0x40000000 | 101 })).toBe(KILL);
    expect(evaluate(program, { arch: AUDIT_ARCH.aarch64, nr: 0x40000000 | 117 })).toBe(ALLOW); // no x32 on aarch64: an unknown number
  });

  it('encodes as struct sock_filter (8 bytes, little-endian)', () => {
    const bytes = encodeProgram([{ code: 0x15, jt: 1, jf: 2, k: 0xc000003e }]);
    expect([...bytes]).toEqual([0x15, 0x00, 0x01, 0x02, 0x3e, 0x00, 0x00, 0xc0]);
  });
});

describe('seccomp: the kernel runs it (x86_64 and aarch64 hosts)', () => {
  const bwrap = execFileSync('sh', ['-c', 'command -v bwrap'], { encoding: 'utf8' }).trim();
  const index = process.arch === 'arm64' ? 1 : 0;
  const nr = (name: keyof typeof SYSCALLS) => SYSCALLS[name][index]!;
  // Calls whose unfiltered answer is not EPERM here (bad descriptors, pids, pointers), so EPERM proves the filter.
  const probes: Array<[string, string]> = [
    ['ptrace', `syscall(${nr('ptrace')}, 16, 999999, 0, 0)`],
    ['process_vm_readv', `syscall(${nr('process_vm_readv')}, 999999, 0, 0, 0, 0, 0)`],
    ['process_vm_writev', `syscall(${nr('process_vm_writev')}, 999999, 0, 0, 0, 0, 0)`],
    ['pidfd_getfd', `syscall(${nr('pidfd_getfd')}, -1, 0, 0)`],
    ['kcmp', `syscall(${nr('kcmp')}, 999999, 999999, 0, 0, 0)`],
    ['perf_event_open', `syscall(${nr('perf_event_open')}, 0, 0, -1, -1, 0)`],
    ['userfaultfd', `syscall(${nr('userfaultfd')}, -1)`],
    ['keyctl', `syscall(${nr('keyctl')}, 99999, 0, 0, 0, 0)`],
    ['add_key', `syscall(${nr('add_key')}, 0, 0, 0, 0, 0)`],
    ['request_key', `syscall(${nr('request_key')}, 0, 0, 0, 0)`],
    ['io_uring_setup', `syscall(${nr('io_uring_setup')}, 0, 0)`],
    ['open_tree', `syscall(${nr('open_tree')}, -1, 0, 0)`],
    ['socket_unix', `syscall(${nr('socket')}, 1, 1, 0)`],
    ['socketpair_dgram', `syscall(${nr('socketpair')}, 1, 2, 0, $sv)`],
    ['socketpair_raw', `syscall(${nr('socketpair')}, 1, 3, 0, $sv)`],
    ['socket_vsock', `syscall(${nr('socket')}, 40, 1, 0)`],
    ['ioctl_tiocsti', `syscall(${nr('ioctl')}, -1, ${TIOCSTI}, 0)`],
    // Neighbours that must still work, or fail for their own reasons.
    ['socket_inet', `syscall(${nr('socket')}, 2, 1, 0)`],
    ['socketpair_stream', `syscall(${nr('socketpair')}, 1, 1, 0, $sv)`],
    ['ioctl_other', `syscall(${nr('ioctl')}, -1, 0x5413, 0)`],
  ];
  const perl =
    'my $sv = "\\0" x 8; ' +
    probes.map(([name, call]) => `$! = 0; my $r_${name} = ${call}; print "${name}=", ($r_${name} >= 0 ? "ok" : $! + 0), "\\n";`).join(' ');

  const runIn = async (withFilter: boolean): Promise<Record<string, string>> => {
    const root = mkdtempSync(join(tmpdir(), 'seccomp-kernel-'));
    let cleanup = () => {};
    try {
      const factoryDir = join(root, 'home', '.factory');
      mkdirSync(factoryDir, { recursive: true });
      const { turnTmp, dispose } = prepareTurnPaths(factoryDir);
      cleanup = dispose;
      const confinement = { workspace: null, factoryDir, factoryEntries: [], sessionsCopy: null, turnTmp, runtimeDir: null, hiddenDirs: [], hiddenFiles: [] };
      const launcher = sandboxLauncher(bwrap, confinement);
      const args = withFilter ? launcher.args : bwrapArgs(confinement).filter((a, i, all) => a !== '--seccomp' && all[i - 1] !== '--seccomp');
      const child = spawn(launcher.command, [...args, '/usr/bin/perl', '-e', perl], { stdio: ['ignore', 'pipe', 'inherit', 'pipe'] });
      handFd3(child, launcher.fd3);
      let stdout = '';
      child.stdout!.setEncoding('utf8').on('data', (d: string) => (stdout += d));
      await new Promise((resolve) => child.once('close', resolve));
      return Object.fromEntries(
        stdout
          .trim()
          .split('\n')
          .filter(Boolean)
          .map((line) => line.split('=') as [string, string]),
      );
    } finally {
      cleanup();
      rmSync(root, { recursive: true, force: true });
    }
  };

  it('every distinguishable denied call answers EPERM under the filter and something else without it', async () => {
    const filtered = await runIn(true);
    const unfiltered = await runIn(false);
    const denied = probes.map(([name]) => name).filter((name) => !['socket_inet', 'socketpair_stream', 'ioctl_other'].includes(name));
    for (const name of denied) {
      expect(filtered[name], `${name} filtered`).toBe(String(EPERM));
      expect(unfiltered[name], `${name} unfiltered`).not.toBe(String(EPERM));
    }
    expect(filtered.socket_inet).toBe('ok');
    expect(filtered.socketpair_stream).toBe('ok');
    expect(filtered.ioctl_other).toBe('9'); // EBADF: the call reached the kernel
  });
});

describe('seccomp: the start-up trial run', () => {
  const bwrap = execFileSync('sh', ['-c', 'command -v bwrap'], { encoding: 'utf8' }).trim();

  it('passes with the real bwrap, and fails when the filter is not loaded', async () => {
    expect(await probeSandbox(bwrap)).toEqual({ ok: true, detail: null });
    // A bwrap that drops `--seccomp 3`: the sandbox runs, the filter does not.
    const dir = mkdtempSync(join(tmpdir(), 'seccomp-probe-'));
    try {
      const fake = join(dir, 'bwrap');
      writeFileSync(
        fake,
        `#!/bin/sh\nfor a; do shift; if [ "$skip" = 1 ]; then skip=0; continue; fi; if [ "$a" = --seccomp ]; then skip=1; continue; fi; set -- "$@" "$a"; done\nexec ${bwrap} "$@"\n`,
        { mode: 0o755 },
      );
      const health = await probeSandbox(fake);
      expect(health.ok).toBe(false);
      expect(health.detail).toContain('seccomp filter did not load');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
