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
 */
import { copyFileSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** droid's files of one session (the `.bak` and lock folders droid makes again as it needs them). */
const SESSION_FILE_SUFFIXES = ['.jsonl', '.settings.json'] as const;
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

/**
 * Makes the private copy: empty for a new session, else this session's files
 * from the workspace's folder. `factoryDir/sessions` itself is created when
 * missing (bwrap binds onto an existing path only).
 */
export function prepareSessionCopy(factoryDir: string, workspace: string, resumeId: string | null): SessionCopy {
  const realSessions = join(factoryDir, 'sessions');
  mkdirSync(realSessions, { recursive: true, mode: 0o700 });
  const folder = sessionFolderName(workspace);
  const dir = mkdtempSync(join(tmpdir(), 'droid-mcp-sessions-'));
  try {
    const privateFolder = join(dir, folder);
    mkdirSync(privateFolder, { mode: 0o700 });
    if (resumeId !== null && SESSION_ID.test(resumeId)) {
      for (const suffix of SESSION_FILE_SUFFIXES) {
        const source = join(realSessions, folder, resumeId + suffix);
        if (isRegularFile(source)) copyFileSync(source, join(privateFolder, resumeId + suffix));
      }
    }
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  return {
    dir,
    commit(droidSessionId) {
      const result: SessionCopyResult = { copied: [], refused: [] };
      for (const entry of safeList(dir)) if (entry !== folder) result.refused.push(`${entry}: not this workspace's folder`);
      const privateFolder = join(dir, folder);
      const valid = droidSessionId !== null && SESSION_ID.test(droidSessionId);
      for (const name of safeList(privateFolder)) {
        const ours = valid && SESSION_FILE_SUFFIXES.some((suffix) => name === droidSessionId + suffix);
        if (!ours) {
          // droid's own by-products of this session (a .bak, lock folders) go quietly.
          if (!(valid && name.startsWith(`${droidSessionId}.`))) result.refused.push(`${name}: not a file of this session`);
          continue;
        }
        const source = join(privateFolder, name);
        if (!isRegularFile(source)) {
          result.refused.push(`${name}: not a regular file`);
          continue;
        }
        const targetFolder = join(realSessions, folder);
        mkdirSync(targetFolder, { recursive: true, mode: 0o700 });
        const temp = join(targetFolder, `.${name}.droid-mcp-${process.pid}.tmp`);
        copyFileSync(source, temp);
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
