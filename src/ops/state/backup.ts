/**
 * `droid-mcp backup --config FILE --to DIR`: one private archive (mode 600,
 * made with umask 077) of everything a restore needs, named to the second
 * (`droid-mcp-<UTC time>.tgz`, never overwritten): the config, the token
 * file, the state directory and droid's home (its login, settings and the
 * sessions the state names), plus a manifest of where each came from. It
 * refuses while a server holds the state directory (they change under the
 * copy), and holds the startup lock while it reads, so none starts meanwhile.
 */
import { closeSync, fsyncSync, linkSync, openSync, unlinkSync } from 'node:fs';
import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { homedir, hostname, tmpdir } from 'node:os';
import { basename, dirname, isAbsolute, join, relative } from 'node:path';
import { z } from 'zod';
import { factoryDirOf } from '../../shared/host-paths.js';
import { StoreError } from '../../store/errors.js';
import { heldBy } from '../../store/inspect.js';
import { currentIdentity, readOwnerRecord, refuseOtherIdentity, type OwnerLock } from '../../store/owner-lock.js';
import { STARTUP_LOCK, takeStartupLock } from '../../store/startup-lock.js';
import { errCode } from '../../util/errno.js';
import { exists } from '../../util/exists.js';
import { memberOf, tar } from './archive.js';
import { command, CommandFailure, CommandRefusal, ServerRunning } from '../command.js';
import { readConfigFile } from '../config-file.js';
import { out } from '../output.js';

export const MANIFEST = 'droid-mcp-backup.json';

/** Where each part came from, and whose they are: a restore puts them back there, for the same user. */
export const manifestSchema = z.strictObject({
  format: z.literal(1),
  createdAt: z.string(),
  hostname: z.string(),
  home: z.string(),
  factoryHomeOverride: z.string().nullable(),
  /** Absolute paths of what the archive holds (absent parts are null). */
  config: z.string().startsWith('/'),
  tokenFile: z.string().startsWith('/').nullable(),
  stateDirectory: z.string().startsWith('/'),
  factoryDir: z.string().startsWith('/').nullable(),
});
export type Manifest = z.infer<typeof manifestSchema>;

/** The parts of a manifest, in restore order. */
export function partsOf(m: Manifest): string[] {
  return [m.config, m.tokenFile, m.stateDirectory, m.factoryDir].filter((p): p is string => p !== null);
}

/** The refusal of a command that must not run beside a server. */
function refuseLive(lock: OwnerLock, stateDir: string, what: string): void {
  if (lock.kind !== 'live' && lock.kind !== 'unresponsive') return;
  const who =
    lock.kind === 'unresponsive'
      ? `the server, pid ${lock.pid}, alive but unresponsive (${lock.why}),`
      : lock.pid === null
        ? 'a process that left no owner record'
        : `the server, pid ${lock.pid},`;
  throw new ServerRunning(
    `${who} holds ${stateDir}: stop it first (systemctl stop droid-mcp, or end the client that runs it over stdio), then ${what}; droid-mcp status says what it is running`,
  );
}

/** `20261202T060041Z`: UTC to the second, sortable, no character a shell or tar treats specially. */
export function stamp(at: Date): string {
  return at
    .toISOString()
    .replace(/\.\d{3}Z$/, 'Z')
    .replace(/[-:]/g, '');
}

/**
 * The state's owner record binds it to a host, HOME and Factory home; a backup
 * by anyone else would archive their droid home, not the one its sessions live
 * in. An owner record that cannot be read is backed up as it is.
 */
async function refuseOtherOwner(state: string): Promise<void> {
  const owner = await readOwnerRecord(state).catch(() => undefined);
  if (!owner) return;
  try {
    refuseOtherIdentity(state, owner, currentIdentity());
  } catch (err) {
    if (!(err instanceof StoreError)) throw err;
    throw new CommandRefusal(
      `refusing to back up (${err.code}): ${err.problem}. Run backup as the user, with the HOME and FACTORY_HOME_OVERRIDE, the server runs with`,
    );
  }
}

/** `path` is `dir` or lies under it (both absolute). */
export function inside(path: string, dir: string): boolean {
  const rel = relative(dir, path);
  return rel === '' || (rel !== '..' && !rel.startsWith('../') && !isAbsolute(rel));
}

async function manifestFor(configPath: string, at: Date): Promise<Manifest> {
  const file = await readConfigFile(configPath).catch((err: unknown) => {
    throw new CommandRefusal(err instanceof Error ? err.message : String(err));
  });
  const factoryDir = factoryDirOf(process.env);
  const tokenFile = file.tokenFile ?? null;
  return {
    format: 1,
    createdAt: at.toISOString(),
    hostname: hostname(),
    home: homedir(),
    factoryHomeOverride: process.env.FACTORY_HOME_OVERRIDE ?? null,
    config: configPath,
    tokenFile: tokenFile !== null && (await exists(tokenFile)) ? tokenFile : null,
    stateDirectory: file.stateDirectory,
    factoryDir: (await exists(factoryDir)) ? factoryDir : null,
  };
}

