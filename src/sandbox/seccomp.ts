/**
 * The seccomp filter every sandboxed process runs under (bubblewrap loads it
 * with `--seccomp FD`), as a classic BPF program built from a table. Pure.
 *
 * Why a filter at all: a turn's commands are droid's children, same user,
 * same PID namespace. Without one, `pidfd_getfd` took droid's stdout and
 * `PTRACE_SEIZE` on droid succeeded (measured, docs/PROTOCOL-NOTES.md), so a command
 * could write protocol frames to the worker; and `connect()` on a Unix
 * socket reached the host's daemons (tmux, a plain listener) through a
 * read-only bind. Denied calls fail with EPERM, so programs see an ordinary
 * refusal (glibc's nscd lookup falls back, git and npm carry on); a foreign
 * architecture (e.g. the i386 ABI through `int 0x80`) or an x32 call kills
 * the process, because its numbers mean other calls.
 *
 * The list follows the same ideas as Flatpak's default filter: no tracing or
 * reading another process's memory or descriptors, no kernel keyring, no
 * BPF, perf or userfaultfd, no mounts, no io_uring (its operations bypass
 * the argument checks below), no terminal injection. Sockets by allowlist:
 * `socket()` only for IPv4, IPv6 and netlink (so no `AF_UNIX` to the host's
 * daemons, and none of the kernel's rarer families); `socketpair()` only of
 * stream or seqpacket type (droid's tools need pipes and socket pairs; a
 * datagram pair, which the kernel also makes of SOCK_RAW, can `sendto` any
 * named or abstract datagram socket of the host).
 */

export type SeccompArch = 'x86_64' | 'aarch64';

/** `uname -m` / `process.arch` to our names. */
export function seccompArchOf(nodeArch: string): SeccompArch | null {
  if (nodeArch === 'x64' || nodeArch === 'x86_64') return 'x86_64';
  if (nodeArch === 'arm64' || nodeArch === 'aarch64') return 'aarch64';
  return null;
}

/** linux/audit.h: EM_* | __AUDIT_ARCH_64BIT | __AUDIT_ARCH_LE. */
export const AUDIT_ARCH: Record<SeccompArch, number> = { x86_64: 0xc000003e, aarch64: 0xc00000b7 };

/**
 * Every call the filter decides, with its numbers (unistd tables; checked against libseccomp's
 * `scmp_sys_resolver` in test/wire/sandbox/seccomp.test.ts). `null`: the call does
 * not exist on that architecture.
 */
export const SYSCALLS = {
  ptrace: [101, 117],
  process_vm_readv: [310, 270],
  process_vm_writev: [311, 271],
  pidfd_getfd: [438, 438],
  kcmp: [312, 272],
  perf_event_open: [298, 241],
  bpf: [321, 280],
  userfaultfd: [323, 282],
  keyctl: [250, 219],
  add_key: [248, 217],
  request_key: [249, 218],
  mount: [165, 40],
  umount2: [166, 39],
  pivot_root: [155, 41],
  move_mount: [429, 429],
  open_tree: [428, 428],
  fsopen: [430, 430],
  fsconfig: [431, 431],
  fsmount: [432, 432],
  fspick: [433, 433],
  mount_setattr: [442, 442],
  io_uring_setup: [425, 425],
  io_uring_enter: [426, 426],
  io_uring_register: [427, 427],
  syslog: [103, 116],
  acct: [163, 89],
  quotactl: [179, 60],
  kexec_load: [246, 104],
  kexec_file_load: [320, 294],
  init_module: [175, 105],
  finit_module: [313, 273],
  delete_module: [176, 106],
  uselib: [134, null],
  socket: [41, 198],
  socketpair: [53, 199],
  ioctl: [16, 29],
} as const satisfies Record<string, readonly [number, number | null]>;

export type SyscallName = keyof typeof SYSCALLS;

export const AF_UNIX = 1;
const AF_INET = 2;
const AF_INET6 = 10;
const AF_NETLINK = 16;
const SOCK_STREAM = 1;
const SOCK_SEQPACKET = 5;
/** linux/net.h: the type bits of socket()/socketpair()'s second argument. */
const SOCK_TYPE_MASK = 0xf;
export const TIOCSTI = 0x5412;
export const TIOCLINUX = 0x541c;
export const EPERM = 1;

/**
 * A call denied outright, or decided by one argument's low 32 bits (masked):
 * denied when they equal one of `deny`, or unless they equal one of `allowOnly`.
 */
export interface SeccompRule {
  syscall: SyscallName;
  arg?: { index: number; mask?: number } & ({ deny: readonly number[] } | { allowOnly: readonly number[] });
}

/** Calls decided by an argument; every other call in SYSCALLS is denied outright. */
const ARGUMENT_RULES: readonly SeccompRule[] = [
  // The kernel reads these as int / unsigned int: the low 32 bits are the whole value.
  { syscall: 'socket', arg: { index: 0, allowOnly: [AF_INET, AF_INET6, AF_NETLINK] } },
  { syscall: 'socketpair', arg: { index: 1, mask: SOCK_TYPE_MASK, allowOnly: [SOCK_STREAM, SOCK_SEQPACKET] } },
  { syscall: 'ioctl', arg: { index: 1, deny: [TIOCSTI, TIOCLINUX] } },
];

