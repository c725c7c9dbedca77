/**
 * A sandboxed turn's private view of droid's `sessions/` folder.
 *
 * droid keeps each session as `sessions/<workspace path, "/" → "-">/<id>.jsonl`
 * plus `<id>.settings.json`, written by atomic rename inside that folder and
 * guarded by lock folders beside them (measured with strace on 0.225.2), so
 * no bind can open one session's files and not its neighbours'. Instead the
 * turn gets a private folder holding copies of only its own session's files;
 * when the turn's process group is gone, the controller's side of the worker
 * (runner.ts) copies back only that session's regular files, into the folder
 * droid named for this workspace, by rename. Whatever else the turn left
 * there (another session's id, symlinks, folders) is dropped with the copy.
 * So no turn can read or rewrite another session's transcript, which a later
 * resume of that session would load as its input.
 *
 * The copy is also committed when the turn's result arrives (its processes
 * may still run: every read is by descriptor, no symlink followed, no FIFO
 * waited on), so a controller that dies after recording the result leaves a
 * session that resumes; and a copy left by a controller that died mid-turn
 * is committed at the next start (recoverSessionCopies), so droid's own
 * history of that turn is where an operator looks for it.
 */
import { closeSync, constants, fstatSync, lstatSync, mkdirSync, openSync, readdirSync, readSync, renameSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { privateTmpRoot } from './sandbox.js';

/** droid's files of one session (the `.bak` and lock folders droid makes again as it needs them). */
const SESSION_FILE_SUFFIXES = ['.jsonl', '.settings.json'] as const;
/** A session file bigger than this is not copied back (a turn could fill droid's home otherwise). */
const MAX_SESSION_FILE_BYTES = 512 * 1024 * 1024;
const COPY_PREFIX = 'sessions-';
/** droid's session ids are UUIDs: anything else is never a file name we build. */
const SESSION_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The folder droid keeps a workspace's sessions in (measured: every "/" becomes "-"). Pure. */
export function sessionFolderName(workspace: string): string {
  return workspace.replaceAll('/', '-');
}

export interface SessionCopyResult {
  /** File names copied back into droid's sessions folder. */
  copied: string[];
  /** What was found but not copied back, and why. */
  refused: string[];
}

export interface SessionCopy {
  /** Bound as `<factoryDir>/sessions` inside the sandbox. */
  readonly dir: string;
  /** Copies this session's own files back; call once the turn's processes are gone. */
  commit(droidSessionId: string | null): SessionCopyResult;
  /** Removes the private copy. */
  dispose(): void;
}

function isRegularFile(path: string): boolean {
  try {
    return lstatSync(path).isFile();
  } catch {
    return false;
  }
}

function isRealDirectory(path: string): boolean {
  try {
    return lstatSync(path).isDirectory();
  } catch {
    return false;
  }
}

/**
 * Copies `source` to `target` by descriptor: a symlink is not followed, a
 * FIFO not waited on, anything but a regular file of bounded size refused.
 * Returns why it was refused, or null.
 */
function copyRegularFile(source: string, target: string): string | null {
  let fd: number;
  try {
    fd = openSync(source, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ELOOP' ? 'not a regular file' : `unreadable (${(err as NodeJS.ErrnoException).code ?? 'error'})`;
  }
  try {
    const info = fstatSync(fd);
    if (!info.isFile()) return 'not a regular file';
    if (info.size > MAX_SESSION_FILE_BYTES) return `larger than ${MAX_SESSION_FILE_BYTES} bytes`;
    const out = openSync(target, 'w', 0o600);
    try {
      const buffer = Buffer.alloc(1024 * 1024);
      let copied = 0;
      for (let n; (n = readSync(fd, buffer, 0, buffer.length, null)) > 0; ) {
        copied += n;
        if (copied > MAX_SESSION_FILE_BYTES) return `larger than ${MAX_SESSION_FILE_BYTES} bytes`;
        writeSync(out, buffer, 0, n);
      }
    } finally {
      closeSync(out);
    }
    return null;
  } finally {
    closeSync(fd);
  }
}

/**
 * Makes the private copy, `sessions-<runId>` in the private temp root: empty
 * for a new session, else this session's files from the workspace's folder.
 */
export function prepareSessionCopy(factoryDir: string, workspace: string, resumeId: string | null, runId: string): SessionCopy {
  const realSessions = join(factoryDir, 'sessions');
  const folder = sessionFolderName(workspace);
  if (!/^[A-Za-z0-9-]{1,100}$/.test(runId)) throw new Error(`not a run id: ${JSON.stringify(runId)}`);
  const dir = join(privateTmpRoot(), COPY_PREFIX + runId);
  mkdirSync(dir, { mode: 0o700 });
  try {
    const privateFolder = join(dir, folder);
    mkdirSync(privateFolder, { mode: 0o700 });
    if (resumeId !== null && SESSION_ID.test(resumeId)) {
      for (const suffix of SESSION_FILE_SUFFIXES) {
        const source = join(realSessions, folder, resumeId + suffix);
        if (isRegularFile(source)) {
          const refused = copyRegularFile(source, join(privateFolder, resumeId + suffix));
          if (refused !== null) throw new Error(`${source} cannot be given to the turn: ${refused}`);
        }
      }
    }
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  return openSessionCopy(dir, realSessions, folder);
}

function openSessionCopy(dir: string, realSessions: string, folder: string): SessionCopy {
  return {
    dir,
    commit(droidSessionId) {
      const result: SessionCopyResult = { copied: [], refused: [] };
      for (const entry of safeList(dir)) if (entry !== folder) result.refused.push(`${entry}: not this workspace's folder`);
      const privateFolder = join(dir, folder);
      const valid = droidSessionId !== null && SESSION_ID.test(droidSessionId);
      if (!isRealDirectory(privateFolder)) {
        if (safeList(privateFolder).length || isRegularFile(privateFolder)) result.refused.push(`${folder}: not a folder`);
        return result;
      }
      for (const name of safeList(privateFolder)) {
        const ours = valid && SESSION_FILE_SUFFIXES.some((suffix) => name === droidSessionId + suffix);
        if (!ours) {
          // droid's own by-products of this session (a .bak, lock folders) go quietly.
          if (!(valid && name.startsWith(`${droidSessionId}.`))) result.refused.push(`${name}: not a file of this session`);
          continue;
        }
        const targetFolder = join(realSessions, folder);
        mkdirSync(targetFolder, { recursive: true, mode: 0o700 });
        const temp = join(targetFolder, `.${name}.droid-mcp-${process.pid}.tmp`);
        const refused = copyRegularFile(join(privateFolder, name), temp);
        if (refused !== null) {
          rmSync(temp, { force: true });
          result.refused.push(`${name}: ${refused}`);
          continue;
        }
        renameSync(temp, join(targetFolder, name));
        result.copied.push(name);
      }
      return result;
    },
    dispose: () => rmSync(dir, { recursive: true, force: true }),
  };
}

function safeList(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

/** What the store knows of a run whose copy a dead controller left. */
export interface CopyOwner {
  droidSessionId: string | null;
  workspace: string;
}

/**
 * At start-up: commits and removes the sessions copies a controller that
 * died left in the private temp root, and those turns' TMPDIRs, for runs
 * this state knows (`owner` answers null for the rest, which may be another
 * controller's).
 */
export function recoverSessionCopies(factoryDir: string, owner: (runId: string) => CopyOwner | null): Array<{ runId: string } & SessionCopyResult> {
  const root = privateTmpRoot();
  const recovered: Array<{ runId: string } & SessionCopyResult> = [];
  for (const name of safeList(root)) {
    if (!name.startsWith(COPY_PREFIX)) continue;
    const runId = name.slice(COPY_PREFIX.length);
    const run = owner(runId);
    if (!run) continue;
    const dir = join(root, name);
    const copy = openSessionCopy(dir, join(factoryDir, 'sessions'), sessionFolderName(run.workspace));
    try {
      recovered.push({ runId, ...copy.commit(run.droidSessionId) });
    } finally {
      copy.dispose();
      // The turn's TMPDIR (sandbox.ts makeTurnTmp) goes with it.
      rmSync(join(root, `turn-${runId}`), { recursive: true, force: true });
    }
  }
  return recovered;
}
