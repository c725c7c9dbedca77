/**
 * `droid-mcp backup` / `restore` (issue 23 item 4), run as an operator would
 * against state a real server wrote: the archive is private (600) and named
 * to the second, and holds the config, the token, the state directory and
 * droid's home; a restore moves what is there aside first, so nothing that
 * was not in the archive survives in place, and keeps modes 700 / 600. Both
 * refuse while a server holds the state directory, and change nothing then.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, linkSync, mkdirSync, symlinkSync, readdirSync, readFileSync, realpathSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { runCli, sandboxKeys, treeFingerprint, type CliResult } from '../../support/cli.js';
import { privateDir, startServer, type RunningServer } from '../../support/mcp-server.js';
import { MOCK_DROID } from '../../support/paths.js';
import { stamp } from '../../../src/ops/state/backup.js';

let tmp: string;
let home: string;
let etc: string;
let state: string;
let backups: string;
let config: string;
let server: RunningServer | undefined;

const env = (): Record<string, string> => ({ PATH: process.env.PATH ?? '', HOME: home, FACTORY_HOME_OVERRIDE: home });
const mode = (path: string) => (statSync(path).mode & 0o777).toString(8);

/** PATH with a `tar` first that runs `first` (shell; `$real` is the real tar) before a run given `op`: a backup (--create) or a restore's extraction (--keep-old-files). */
function shimTar(op: '--create' | '--keep-old-files', first: string): string {
  const bin = join(tmp, 'tar-bin');
  mkdirSync(bin, { recursive: true, mode: 0o700 });
  const real = execFileSync('sh', ['-c', 'command -v tar'], { encoding: 'utf8' }).trim();
  writeFileSync(join(bin, 'tar'), `#!/bin/sh\nreal=${real}\ncase " $* " in *" ${op} "*) ${first};; esac\nexec "$real" "$@"\n`, { mode: 0o700 });
  return `${bin}:${process.env.PATH ?? ''}`;
}
const slowTar = (op: '--create' | '--keep-old-files', seconds: number): string => shimTar(op, `sleep ${seconds}`);

