/**
 * `droid-mcp restore --from ARCHIVE`: puts a `droid-mcp backup` archive back
 * where its manifest says each part came from. Each part that exists now is
 * first moved aside (`<path>.before-restore-<time>`), so nothing of it mixes
 * with the archive's copy; tar then extracts with modes kept and never
 * overwrites. Refuses while a server holds the state directory, for another
 * user, HOME or FACTORY_HOME_OVERRIDE than the archive's (the state is bound
 * to them), and for an archive that holds anything else.
 */
import { rename } from 'node:fs/promises';
import { homedir, hostname } from 'node:os';
import { isAbsolute } from 'node:path';
import { heldBy } from '../store/inspect.js';
import { exists } from '../util/exists.js';
import { memberOf, tar } from './archive.js';
import { MANIFEST, manifestSchema, partsOf, refuseLive, stamp, type Manifest } from './backup.js';
import { command, CommandRefusal } from './command.js';
import { out } from './output.js';

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

/** The archive read whole (its gzip checksum checked): it must hold the manifest and the named parts, nothing else. */
async function checkMembers(archive: string, manifest: Manifest): Promise<void> {
  const run = await tar(['--list', '--gzip', `--file=${archive}`]);
  if (run.code !== 0) throw new CommandRefusal(`${archive} cannot be read whole (tar: ${run.stderr || `exit ${run.code}`}); nothing was changed`);
  const parts = partsOf(manifest).map(memberOf);
  const stray = run.stdout
    .split('\n')
    .filter((name) => name !== '' && name !== MANIFEST)
    .find((name) => !parts.some((part) => name === part || name === `${part}/` || name.startsWith(`${part}/`)));
  if (stray !== undefined) throw new CommandRefusal(`${archive} holds ${stray}, which its manifest does not name; nothing was changed`);
}

function refuseOtherIdentity(m: Manifest): void {
  const here = { hostname: hostname(), home: homedir(), factoryHomeOverride: process.env.FACTORY_HOME_OVERRIDE ?? null };
  if (m.hostname === here.hostname && m.home === here.home && m.factoryHomeOverride === here.factoryHomeOverride) return;
  throw new CommandRefusal(
    `the archive was made on host ${m.hostname} with HOME ${m.home} and FACTORY_HOME_OVERRIDE ${m.factoryHomeOverride ?? 'unset'}; ` +
      `this is ${here.hostname}, HOME ${here.home}, FACTORY_HOME_OVERRIDE ${here.factoryHomeOverride ?? 'unset'}. ` +
      'Restore it as that user with that environment: its state is bound to them (state_owned_elsewhere otherwise)',
  );
}

async function restore(archive: string, at = new Date()): Promise<{ manifest: Manifest; movedAside: string[] }> {
  if (!isAbsolute(archive)) throw new CommandRefusal('--from must be an absolute path');
  if (!(await exists(archive))) throw new CommandRefusal(`${archive} does not exist`);
  const manifest = await readManifest(archive);
  refuseOtherIdentity(manifest);
  await checkMembers(archive, manifest);
  refuseLive(await heldBy(manifest.stateDirectory), manifest.stateDirectory, 'restore');

  const movedAside: string[] = [];
  const suffix = `.before-restore-${stamp(at)}`;
  for (const part of partsOf(manifest)) {
    if (!(await exists(part))) continue;
    if (await exists(`${part}${suffix}`)) throw new CommandRefusal(`${part}${suffix} already exists; run again in a second`);
    await rename(part, `${part}${suffix}`);
    movedAside.push(`${part}${suffix}`);
  }
  // --keep-old-files: nothing already there is ever replaced (everything that was is aside now).
  const run = await tar(['--extract', '--gzip', `--file=${archive}`, '--preserve-permissions', '--keep-old-files', '-C', '/', ...partsOf(manifest).map(memberOf)]);
  if (run.code !== 0) {
    const back = movedAside.map((p) => `mv ${p} ${p.slice(0, -suffix.length)}`).join('; ');
    throw new Error(`tar could not extract ${archive} (exit ${run.code}: ${run.stderr}); what was there before is aside${back ? `: remove what was extracted, then ${back}` : ''}`);
  }
  return { manifest, movedAside };
}

export const restoreCommand = command({
  usage: ['--from /abs/droid-mcp-<time>.tgz'],
  summary: [
    'put a backup back where it came from, moving what is there',
    'aside first (modes kept); refuses while the server runs',
  ],
  options: { from: { type: 'string' } },
  async run(values) {
    if (!values.from) throw new CommandRefusal('--from /absolute/path/to/archive.tgz is required');
    const { manifest, movedAside } = await restore(values.from);
    out(`restored from ${values.from} (made ${manifest.createdAt}):`);
    for (const part of partsOf(manifest)) out(`  ${part}`);
    if (movedAside.length > 0) out('moved aside first (remove them once the restore is checked):');
    for (const path of movedAside) out(`  ${path}`);
    out(`Next: droid-mcp doctor --config ${manifest.config}, then start the server.`);
    return 0;
  },
});
