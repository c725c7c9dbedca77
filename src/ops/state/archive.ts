/**
 * The system `tar` (GNU tar, gzip) behind `backup` and `restore`: it keeps
 * modes, owners and symlinks, and an operator can read or extract an archive
 * with it by hand. Run with umask 077, so whatever it creates is private.
 */
import { spawn } from 'node:child_process';
import { CommandRefusal } from '../command.js';

const STDERR_LIMIT = 4_000;

export interface TarRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs tar; `stdoutFd`: an open file that receives its standard output (the archive of `--file=-`). */
export function tar(args: readonly string[], stdoutFd?: number): Promise<TarRun> {
  const previous = process.umask(0o077);
  try {
    return new Promise((resolve, reject) => {
      // LC_ALL=C: listings in the words parseListing reads.
      const child = spawn('tar', args, { stdio: ['ignore', stdoutFd ?? 'pipe', 'pipe'], env: { ...process.env, LC_ALL: 'C' } });
      let stdout = '';
      let stderr = '';
      child.stdout?.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
      child.stderr?.setEncoding('utf8').on('data', (chunk: string) => (stderr = (stderr + chunk).slice(-STDERR_LIMIT)));
      child.once('error', (err: NodeJS.ErrnoException) => {
        reject(err.code === 'ENOENT' ? new CommandRefusal('the system tar is not on PATH; install it (Debian: apt-get install tar gzip)') : err);
      });
      child.once('close', (code) => resolve({ code: code ?? 1, stdout, stderr: stderr.trim() }));
    });
  } finally {
    process.umask(previous);
  }
}

/** A path as a member name: archives hold absolute paths relative to `/`, extracted with `-C /`. */
export const memberOf = (path: string): string => path.replace(/^\/+/, '');

/** One member of an archive's verbose listing: its type (tar's letter: `-`, `d`, `l`, `h`, ...), name and link target. */
export interface Member {
  type: string;
  name: string;
  /** A symlink's target (`l`) or the member a hard link names (`h`). */
  target: string | undefined;
}

/** Undoes tar's `--quoting-style=c`: backslash escapes and octal bytes (a UTF-8 name is octal byte by byte). */
function unquote(quoted: string): string {
  const bytes: number[] = [];
  const simple: Record<string, number> = { n: 10, t: 9, r: 13, a: 7, b: 8, f: 12, v: 11 };
  for (let i = 0; i < quoted.length; i++) {
    const ch = quoted[i]!;
    if (ch !== '\\') {
      bytes.push(...Buffer.from(ch, 'utf8'));
      continue;
    }
    const next = quoted[++i] ?? '';
    const octal = /^[0-7]{1,3}/.exec(quoted.slice(i))?.[0];
    if (octal) {
      bytes.push(parseInt(octal, 8));
      i += octal.length - 1;
    } else bytes.push(simple[next] ?? next.charCodeAt(0));
  }
  return Buffer.from(bytes).toString('utf8');
}

const QUOTED = '"((?:[^"\\\\]|\\\\.)*)"';
const LISTING_LINE = new RegExp(`^(\\S)\\S*\\s+\\S+\\s+\\S+\\s+\\S+\\s+\\S+\\s+${QUOTED}(?:\\s+(?:->|link to)\\s+${QUOTED})?$`);

/** The lines of `tar --list --verbose --quoting-style=c --numeric-owner` (LC_ALL=C); undefined for a line it cannot read. */
export function parseListing(stdout: string): Array<Member | undefined> {
  return stdout
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => {
      const m = LISTING_LINE.exec(line);
      if (!m) return undefined;
      return { type: m[1]!, name: unquote(m[2]!), target: m[3] === undefined ? undefined : unquote(m[3]) };
    });
}

/** Listing options that parseListing reads. */
export const LISTING_ARGS = ['--list', '--verbose', '--quoting-style=c', '--numeric-owner'] as const;