/**
 * Holds the state's startup lock (the one start-up takes before it claims the
 * directory) for `job`: no server can start on the state while a backup reads
 * it or a restore replaces it. A server already running is refused after.
 */
export async function holdingState<T>(state: string, what: string, job: () => Promise<T>): Promise<T> {
  let lost: Error | undefined;
  let release;
  try {
    release = await takeStartupLock(state, (err) => (lost = err));
  } catch (err) {
    if (err instanceof StoreError) throw new ServerRunning(`${err.problem}: cannot ${what} now. ${err.action}`);
    throw err;
  }
  try {
    refuseLive(await heldBy(state), state, what);
    const result = await job();
    if (lost)
      throw new CommandFailure(
        `lost the startup lock of ${state} while it ran (${lost.message}): a server may have started meanwhile; check with droid-mcp status and ${what} again`,
      );
    return result;
  } finally {
    await release().catch(() => undefined);
  }
}

/** Writes the archive of `manifest`'s parts to `archive`, never over a file of that name. */
async function writeArchive(manifest: Manifest, archive: string): Promise<void> {
  const state = manifest.stateDirectory;
  const partial = join(dirname(archive), `.${basename(archive)}.partial`);
  const scratch = await mkdtemp(join(tmpdir(), 'droid-mcp-backup-'));
  try {
    await writeFile(join(scratch, MANIFEST), `${JSON.stringify(manifest, null, 2)}\n`, { mode: 0o600 });
    // Locks are the running server's (and this backup's), never state: a restore starts without them.
    const excludes = ['owner.lock', STARTUP_LOCK].map((lock) => `--exclude=${memberOf(join(state, lock))}`);
    const fd = openSync(partial, 'wx', 0o600);
    try {
      const run = await tar(
        ['--create', '--gzip', '--file=-', '--hard-dereference', ...excludes, '-C', scratch, MANIFEST, '-C', '/', ...partsOf(manifest).map(memberOf)],
        fd,
      );
      if (run.code !== 0) throw new CommandFailure(`tar could not write the archive (exit ${run.code}: ${run.stderr}); nothing was kept`);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    // link: never replaces a file of that name that appeared meanwhile.
    linkSync(partial, archive);
  } finally {
    try {
      unlinkSync(partial);
    } catch (err) {
      if (errCode(err) !== 'ENOENT') throw err;
    }
    await rm(scratch, { recursive: true, force: true });
  }
}

async function backup(configPath: string, toDir: string, at = new Date()): Promise<{ archive: string; bytes: number; manifest: Manifest }> {
  if (!isAbsolute(configPath) || !isAbsolute(toDir)) throw new CommandRefusal('--config and --to must be absolute paths');
  const manifest = await manifestFor(configPath, at);
  if (
    !(await stat(toDir).then(
      (s) => s.isDirectory(),
      () => false,
    ))
  )
    throw new CommandRefusal(`--to ${toDir} is not an existing folder; create it first (mkdir -m 700 -p ${toDir})`);
  const within = partsOf(manifest).find((part) => inside(toDir, part));
  if (within) throw new CommandRefusal(`--to ${toDir} is inside ${within}, which the archive holds; keep backups elsewhere`);
  const state = manifest.stateDirectory;
  if (!(await exists(state))) throw new CommandRefusal(`state directory ${state} does not exist: nothing to back up`);
  await refuseOtherOwner(state);
  const archive = join(toDir, `droid-mcp-${stamp(at)}.tgz`);
  await holdingState(state, 'back up', async () => {
    // After the live-server check: a server running is the answer that matters, even within the second of a backup.
    if (await exists(archive)) throw new CommandRefusal(`${archive} already exists; backups are never overwritten (wait a second and run again)`);
    await writeArchive(manifest, archive);
  });
  return { archive, bytes: (await stat(archive)).size, manifest };
}

export const backupCommand = command({
  usage: ['--config /abs/config.json --to /abs/backup/folder'],
  summary: ['one private archive (600, named to the second) of the config,', "token, state directory and droid's home; refuses while the", 'server runs'],
  options: { config: { type: 'string' }, to: { type: 'string' } },
  async run(values) {
    if (!values.config || !values.to) throw new CommandRefusal('--config FILE and --to DIR are required');
    const { archive, bytes, manifest } = await backup(values.config, values.to);
    out(`wrote ${archive} (mode 600, ${bytes} bytes), holding:`);
    out(`  config           ${manifest.config}`);
    out(`  token file       ${manifest.tokenFile ?? '(none: stdio, or no token file yet)'}`);
    out(`  state directory  ${manifest.stateDirectory}`);
    out(`  droid's home     ${manifest.factoryDir ?? `(none: ${factoryDirOf(process.env)} does not exist)`}`);
    out(`Restore with: droid-mcp restore --from ${archive} --config ${manifest.config}`);
    return 0;
  },
});
