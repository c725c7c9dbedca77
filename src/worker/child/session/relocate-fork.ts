/**
 * A fork that runs elsewhere than its source (issue 40: a fork into a
 * checkout of its own). droid records a session's working directory in the
 * first line of its transcript and runs every later turn there, whatever
 * the process's own directory; a fork inherits its source's (measured on
 * 0.225.2). droid's own way to move a session (change_working_directory)
 * needs the folder trusted in the operator's settings, which a turn never
 * changes, so the fork's files are moved here: its first line names the new
 * directory, and its files go to that directory's folder. Only the fork is
 * touched, and only in the shape measured; anything else is refused.
 */
import { constants } from 'node:fs';
import { mkdir, open, readFile, rename, rmdir, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { DroidError } from '../../../droid/errors.js';
import { sessionFolderName } from '../../../sandbox/session-copy.js';

/** droid's transcript stays under this to be moved (the sessions copy's own cap). */
const MAX_TRANSCRIPT_BYTES = 256 * 1024 * 1024;

function unexpected(why: string): DroidError {
  return new DroidError('session_power_failed', `droid's fork cannot be moved to the fork's checkout: ${why}; nothing was submitted`);
}

/**
 * Moves droid session `id`, recorded in `from`, to `to`, inside `sessionsDir`
 * (droid's sessions folder as this turn's droid sees it).
 */
export async function relocateFork(sessionsDir: string, id: string, from: string, to: string): Promise<void> {
  const fromFolder = join(sessionsDir, sessionFolderName(from));
  const toFolder = join(sessionsDir, sessionFolderName(to));
  const transcript = join(fromFolder, `${id}.jsonl`);
  const text = await readBounded(transcript);
  const newline = text.indexOf('\n');
  const first = newline < 0 ? text : text.slice(0, newline);
  let start: Record<string, unknown>;
  try {
    start = JSON.parse(first) as Record<string, unknown>;
  } catch {
    throw unexpected('its first line is not JSON');
  }
  if (start.type !== 'session_start' || start.id !== id || (start.cwd !== from && start.lastCwd !== from)) {
    throw unexpected('its first line is not the session start droid 0.225 writes');
  }
  const { lastCwd: _previous, ...rest } = start;
  const moved = JSON.stringify({ ...rest, cwd: to }) + (newline < 0 ? '' : text.slice(newline));
  await mkdir(toFolder, { recursive: true, mode: 0o700 });
  await writeFile(join(toFolder, `${id}.jsonl`), moved, { mode: 0o600, flag: 'wx' });
  await rename(join(fromFolder, `${id}.settings.json`), join(toFolder, `${id}.settings.json`)).catch((err: NodeJS.ErrnoException) => {
    if (err.code !== 'ENOENT') throw err;
  });
  await unlink(transcript);
  // The source's folder droid made for the fork goes when empty (a sandboxed turn's copy keeps only the fork's).
  await rmdir(fromFolder).catch(() => undefined);
}

/** The file's text, read by descriptor (no link followed), refused beyond the cap. */
async function readBounded(path: string): Promise<string> {
  let handle;
  try {
    handle = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW);
  } catch (err) {
    throw unexpected(`its transcript is not where droid keeps it (${(err as NodeJS.ErrnoException).code ?? 'unreadable'})`);
  }
  try {
    const info = await handle.stat();
    if (!info.isFile() || info.size > MAX_TRANSCRIPT_BYTES) throw unexpected('its transcript is not a regular file of bounded size');
    return await readFile(handle, 'utf8');
  } finally {
    await handle.close();
  }
}
