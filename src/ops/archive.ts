/**
 * The system `tar` (GNU tar, gzip) behind `backup` and `restore`: it keeps
 * modes, owners and symlinks, and an operator can read or extract an archive
 * with it by hand. Run with umask 077, so whatever it creates is private.
 */
import { spawn } from 'node:child_process';
import { CommandRefusal } from './command.js';

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
      const child = spawn('tar', args, { stdio: ['ignore', stdoutFd ?? 'pipe', 'pipe'] });
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
