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
 * resume of that session would load as its input (within one workspace, see
 * THREAT-MODEL.md on the workspace's own `.factory/`).
 *
 * Every read is by descriptor (no symlink followed, no FIFO waited on), off
 * the event loop. A copy left by a controller that died is committed at the
 * next start (recoverSessionCopies): a session whose result was recorded
 * before the crash resumes, and droid's own history of a turn that ended
 * unknown is where an operator looks for it.
 */
import { constants, copyFileSync, lstatSync, mkdirSync, readdirSync, rmSync } from 'node:fs';
import { mkdir, open, opendir, rename, rm, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { removeTree } from '../util/remove-tree.js';
import { privateTmpRoot, TURN_TMP_PREFIX } from './turn-paths.js';

/** droid's files of one session (the `.bak` and lock folders droid makes again as it needs them). */
const SESSION_FILE_SUFFIXES = ['.jsonl', '.settings.json'] as const;
/** Caps on what comes back: a transcript can grow long; settings are a few KB. */
const MAX_BYTES: Record<(typeof SESSION_FILE_SUFFIXES)[number], number> = { '.jsonl': 256 * 1024 * 1024, '.settings.json': 1024 * 1024 };
/** Files above this are checked for holes. */
const SPARSE_CHECK_BYTES = 1024 * 1024;
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
  /**
   * Copies the session's files in from droid's folder (a new session: nothing); synchronous, before droid loads it.
   * `fromWorkspace`: the session was recorded in another workspace (a fork's source, issue 40): read from that one's folder.
   */
  fill(resumeId: string | null, fromWorkspace?: string): void;
  /**
   * Copies this session's own files back (safe while the turn's processes still run); never blocks the event loop.
   * `fresh`: a session droid made in this turn (a fork, rewind or compaction, issue 40), which never replaces files droid's folder already has.
   */
  commit(droidSessionId: string | null, fresh?: boolean): Promise<SessionCopyResult>;
  /** Removes the private copy; never rejects (it says why it could not). */
  dispose(): Promise<string | null>;
}

/** What is at `path` itself (no link followed), or null when nothing is. */
function kindOf(path: string): 'file' | 'folder' | 'other' | null {
  try {
    const info = lstatSync(path);
    return info.isFile() ? 'file' : info.isDirectory() ? 'folder' : 'other';
  } catch {
    return null;
  }
}

/**
 * Copies `source` (in the turn's copy) to `target` by descriptor, on the
 * thread pool: a symlink is not followed, a FIFO not waited on, and
 * anything but a regular, non-sparse file of bounded size is refused (a
 * sparse file costs the turn nothing and us the whole copy). Returns why it
 * was refused, or null; a failed copy leaves no temp file.
 */
async function copyRegularFile(source: string, target: string, maxBytes: number): Promise<string | null> {
  let from: FileHandle;
  try {
    from = await open(source, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ELOOP' ? 'not a regular file' : `unreadable (${(err as NodeJS.ErrnoException).code ?? 'error'})`;
  }
  try {
    const info = await from.stat();
    if (!info.isFile()) return 'not a regular file';
    if (info.size > maxBytes) return `larger than ${maxBytes} bytes`;
    if (info.size > SPARSE_CHECK_BYTES && info.blocks * 512 < info.size / 2) return 'a sparse file';
    const to = await open(target, 'w', 0o600);
    let done = false;
    try {
      const buffer = Buffer.alloc(1024 * 1024);
      let copied = 0;
      for (let n; (n = (await from.read(buffer, 0, buffer.length, null)).bytesRead) > 0;) {
        copied += n;
        if (copied > maxBytes) return `larger than ${maxBytes} bytes`;
        await to.write(buffer, 0, n);
      }
      done = true;
      return null;
    } finally {
      await to.close();
      if (!done) await rm(target, { force: true }).catch(() => undefined);
    }
  } catch (err) {
    await rm(target, { force: true }).catch(() => undefined);
    return `not copied (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`;
  } finally {
    await from.close();
  }
}

/** At most this many names of what the turn left in its copy are reported (a turn can leave millions). */
const MAX_REPORTED = 20;

async function firstNames(dir: string, limit: number): Promise<string[]> {
  const names: string[] = [];
  try {
    const handle = await opendir(dir);
    for await (const entry of handle) {
      names.push(entry.name);
      if (names.length >= limit) break;
    }
  } catch {
    // gone or not a folder: nothing to report
  }
  return names;
}

/**
 * Makes the private copy, `sessions-<runId>` in the private temp root: empty
 * for a new session, else this session's files from the workspace's folder.
 */
export function prepareSessionCopy(factoryDir: string, workspace: string, resumeId: string | null, runId: string): SessionCopy {
  const copy = emptySessionCopy(factoryDir, workspace, runId);
  try {
    copy.fill(resumeId);
  } catch (err) {
    rmSync(copy.dir, { recursive: true, force: true });
    throw err;
  }
  return copy;
}

/**
 * The private copy with nothing in it yet: a droid may be started on it
 * before the session's previous turn has been copied back, and `fill`
 * puts the session's files in once it has (runner.ts).
 */
export function emptySessionCopy(factoryDir: string, workspace: string, runId: string): SessionCopy {
  const folder = sessionFolderName(workspace);
  if (!/^[A-Za-z0-9-]{1,100}$/.test(runId)) throw new Error(`not a run id: ${JSON.stringify(runId)}`);
  const dir = join(privateTmpRoot(), COPY_PREFIX + runId);
  mkdirSync(dir, { mode: 0o700 });
  try {
    mkdirSync(join(dir, folder), { mode: 0o700 });
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  return openSessionCopy(dir, join(factoryDir, 'sessions'), folder);
}

function openSessionCopy(dir: string, realSessions: string, folder: string): SessionCopy {
  return {
    dir,
    fill(resumeId, fromWorkspace) {
      if (resumeId === null || !SESSION_ID.test(resumeId)) return;
      const from = fromWorkspace === undefined ? folder : sessionFolderName(fromWorkspace);
      for (const suffix of SESSION_FILE_SUFFIXES) {
        const source = join(realSessions, from, resumeId + suffix);
        // droid's own files on the host (no turn writes there): a plain copy.
        if (kindOf(source) === 'file') copyFileSync(source, join(dir, folder, resumeId + suffix));
      }
    },
    async commit(droidSessionId, fresh = false) {
      const result: SessionCopyResult = { copied: [], refused: [] };
      const refuse = (what: string) => {
        if (result.refused.length < MAX_REPORTED) result.refused.push(what);
      };
      for (const entry of await firstNames(dir, MAX_REPORTED + 1)) if (entry !== folder) refuse(`${entry}: not this workspace's folder`);
      const privateFolder = join(dir, folder);
      const valid = droidSessionId !== null && SESSION_ID.test(droidSessionId);
      const kind = kindOf(privateFolder);
      if (kind !== 'folder') {
        if (kind !== null) refuse(`${folder}: not a folder`);
        return result;
      }
      // Only this session's two files are looked at; the rest is named (a few) and dropped with the copy.
      for (const name of await firstNames(privateFolder, MAX_REPORTED * 4)) {
        if (!(valid && name.startsWith(`${droidSessionId}.`))) refuse(`${name}: not a file of this session`);
      }
      if (!valid) return result;
      const targetFolder = join(realSessions, folder);
      for (const suffix of SESSION_FILE_SUFFIXES) {
        const name = droidSessionId + suffix;
        const source = join(privateFolder, name);
        if (kindOf(source) === null) continue;
        if (fresh && kindOf(join(targetFolder, name)) !== null) {
          refuse(`${name}: droid's sessions folder already has it, and a session made in this turn replaces none`);
          continue;
        }
        await mkdir(targetFolder, { recursive: true, mode: 0o700 });
        const temp = join(targetFolder, `.${name}.droid-mcp-${process.pid}.tmp`);
        const refused = await copyRegularFile(source, temp, MAX_BYTES[suffix]);
        if (refused !== null) {
          refuse(`${name}: ${refused}`);
          continue;
        }
        await rename(temp, join(targetFolder, name));
        result.copied.push(name);
      }
      return result;
    },
    dispose: () => removeTree(dir),
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
export async function recoverSessionCopies(
  factoryDir: string,
  owner: (runId: string) => CopyOwner | null,
): Promise<Array<{ runId: string } & SessionCopyResult>> {
  const root = privateTmpRoot();
  const recovered: Array<{ runId: string } & SessionCopyResult> = [];
  const names = safeList(root);
  for (const name of names) {
    if (!name.startsWith(COPY_PREFIX)) continue;
    const runId = name.slice(COPY_PREFIX.length);
    const run = owner(runId);
    if (!run) continue;
    const copy = openSessionCopy(join(root, name), join(factoryDir, 'sessions'), sessionFolderName(run.workspace));
    // Each copy on its own: one that cannot be read or removed does not stop the others.
    const result = await copy.commit(run.droidSessionId).catch((err: unknown) => ({ copied: [], refused: [`copy-back failed: ${(err as Error).message}`] }));
    const left = [await copy.dispose(), await removeTree(join(root, `${TURN_TMP_PREFIX}${runId}`))].filter((problem) => problem !== null);
    recovered.push({ runId, ...result, refused: [...result.refused, ...left.map((problem) => `not removed: ${problem}`)] });
  }
  const listed = new Set(names);
  // A TMPDIR whose copy was already gone: the two are removed side by side, and a kill can land between.
  for (const name of names) {
    const runId = name.startsWith(TURN_TMP_PREFIX) ? name.slice(TURN_TMP_PREFIX.length) : null;
    if (runId && !listed.has(`${COPY_PREFIX}${runId}`) && owner(runId)) await removeTree(join(root, name));
  }
  return recovered;
}