/** What every sandboxed process is refused (THREAT-MODEL.md lists why): the table is the policy. */
export const DENY_RULES: readonly SeccompRule[] = [
  ...(Object.keys(SYSCALLS) as SyscallName[]).filter((name) => !ARGUMENT_RULES.some((r) => r.syscall === name)).map((syscall): SeccompRule => ({ syscall })),
  ...ARGUMENT_RULES,
];

// linux/filter.h, linux/seccomp.h
const LD_W_ABS = 0x20;
const ALU_AND_K = 0x54;
const JEQ_K = 0x15;
const JGE_K = 0x35;
const RET_K = 0x06;
const RET_KILL_PROCESS = 0x80000000;
const RET_ERRNO = 0x00050000;
const RET_ALLOW = 0x7fff0000;
/** struct seccomp_data: nr, arch, instruction_pointer, args[6] (little-endian: low word first). */
const OFFSET_NR = 0;
const OFFSET_ARCH = 4;
const argLowOffset = (index: number) => 16 + 8 * index;
/** x86_64 x32 ABI calls carry this bit. */
const X32_SYSCALL_BIT = 0x40000000;

export interface BpfInstruction {
  code: number;
  jt: number;
  jf: number;
  k: number;
}

const stmt = (code: number, k: number): BpfInstruction => ({ code, jt: 0, jf: 0, k: k >>> 0 });
const jump = (code: number, k: number, jt: number, jf: number): BpfInstruction => {
  if (jt > 255 || jf > 255) throw new Error('seccomp: jump offset over 255');
  return { code, jt, jf, k: k >>> 0 };
};

function archBlock(arch: SeccompArch, rules: readonly SeccompRule[]): BpfInstruction[] {
  const deny = stmt(RET_K, RET_ERRNO | EPERM);
  const out: BpfInstruction[] = [stmt(LD_W_ABS, OFFSET_NR)];
  if (arch === 'x86_64') out.push(jump(JGE_K, X32_SYSCALL_BIT, 0, 1), stmt(RET_K, RET_KILL_PROCESS));
  // One syscall, one group: either "deny", or "check the argument, then allow".
  for (const rule of rules) {
    const index = arch === 'x86_64' ? 0 : 1;
    const nr = SYSCALLS[rule.syscall][index];
    if (nr === null) continue;
    if (!rule.arg) {
      out.push(jump(JEQ_K, nr, 0, 1), deny);
      continue;
    }
    const body: BpfInstruction[] = [stmt(LD_W_ABS, argLowOffset(rule.arg.index))];
    if (rule.arg.mask !== undefined) body.push(stmt(ALU_AND_K, rule.arg.mask));
    if ('deny' in rule.arg) {
      for (const value of rule.arg.deny) body.push(jump(JEQ_K, value, 0, 1), deny);
      body.push(stmt(RET_K, RET_ALLOW));
    } else {
      const allow = stmt(RET_K, RET_ALLOW);
      for (const value of rule.arg.allowOnly) body.push(jump(JEQ_K, value, 0, 1), allow);
      body.push(deny);
    }
    out.push(jump(JEQ_K, nr, 0, body.length), ...body);
  }
  out.push(stmt(RET_K, RET_ALLOW));
  return out;
}

/**
 * The whole program: the architecture is checked first, then each
 * architecture's own numbers. A program for one architecture only is
 * enough on a host (the kernel reports the caller's ABI in `arch`).
 */
export function buildSeccompProgram(arches: readonly SeccompArch[], rules: readonly SeccompRule[] = DENY_RULES): BpfInstruction[] {
  const blocks = arches.map((arch) => archBlock(arch, rules));
  const program: BpfInstruction[] = [stmt(LD_W_ABS, OFFSET_ARCH)];
  // A chain of "arch == A? jump to A's block", then "kill"; the blocks follow in order.
  let blockStart = 1 + arches.length + 1;
  arches.forEach((arch, i) => {
    const next = 1 + i + 1; // where a jump at index 1 + i lands with offset 0
    program.push(jump(JEQ_K, AUDIT_ARCH[arch], blockStart - next, 0));
    blockStart += blocks[i].length;
  });
  program.push(stmt(RET_K, RET_KILL_PROCESS));
  for (const block of blocks) program.push(...block);
  return program;
}

/** struct sock_filter[]: u16 code, u8 jt, u8 jf, u32 k, little-endian (both supported arches). */
export function encodeProgram(program: readonly BpfInstruction[]): Buffer {
  const buf = Buffer.alloc(program.length * 8);
  program.forEach((ins, i) => {
    buf.writeUInt16LE(ins.code, i * 8);
    buf.writeUInt8(ins.jt, i * 8 + 2);
    buf.writeUInt8(ins.jf, i * 8 + 3);
    buf.writeUInt32LE(ins.k, i * 8 + 4);
  });
  return buf;
}

const hostFilters = new Map<SeccompArch, Buffer>();

/** The encoded filter for this host's architecture (built once); null where we have no table (the sandbox then refuses to run). */
export function hostSeccompFilter(nodeArch: string = process.arch): Buffer | null {
  const arch = seccompArchOf(nodeArch);
  if (!arch) return null;
  let filter = hostFilters.get(arch);
  if (!filter) hostFilters.set(arch, (filter = encodeProgram(buildSeccompProgram([arch]))));
  return filter;
}