/** Until `check` holds, or `ms` have passed. */
async function within(ms: number, check: () => boolean): Promise<void> {
  const end = Date.now() + ms;
  while (!check() && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
}

const member = (path: string): string => path.replace(/^\/+/, '');

/** A copy of `archive` edited as an attacker (or a damaged disk) might: unpacked, changed, packed with `first` ahead of the parts, `drop` then deleted. */
function craft(archive: string, edit: (unpacked: string) => void, opts: { first?: string[]; drop?: string[] } = {}): string {
  const unpacked = join(tmp, 'craft');
  rmSync(unpacked, { recursive: true, force: true });
  mkdirSync(unpacked, { mode: 0o700 });
  execFileSync('tar', ['-xzpf', archive, '-C', unpacked]);
  edit(unpacked);
  const out = join(tmp, 'crafted.tar');
  const parts = [config, join(etc, 'token'), state, join(home, '.factory')].map(member).filter((m) => existsSync(join(unpacked, m)));
  execFileSync('tar', ['-cf', out, '-C', unpacked, ...(opts.first ?? []), 'droid-mcp-backup.json', ...parts]);
  if (opts.drop?.length) execFileSync('tar', ['--delete', '-f', out, ...opts.drop]);
  execFileSync('gzip', ['-nf', out]);
  rmSync(unpacked, { recursive: true, force: true });
  return `${out}.gz`;
}

/** One backup of the beforeEach state; the archive's path. */
async function backedUp(): Promise<string> {
  const made = await runCli(['backup', '--config', config, '--to', backups], env());
  expect(made.code, made.stderr).toBe(0);
  return join(backups, readdirSync(backups)[0]!);
}

/** Starts the server while `command` holds the startup lock; it must succeed, and the server then answer. */
async function startDuring(command: Promise<CliResult>): Promise<RunningServer> {
  await within(2_000, () => existsSync(join(state, 'startup.lock')));
  const started = (server = await startServer(config, env()));
  const done = await command;
  expect(done.code, done.stderr).toBe(0);
  await started.ok('droid_list_workspaces');
  return started;
}

/** Every part a backup holds, fingerprinted (content, modes, names). */
function parts(): Record<string, string[]> {
  return {
    config: treeFingerprint(config),
    token: treeFingerprint(join(etc, 'token')),
    state: treeFingerprint(state),
    factory: treeFingerprint(join(home, '.factory')),
  };
}

beforeEach(async () => {
  tmp = realpathSync(privateDir('droid-mcp-backup-'));
  home = join(tmp, 'home');
  etc = join(tmp, 'etc');
  state = join(tmp, 'state');
  backups = join(tmp, 'backups');
  for (const dir of [home, join(home, '.factory', 'sessions'), etc, backups, join(tmp, 'repos')]) mkdirSync(dir, { recursive: true, mode: 0o700 });
  writeFileSync(join(home, '.factory', 'settings.json'), '{"cloudSessionSync": false}\n', { mode: 0o600 });
  writeFileSync(join(home, '.factory', 'sessions', 'a-session.jsonl'), '{"droid": "history"}\n', { mode: 0o600 });
  writeFileSync(join(etc, 'token'), `${'t'.repeat(43)}\n`, { mode: 0o600 });
  config = join(etc, 'config.json');
  writeFileSync(
    config,
    JSON.stringify({
      approvedDirectories: [join(tmp, 'repos')],
      stateDirectory: state,
      droidPath: MOCK_DROID,
      defaultModel: 'mock-model',
      tokenFile: join(etc, 'token'),
      warmPoolSize: 0,
      ...sandboxKeys(),
    }),
    { mode: 0o600 },
  );
  // A real server makes the state directory (and owner record) and stops cleanly.
  server = await startServer(config, env());
  await server.ok('droid_list_workspaces');
  await server.close();
  server = undefined;
});
afterEach(async () => {
  await server?.close();
  server = undefined;
  rmSync(tmp, { recursive: true, force: true });
});

describe('droid-mcp backup and restore', () => {
  it('round trip: a private archive named to the second; restore moves what is there aside and brings back every part with modes 700 / 600', async () => {
    const before = parts();
    expect(mode(state)).toBe('700');
    const made = await runCli(['backup', '--config', config, '--to', backups], env());
    expect(made.code, made.stderr).toBe(0);
    const [name] = readdirSync(backups);
    expect(name).toMatch(/^droid-mcp-\d{8}T\d{6}Z\.tgz$/);
    const archive = join(backups, name!);
    expect(mode(archive)).toBe('600');
    expect(made.stdout).toContain(`wrote ${archive} (mode 600, `);

    // After the backup: a stray file, a changed token, droid's settings gone.
    writeFileSync(join(state, 'results', 'stray.json'), '{}', { mode: 0o600 });
    writeFileSync(join(etc, 'token'), `${'u'.repeat(43)}\n`, { mode: 0o600 });
    rmSync(join(home, '.factory', 'settings.json'));

    const restored = await runCli(['restore', '--from', archive, '--config', config], env());
    expect(restored.code, restored.stderr).toBe(0);
    expect(parts()).toEqual(before);
    expect(existsSync(join(state, 'results', 'stray.json'))).toBe(false);
    // What was there is kept aside, whole.
    const aside = readdirSync(tmp).filter((n) => n.startsWith('state.before-restore-'));
    expect(aside).toHaveLength(1);
    expect(existsSync(join(tmp, aside[0]!, 'results', 'stray.json'))).toBe(true);
    expect(restored.stdout).toContain(`Next: droid-mcp doctor --config ${config}`);

    // The restored state starts.
    server = await startServer(config, env());
    await server.ok('droid_list_workspaces');
  });

  it("refuses another user's HOME or FACTORY_HOME_OVERRIDE than the state's owner record names (it would archive the wrong droid home)", async () => {
    const other = join(tmp, 'other-home');
    mkdirSync(join(other, '.factory'), { recursive: true, mode: 0o700 });
    const before = treeFingerprint(backups);
    const made = await runCli(['backup', '--config', config, '--to', backups], { ...env(), HOME: other, FACTORY_HOME_OVERRIDE: other });
    expect(made.code).toBe(2);
    expect(made.stderr).toContain(`refusing to back up (state_owned_elsewhere): state directory ${state} belongs to a controller on host `);
    expect(made.stderr).toContain(`with HOME ${home} `);
    const override = await runCli(['backup', '--config', config, '--to', backups], { ...env(), FACTORY_HOME_OVERRIDE: other });
    expect(override.code).toBe(2);
    expect(override.stderr).toContain(`FACTORY_HOME_OVERRIDE=${home}`);
    expect(treeFingerprint(backups)).toEqual(before);
  });

  it('a server that starts while the backup reads waits for it (the startup lock is held throughout) and starts after the archive is written', async () => {
    const started = await startDuring(runCli(['backup', '--config', config, '--to', backups], { ...env(), PATH: slowTar('--create', 3) }));
    const archive = join(backups, readdirSync(backups)[0]!);
    const owner = JSON.parse(readFileSync(join(state, 'owner.json'), 'utf8')) as { pid: number; startedAt: string };
    expect(owner.pid).toBe(started.pid);
    expect(Date.parse(owner.startedAt)).toBeGreaterThanOrEqual(Math.floor(statSync(archive).mtimeMs));
  });

  it("restores only onto the places the operator's config and environment name, never where a crafted manifest points", async () => {
    const archive = await backedUp();
    const victim = join(tmp, 'victim');
    mkdirSync(victim, { mode: 0o700 });
    writeFileSync(join(victim, 'keep'), 'mine');
    const crafted = craft(
      archive,
      (dir) => {
        const path = join(dir, 'droid-mcp-backup.json');
        writeFileSync(path, JSON.stringify({ ...JSON.parse(readFileSync(path, 'utf8')), config: victim }));
        mkdirSync(join(dir, member(victim)));
        writeFileSync(join(dir, member(victim), 'planted'), 'theirs');
        rmSync(join(dir, member(config)));
      },
      { first: [member(victim)] },
    );
    const before = { ...parts(), victim: treeFingerprint(victim), tmp: readdirSync(tmp).sort() };
    const back = await runCli(['restore', '--from', crafted, '--config', config], env());
    expect({ ...parts(), victim: treeFingerprint(victim), tmp: readdirSync(tmp).sort() }).toEqual(before);
    expect(back.code).toBe(2);
    expect(back.stderr).toContain(`holds config ${victim}, but ${config} names ${config}; nothing was changed`);
  });

  it('refuses an archive with a hard link (to a file outside what it restores), a symlink out of its parts, or without a part its manifest names, before changing anything', async () => {
    const archive = await backedUp();
    const victim = join(tmp, 'victim.txt');
    writeFileSync(victim, 'mine', { mode: 0o600 });
    // A lone hard-link member naming victim.txt: tar would link the state's file to the real one.
    const linked = craft(
      archive,
      (dir) => {
        writeFileSync(join(dir, member(victim)), 'mine');
        linkSync(join(dir, member(victim)), join(dir, member(state), 'results', 'evil'));
      },
      { first: [member(victim)], drop: [member(victim)] },
    );
    const before = { ...parts(), tmp: readdirSync(tmp).sort() };
    const hard = await runCli(['restore', '--from', linked, '--config', config], env());
    expect(hard.code).toBe(2);
    expect(hard.stderr).toContain(`holds a hard link, ${member(state)}/results/evil (backup never writes one); nothing was changed`);
    expect(statSync(victim).nlink).toBe(1);

    const symlinked = craft(archive, (dir) => symlinkSync(tmp, join(dir, member(state), 'results', 'out')));
    const sym = await runCli(['restore', '--from', symlinked, '--config', config], env());
    expect(sym.code).toBe(2);
    expect(sym.stderr).toContain(`holds a symlink, ${member(state)}/results/out, to ${tmp}, outside what it restores; nothing was changed`);

    const partial = craft(archive, () => undefined, { drop: [member(join(home, '.factory'))] });
    const lacking = await runCli(['restore', '--from', partial, '--config', config], env());
    expect(lacking.code).toBe(2);
    expect(lacking.stderr).toContain(`lacks ${join(home, '.factory')}, which its manifest names; nothing was changed`);
    expect({ ...parts(), tmp: readdirSync(tmp).sort() }).toEqual(before);
  });

  it('a tar that fails while extracting changes nothing (what it extracted is removed) and says so, without a stack trace', async () => {
    const archive = await backedUp();
    const PATH = shimTar('--keep-old-files', '"$real" "$@"; echo "tar: disk full" >&2; exit 2');
    const before = { ...parts(), tmp: readdirSync(tmp).sort() };
    const back = await runCli(['restore', '--from', archive, '--config', config], { ...env(), PATH });
    expect(back.code).toBe(1);
    expect(back.stderr).toBe(`droid-mcp restore: tar could not extract ${archive} (exit 2: tar: disk full); nothing was changed\n`);
    expect({ ...parts(), tmp: readdirSync(tmp).sort() }).toEqual(before);
  });

  it('a server that starts while the restore extracts waits for it (the startup lock is held) and starts on the restored state', async () => {
    const archive = await backedUp();
    const started = await startDuring(runCli(['restore', '--from', archive, '--config', config], { ...env(), PATH: slowTar('--keep-old-files', 6) }));
    // Had it started during the extraction, the restore would have moved its owner record aside.
    expect(JSON.parse(readFileSync(join(state, 'owner.json'), 'utf8')).pid).toBe(started.pid);
  });

  it('refuses while a server holds the state directory, and changes nothing', async () => {
    const archive = await backedUp();
    server = await startServer(config, env());
    await server.ok('droid_list_workspaces');
    // An archive of this very second may exist already (the server started within it; CI saw that): the
    // running server is still the answer. Names taken for the next seconds make that case certain.
    for (let s = 0; s < 20; s++) {
      const name = join(backups, `droid-mcp-${stamp(new Date(Date.now() + s * 1_000))}.tgz`);
      // Never over the archive backedUp() just made (it may be of this very second).
      if (!existsSync(name)) writeFileSync(name, '', { mode: 0o600, flag: 'wx' });
    }
    const before = { ...parts(), backups: treeFingerprint(backups), tmp: readdirSync(tmp).sort() };

    const again = await runCli(['backup', '--config', config, '--to', backups], env());
    // 3, as status's busy, not 2 (bad arguments): nothing is wrong with the command line.
    expect(again.code, again.stderr).toBe(3);
    expect(again.stderr).toContain(`the server, pid ${server.pid}, holds ${state}: stop it first`);
    expect(again.stderr).not.toContain('usage:');
    const back = await runCli(['restore', '--from', archive, '--config', config], env());
    expect(back.code, back.stderr).toBe(3);
    expect(back.stderr).toContain(`the server, pid ${server.pid}, holds ${state}: stop it first`);
    expect(back.stderr).not.toContain('usage:');
    expect({ ...parts(), backups: treeFingerprint(backups), tmp: readdirSync(tmp).sort() }).toEqual(before);
  });
});
