/**
 * `droid-mcp restore --from ARCHIVE --config FILE`: puts a `droid-mcp backup`
 * archive back. Where each part goes comes from the operator, never from the
 * archive: the config at FILE names the state directory and the token file,
 * the environment names droid's home, and the archive's manifest must name
 * exactly those (a crafted manifest cannot point a restore elsewhere). The
 * archive is read whole first: it may hold only those parts, as plain files,
 * folders and symlinks that point inside them (no hard links, devices or
 * FIFOs). Each part is extracted next to its place (`<path>.restoring-<time>`),
 * then what is there is moved aside (`<path>.before-restore-<time>`; for the
 * state directory, its entries) and the extracted copy renamed in, so nothing
 * mixes and a failed extraction changes nothing. Refuses while a server holds the state directory, and holds its
 * startup lock throughout so none starts meanwhile; refuses another host,
 * user, HOME or FACTORY_HOME_OVERRIDE than the archive's.
 */
import { mkdir, readdir, rename, rm, rmdir } from 'node:fs/promises';
import { homedir, hostname } from 'node:os';
import { dirname, isAbsolute, join, posix } from 'node:path';
import { factoryDirOf } from '../../shared/host-paths.js';
import { exists } from '../../util/exists.js';
import { LISTING_ARGS, memberOf, parseListing, tar } from './archive.js';
import { STARTUP_LOCK } from '../../store/startup-lock.js';
import { holdingState, inside as isInside, MANIFEST, manifestSchema, partsOf, stamp, type Manifest } from './backup.js';
import { command, CommandFailure, CommandRefusal } from '../command.js';
import { readConfigFile } from '../config-file.js';
import { out } from '../output.js';

async function readManifest(archive: string): Promise<Manifest> {
  const run = await tar(['--extract', '--gzip', `--file=${archive}`, '--to-stdout', MANIFEST]);
  if (run.code !== 0) throw new CommandRefusal(`${archive} is not a droid-mcp backup (tar: ${run.stderr || `exit ${run.code}`})`);
  let parsed;
  try {
    parsed = manifestSchema.safeParse(JSON.parse(run.stdout));
  } catch {
    parsed = undefined;
  }
  if (!parsed?.success) throw new CommandRefusal(`${archive} holds a ${MANIFEST} this build cannot read`);
  return parsed.data;
}

/** The manifest must name exactly the places the operator's config and environment name. */
async function refuseOtherPlaces(m: Manifest, configPath: string, archive: string): Promise<void> {
  const file = await readConfigFile(configPath).catch((err: unknown) => {
    const how = `umask 077; tar -xzOf ${archive} ${memberOf(m.config)} > ${configPath}`;
    throw new CommandRefusal(
      `${err instanceof Error ? err.message : String(err)}. restore puts the archive back where this config says; write it first (init, or the archive's copy: ${how})`,
    );
  });
  const here = { config: configPath, tokenFile: file.tokenFile ?? null, stateDirectory: file.stateDirectory, factoryDir: factoryDirOf(process.env) };
  for (const key of ['config', 'tokenFile', 'stateDirectory', 'factoryDir'] as const) {
    const theirs = m[key];
    if (theirs === null || theirs === here[key]) continue;
    throw new CommandRefusal(
      `${archive} holds ${key} ${theirs}, but ${key === 'factoryDir' ? "droid's home here is" : `${configPath} names`} ${here[key] ?? 'none'}; nothing was changed. Restore only onto the places the backup came from`,
    );
  }
  const parts = partsOf(m);
  const nested = parts.find((a) => parts.some((b) => a !== b && isInside(a, b)));
  if (nested !== undefined) throw new CommandRefusal(`${archive} names ${nested} inside another of its parts; nothing was changed`);
}

/** The archive read whole (its gzip checksum checked): the manifest and the named parts, all there, nothing else, no link out of them. */
async function checkMembers(archive: string, manifest: Manifest): Promise<void> {
  const run = await tar([...LISTING_ARGS, '--gzip', `--file=${archive}`]);
  if (run.code !== 0) throw new CommandRefusal(`${archive} cannot be read whole (tar: ${run.stderr || `exit ${run.code}`}); nothing was changed`);
  const parts = partsOf(manifest);
  const refuse = (why: string): never => {
    throw new CommandRefusal(`${archive} ${why}; nothing was changed`);
  };
  const seen = new Set<string>();
  for (const member of parseListing(run.stdout)) {
    if (member === undefined) refuse('has a listing line this build cannot read');
    const { type, name, target } = member!;
    if (name === MANIFEST) continue;
    const path = `/${name.replace(/\/$/, '')}`;
    const part = parts.find((p) => isInside(path, p));
    if (part === undefined) refuse(`holds ${name}, which its manifest does not name`);
    seen.add(part!);
    if (type === 'h') refuse(`holds a hard link, ${name} (backup never writes one)`);
    if (type === 'l') {
      const to = posix.resolve(dirname(path), target ?? '');
      if (!parts.some((p) => isInside(to, p))) refuse(`holds a symlink, ${name}, to ${target}, outside what it restores`);
    } else if (type !== '-' && type !== 'd') refuse(`holds ${name}, neither a file, a folder nor a symlink`);
  }
  const missing = parts.find((p) => !seen.has(p));
  if (missing !== undefined) refuse(`lacks ${missing}, which its manifest names`);
}

