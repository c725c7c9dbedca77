import type { ChildProcess } from 'node:child_process';
import type { Writable } from 'node:stream';

/**
 * Writes `bytes` to a child spawned with a pipe as its fd 3 and closes our
 * end: bwrap reads its seccomp program from there to EOF before it starts
 * the command. A child that died first reports it by its exit, not here.
 */
export function handFd3(child: ChildProcess, bytes: Uint8Array): void {
  const pipe = child.stdio[3] as Writable | null | undefined;
  if (!pipe) throw new Error('the child was spawned without a pipe on fd 3');
  pipe.on('error', () => undefined);
  pipe.end(Buffer.from(bytes));
}
