/**
 * Watches, from /proc, every process a server's tree started: whatever
 * carries the run's tag in its environment (workers, bwrap, droid, its
 * commands) and every member of a process group one of them leads (the
 * sandbox's network helper starts with a clean environment). Each process
 * is remembered with when it was first and last seen running, so a kill
 * campaign can tell what outlived a killed server and for how long.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';

export interface WatchedProcess {
  pid: number;
  /** worker, bwrap, droid, netns-helper, sh, or the program's name. */
  kind: string;
  pgid: number;
  /** Its parent at the last scan that saw it (1, or a subreaper: its own parent died first). */
  ppid: number;
  /** Epoch ms of the first and the last scan that saw it running (not a zombie). */
  firstSeen: number;
  lastSeen: number;
}

interface Known {
  tagged: boolean;
  pgid: number;
  /** Field 22 of its stat line: a reused pid is another process. */
  start: string;
}

function read(path: string): string | undefined {
  try {
    return readFileSync(path, 'latin1');
  } catch {
    return undefined;
  }
}

/** State, process group and start of a /proc stat line; undefined once the process is gone. */
function statOf(pid: number): { state: string; ppid: number; pgid: number; start: string } | undefined {
  const stat = read(`/proc/${pid}/stat`);
  if (stat === undefined) return undefined;
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return { state: fields[0]!, ppid: Number(fields[1]), pgid: Number(fields[2]), start: fields[19]! };
}

/** What a process of a server's tree is, from its command line. */
function kindOf(cmdline: string): string {
  const argv = cmdline.split('\0').filter(Boolean);
  const program = (argv[0] ?? '').split('/').at(-1) ?? '';
  if (program === 'bwrap') return 'bwrap';
  if (cmdline.startsWith('droid-mcp ') || argv.some((a) => a.endsWith('/worker/child/main.cjs'))) return 'worker';
  if (argv.some((a) => a.endsWith('netns-listener.cjs'))) return 'netns-helper';
  if (argv.includes('stream-jsonrpc')) return 'droid';
  return program || '?';
}

const OWN_GROUP = statOf(process.pid)?.pgid;

export class TreeWatch {
  private readonly known = new Map<number, Known>();
  private readonly seen = new Map<string, WatchedProcess>();
  private running: WatchedProcess[] = [];
  /** Process groups a tagged process was ever seen in (a worker's: droid and the network helper are in it). */
  private readonly groups = new Set<number>();

  constructor(
    private readonly tagName: string,
    private readonly tagValue: string,
  ) {}

  /** One look at /proc; returns what runs now. */
  scan(now = Date.now()): WatchedProcess[] {
    const want = `${this.tagName}=${this.tagValue}`;
    const pids = readdirSync('/proc')
      .filter((n) => /^\d+$/.test(n) && Number(n) !== process.pid)
      .map(Number);
    const candidates: Array<{ pid: number; known: Known; state: string; ppid: number }> = [];
    for (const pid of pids) {
      const stat = statOf(pid);
      if (!stat) continue;
      let known = this.known.get(pid);
      if (!known || known.start !== stat.start) {
        const environ = read(`/proc/${pid}/environ`);
        known = { tagged: environ !== undefined && environ.split('\0').includes(want), pgid: stat.pgid, start: stat.start };
        this.known.set(pid, known);
      }
      known.pgid = stat.pgid;
      candidates.push({ pid, known, state: stat.state, ppid: stat.ppid });
    }
    // Not our own group: a server we started without detaching shares it (and carries the tag).
    for (const c of candidates) if (c.known.tagged && c.known.pgid !== OWN_GROUP) this.groups.add(c.known.pgid);
    this.running = [];
    for (const { pid, known, state, ppid } of candidates) {
      if (!(known.tagged || this.groups.has(known.pgid)) || state === 'Z' || state === 'X') continue;
      const key = `${pid}:${known.start}`;
      let entry = this.seen.get(key);
      if (!entry) {
        entry = { pid, kind: kindOf(read(`/proc/${pid}/cmdline`) ?? ''), pgid: known.pgid, ppid, firstSeen: now, lastSeen: now };
        this.seen.set(key, entry);
      }
      entry.lastSeen = now;
      entry.ppid = ppid;
      this.running.push(entry);
    }
    return this.running;
  }

  /** Every process any scan saw. */
  all(): WatchedProcess[] {
    return [...this.seen.values()];
  }
}

export interface TreeReport {
  /** What ran at the first scan at or after `from + boundMs`. */
  aliveAtBound: WatchedProcess[];
  /** Longest a process was seen running after `from`, ms (0: none was). */
  maxSurvivalMs: number;
  /** Running when the watch gave up (`giveUpMs` after `from`). */
  left: WatchedProcess[];
  /** Epoch ms of the last scan that saw any process running; null: none after `from`. */
  lastAlive: number | null;
}

/**
 * Scans every `everyMs` from now until the tree is gone and `boundMs` has
 * passed since `from` (epoch ms), or `giveUpMs` after `from`.
 */
export async function watchTree(watch: TreeWatch, from: number, { boundMs = 1_000, giveUpMs = 10_000, everyMs = 10 } = {}): Promise<TreeReport> {
  let aliveAtBound: WatchedProcess[] | null = null;
  let lastAlive: number | null = null;
  let maxSurvivalMs = 0;
  for (;;) {
    const now = Date.now();
    const running = watch.scan(now);
    if (running.length > 0 && now >= from) {
      lastAlive = now;
      maxSurvivalMs = Math.max(maxSurvivalMs, now - from);
    }
    if (aliveAtBound === null && now >= from + boundMs) aliveAtBound = [...running];
    if ((running.length === 0 && aliveAtBound !== null) || now >= from + giveUpMs)
      return { aliveAtBound: aliveAtBound ?? [...running], maxSurvivalMs, left: [...running], lastAlive };
    await sleep(everyMs);
  }
}