function refuseOtherIdentity(m: Manifest): void {
  const here = { hostname: hostname(), home: homedir(), factoryHomeOverride: process.env.FACTORY_HOME_OVERRIDE ?? null };
  if (m.hostname === here.hostname && m.home === here.home && m.factoryHomeOverride === here.factoryHomeOverride) return;
  throw new CommandRefusal(
    `the archive was made on host ${m.hostname} with HOME ${m.home} and FACTORY_HOME_OVERRIDE ${m.factoryHomeOverride ?? 'unset'}; ` +
      `this is ${here.hostname}, HOME ${here.home}, FACTORY_HOME_OVERRIDE ${here.factoryHomeOverride ?? 'unset'}. ` +
      'Restore it as that user with that environment: its state is bound to them (state_owned_elsewhere otherwise); onto another host, see HANDOFF step 8',
  );
}

/** A BRE for tar's --transform that matches `text` literally, `,` being the delimiter. */
const literal = (text: string): string => text.replace(/[.[\]*^$\\,]/g, '\\$&');

/** Extracts every part next to its place; on failure removes what it extracted. */
async function extractStaged(archive: string, parts: string[], staged: (part: string) => string): Promise<void> {
  for (const part of parts) if (await exists(staged(part))) throw new CommandRefusal(`${staged(part)} already exists; run again in a second`);
  // Names only (flags rSH): a symlink keeps its target, and there are no hard links.
  const transforms = parts.map((p) => `--transform=s,^${literal(memberOf(p))},${memberOf(staged(p)).replace(/[\\&,]/g, '\\$&')},rSH`);
  const run = await tar([
    '--extract',
    '--gzip',
    `--file=${archive}`,
    '--preserve-permissions',
    '--keep-old-files',
    ...transforms,
    '-C',
    '/',
    ...parts.map(memberOf),
  ]);
  if (run.code === 0) return;
  for (const part of parts) await rm(staged(part), { recursive: true, force: true });
  throw new CommandFailure(`tar could not extract ${archive} (exit ${run.code}: ${run.stderr}); nothing was changed`);
}

/**
 * The state directory's entries moved aside and the extracted ones in, the
 * directory itself (and the startup lock this restore holds in it) staying:
 * moving the directory would take the lock along, and releasing it at its
 * old path would remove the lock of a server starting on the new one.
 */
async function swapContents(dir: string, staged: string, aside: string): Promise<void> {
  await mkdir(aside, { mode: 0o700 });
  for (const name of await readdir(dir)) if (name !== STARTUP_LOCK) await rename(join(dir, name), join(aside, name));
  for (const name of await readdir(staged)) await rename(join(staged, name), join(dir, name));
  await rmdir(staged);
}

/** Moves each part aside and its extracted copy in; on failure says exactly where everything is. */
async function swapIn(parts: string[], state: string, staged: (part: string) => string, aside: (part: string) => string): Promise<string[]> {
  const movedAside: string[] = [];
  const done: string[] = [];
  try {
    for (const part of parts) {
      if (part === state && (await exists(part))) {
        movedAside.push(aside(part));
        await swapContents(part, staged(part), aside(part));
      } else {
        if (await exists(part)) {
          await rename(part, aside(part));
          movedAside.push(aside(part));
        }
        await rename(staged(part), part);
      }
      done.push(part);
    }
  } catch (err) {
    const left = parts.filter((p) => !done.includes(p)).map((p) => `${staged(p)} (extracted, not yet in place)`);
    throw new CommandFailure(
      `could not put the restored copy in place (${err instanceof Error ? err.message : String(err)}). Restored: ${done.join(', ') || 'none'}; moved aside: ${movedAside.join(', ') || 'none'}; left: ${left.join(', ')}`,
    );
  }
  return movedAside;
}

async function restore(archive: string, configPath: string, at = new Date()): Promise<{ manifest: Manifest; movedAside: string[] }> {
  if (!isAbsolute(archive) || !isAbsolute(configPath)) throw new CommandRefusal('--from and --config must be absolute paths');
  if (!(await exists(archive))) throw new CommandRefusal(`${archive} does not exist`);
  const manifest = await readManifest(archive);
  refuseOtherIdentity(manifest);
  await refuseOtherPlaces(manifest, configPath, archive);
  await checkMembers(archive, manifest);
  const parts = partsOf(manifest);
  const staged = (part: string): string => `${part}.restoring-${stamp(at)}`;
  const aside = (part: string): string => `${part}.before-restore-${stamp(at)}`;
  for (const part of parts) if (await exists(aside(part))) throw new CommandRefusal(`${aside(part)} already exists; run again in a second`);
  const state = manifest.stateDirectory;
  const job = async (): Promise<string[]> => {
    await extractStaged(archive, parts, staged);
    return swapIn(parts, state, staged, aside);
  };
  // A first restore onto a new host has no state directory, and so no startup lock, to hold.
  const movedAside = (await exists(state)) ? await holdingState(state, 'restore', job) : await job();
  return { manifest, movedAside };
}

export const restoreCommand = command({
  usage: ['--from /abs/droid-mcp-<time>.tgz --config /abs/config.json'],
  summary: ['put a backup back where the config says it came from, moving', 'what is there aside first (modes kept); refuses while the', 'server runs'],
  options: { from: { type: 'string' }, config: { type: 'string' } },
  async run(values) {
    if (!values.from || !values.config)
      throw new CommandRefusal('--from /absolute/path/to/archive.tgz and --config /absolute/path/to/config.json are required');
    const { manifest, movedAside } = await restore(values.from, values.config);
    out(`restored from ${values.from} (made ${manifest.createdAt}):`);
    for (const part of partsOf(manifest)) out(`  ${part}`);
    if (movedAside.length > 0) out('moved aside first (remove them once the restore is checked):');
    for (const path of movedAside) out(`  ${path}`);
    out(`Next: droid-mcp doctor --config ${manifest.config}, then start the server.`);
    return 0;
  },
});
