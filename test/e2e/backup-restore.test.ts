/**
 * `droid-mcp backup` / `restore` (issue 23 item 4), run as an operator would
 * against state a real server wrote: the archive is private (600) and named
 * to the second, and holds the config, the token, the state directory and
 * droid's home; a restore moves what is there aside first, so nothing that
 * was not in the archive survives in place, and keeps modes 700 / 600. Both
 * refuse while a server holds the state directory, and change nothing then.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, realpathSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { runCli, sandboxKeys, treeFingerprint } from '../support/cli.js';
import { privateDir, startServer, type RunningServer } from '../support/mcp-server.js';
import { MOCK_DROID } from '../support/paths.js';

let tmp: string;
let home: string;
let etc: string;
let state: string;
let backups: string;
let config: string;
let server: RunningServer | undefined;

const env = (): Record<string, string> => ({ PATH: process.env.PATH ?? '', HOME: home, FACTORY_HOME_OVERRIDE: home });
const mode = (path: string) => (statSync(path).mode & 0o777).toString(8);

/** PATH with a `tar` first that waits `seconds` before a run whose first argument is `op`: a backup or restore that takes its time. */
function slowTar(op: '--create' | '--extract', seconds: number): string {
  const bin = join(tmp, 'slow-bin');
  mkdirSync(bin, { recursive: true, mode: 0o700 });
  const real = execFileSync('sh', ['-c', 'command -v tar'], { encoding: 'utf8' }).trim();
  writeFileSync(join(bin, 'tar'), `#!/bin/sh\n[ "$1" = ${op} ] && sleep ${seconds}\nexec ${real} "$@"\n`, { mode: 0o700 });
  return `${bin}:${process.env.PATH ?? ''}`;
}

/** Until `check` holds, or `ms` have passed. */
async function within(ms: number, check: () => boolean): Promise<void> {
  const end = Date.now() + ms;
  while (!check() && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
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
    JSON.stringify({ approvedDirectories: [join(tmp, 'repos')], stateDirectory: state, droidPath: MOCK_DROID, defaultModel: 'mock-model', tokenFile: join(etc, 'token'), warmPoolSize: 0, ...sandboxKeys() }),
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

    const restored = await runCli(['restore', '--from', archive], env());
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
    const made = runCli(['backup', '--config', config, '--to', backups], { ...env(), PATH: slowTar('--create', 3) });
    await within(2_000, () => existsSync(join(state, 'startup.lock')));
    server = await startServer(config, env());
    const done = await made;
    expect(done.code, done.stderr).toBe(0);
    await server.ok('droid_list_workspaces');
    const archive = join(backups, readdirSync(backups)[0]!);
    const owner = JSON.parse(readFileSync(join(state, 'owner.json'), 'utf8')) as { pid: number; startedAt: string };
    expect(owner.pid).toBe(server.pid);
    expect(Date.parse(owner.startedAt)).toBeGreaterThanOrEqual(Math.floor(statSync(archive).mtimeMs));
  });

  it('refuses while a server holds the state directory, and changes nothing', async () => {
    const made = await runCli(['backup', '--config', config, '--to', backups], env());
    expect(made.code, made.stderr).toBe(0);
    const archive = join(backups, readdirSync(backups)[0]!);
    server = await startServer(config, env());
    await server.ok('droid_list_workspaces');
    const before = { ...parts(), backups: treeFingerprint(backups), tmp: readdirSync(tmp).sort() };

    const again = await runCli(['backup', '--config', config, '--to', backups], env());
    // 3, as status's busy, not 2 (bad arguments): nothing is wrong with the command line.
    expect(again.code).toBe(3);
    expect(again.stderr).toContain(`the server, pid ${server.pid}, holds ${state}: stop it first`);
    expect(again.stderr).not.toContain('usage:');
    const back = await runCli(['restore', '--from', archive], env());
    expect(back.code).toBe(3);
    expect(back.stderr).toContain(`the server, pid ${server.pid}, holds ${state}: stop it first`);
    expect(back.stderr).not.toContain('usage:');
    expect({ ...parts(), backups: treeFingerprint(backups), tmp: readdirSync(tmp).sort() }).toEqual(before);
  });
});
