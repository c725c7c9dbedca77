/**
 * The operator commands: `droid-mcp init` writes a private config and state
 * directory (and a token for HTTP), refuses to overwrite or to write anything
 * on bad input, and prints registration lines; `droid-mcp doctor` reports one
 * line per check with a non-zero exit on a failure. The built CLI is run as
 * a new operator would; droid is the protocol-peer mock (its catalog and
 * --version are all doctor asks of it).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, realpathSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/config/load.js';
import { doctor, type Check } from '../../../src/ops/setup/doctor.js';
import { init, InitRefusal } from '../../../src/ops/setup/init.js';
import { StateStore } from '../../../src/store/store.js';
import { runCli } from '../../support/cli.js';
import { privateDir } from '../../support/mcp-server.js';
import { MOCK_DROID, SERVER_ENTRY } from '../../support/paths.js';

let tmp: string;
let home: string;
let approved: string;
let etc: string;
const quiet = { info() {}, warn() {}, error() {} };

function bwrapOnPath(): string | null {
  try {
    return execFileSync('sh', ['-c', 'command -v bwrap'], { encoding: 'utf8' }).trim() || null;
  } catch {
    return null;
  }
}

/** The service user's environment: a private home whose droid settings say cloud sync is off. */
function serviceEnv(cloudSessionSync: boolean | 'unset' = false): NodeJS.ProcessEnv {
  mkdirSync(join(home, '.factory'), { recursive: true, mode: 0o700 });
  writeFileSync(join(home, '.factory', 'settings.json'), JSON.stringify(cloudSessionSync === 'unset' ? {} : { cloudSessionSync }));
  return { PATH: process.env.PATH ?? '', HOME: home, FACTORY_HOME_OVERRIDE: home };
}

const mode = (path: string) => (statSync(path).mode & 0o777).toString(8);
const byName = (checks: Check[], name: string) => checks.filter((c) => c.name === name);

beforeEach(() => {
  tmp = realpathSync(privateDir('droid-mcp-ops-'));
  home = join(tmp, 'home');
  approved = join(tmp, 'repos');
  etc = join(tmp, 'etc');
  for (const dir of [home, approved, etc]) mkdirSync(dir, { recursive: true, mode: 0o700 });
});

afterEach(() => {
  rmSync(tmp, { recursive: true, force: true });
});

describe('droid-mcp init', () => {
  it('writes a private config the real loader accepts, creates the state directory 0700, and prints registration lines', async () => {
    const { code, stdout, stderr } = await runCli(
      ['init', '--config', join(etc, 'config.json'), '--approve', approved, '--state', join(tmp, 'state'), '--droid', MOCK_DROID],
      serviceEnv(),
    );
    expect(code, stderr).toBe(0);
    expect(mode(join(etc, 'config.json'))).toBe('600');
    expect(mode(join(tmp, 'state'))).toBe('700');
    const config = await loadConfig(join(etc, 'config.json'));
    expect(config).toMatchObject({
      approvedDirectories: [approved],
      stateDirectory: join(tmp, 'state'),
      droidPath: MOCK_DROID,
      transport: 'stdio',
      // The live catalog's (the mock's) first standard model: it has no claude-opus.
      defaultModel: 'mock-model',
      reasoningEffort: 'high',
      maxAutonomy: 'high',
      maxConcurrentRuns: 4,
    });
    // The exact lines for Claude Code, Amp and a generic mcpServers client.
    const launch = `${process.execPath} ${SERVER_ENTRY} --config ${join(etc, 'config.json')}`;
    expect(stdout).toContain(`claude mcp add --scope user droid-mcp -- ${launch}`);
    const amp = JSON.parse(`{${/^ {2}("amp\.mcpServers": .*)$/m.exec(stdout)![1]}}`) as Record<string, Record<string, { command: string; args: string[] }>>;
    expect(amp['amp.mcpServers']!['droid-mcp']).toEqual({ command: process.execPath, args: [SERVER_ENTRY, '--config', join(etc, 'config.json')] });
    const generic = JSON.parse(/^ {2}(\{"mcpServers".*)$/m.exec(stdout)![1]!) as { mcpServers: Record<string, unknown> };
    expect(generic.mcpServers['droid-mcp']).toEqual(amp['amp.mcpServers']!['droid-mcp']);
    expect(stdout).toContain(`droid-mcp doctor --config ${join(etc, 'config.json')}`);
  });

  it('--http adds transport, port and a fresh private token file, and never prints the token', async () => {
    const { code, stdout, stderr } = await runCli(
      ['init', '--config', join(etc, 'config.json'), '--approve', approved, '--state', join(tmp, 'state'), '--droid', MOCK_DROID, '--http', '--port', '8899'],
      serviceEnv(),
    );
    expect(code, stderr).toBe(0);
    const token = readFileSync(join(etc, 'token'), 'utf8').trim();
    expect(mode(join(etc, 'token'))).toBe('600');
    expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(await loadConfig(join(etc, 'config.json'))).toMatchObject({ transport: 'http', port: 8899, tokenFile: join(etc, 'token') });
    expect(stdout).not.toContain(token);
    expect(stdout).toContain(
      `claude mcp add --scope user --transport http droid-mcp http://127.0.0.1:8899/mcp --header "Authorization: Bearer $(cat ${join(etc, 'token')})"`,
    );
    // A second init makes a different token.
    rmSync(join(tmp, 'state'), { recursive: true });
    await runCli(
      [
        'init',
        '--config',
        join(etc, 'other.json'),
        '--approve',
        approved,
        '--state',
        join(tmp, 'state'),
        '--droid',
        MOCK_DROID,
        '--http',
        '--token-file',
        join(etc, 'other-token'),
      ],
      serviceEnv(),
    );
    expect(readFileSync(join(etc, 'other-token'), 'utf8').trim()).not.toBe(token);
  });

  it('refuses to overwrite a config or token, and bad input writes nothing at all', async () => {
    writeFileSync(join(etc, 'config.json'), 'precious\n', { mode: 0o600 });
    const base = { approve: [approved], state: join(tmp, 'state'), http: false, droidPath: MOCK_DROID, name: 'droid-mcp', env: serviceEnv() };
    await expect(init({ ...base, configPath: join(etc, 'config.json') })).rejects.toThrow(/already exists; init never overwrites/);
    expect(readFileSync(join(etc, 'config.json'), 'utf8')).toBe('precious\n');
    writeFileSync(join(etc, 'token'), 'old\n', { mode: 0o600 });
    await expect(init({ ...base, configPath: join(etc, 'new.json'), http: true })).rejects.toThrow(/token.* already exists/);
    expect(readFileSync(join(etc, 'token'), 'utf8')).toBe('old\n');
    await expect(init({ ...base, configPath: join(etc, 'new.json'), approve: [join(tmp, 'missing')] })).rejects.toThrow(InitRefusal);
    await expect(init({ ...base, configPath: 'relative.json' })).rejects.toThrow(/absolute/);
    await expect(init({ ...base, configPath: join(etc, 'new.json'), model: 'gpt-5-fast' })).rejects.toThrow(/Fast variant/);
    await expect(init({ ...base, configPath: join(etc, 'new.json'), model: 'claude-opus-5-5' })).rejects.toThrow(
      /--model claude-opus-5-5 is not in the live catalog of .*; choose one of: mock-model, custom:Mock-Custom-0$/,
    );
    await expect(init({ ...base, configPath: join(etc, 'new.json'), droidPath: join(tmp, 'no-droid') })).rejects.toThrow(/droidPath/);
    // Nothing was created by any refusal: no state directory, no new config.
    expect(existsSync(join(tmp, 'state'))).toBe(false);
    expect(readdirSync(etc).sort()).toEqual(['config.json', 'token']);

    const usage = await runCli(['init', '--config', join(etc, 'x.json'), '--state', join(tmp, 'state')], serviceEnv());
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain('--approve');
    expect(existsSync(join(tmp, 'state'))).toBe(false);
  });
});

describe('droid-mcp doctor', () => {
  function goodConfig(extra: Record<string, unknown> = {}): string {
    const bwrap = bwrapOnPath();
    const path = join(etc, 'config.json');
    writeFileSync(
      path,
      JSON.stringify({
        approvedDirectories: [approved],
        stateDirectory: join(tmp, 'state'),
        droidPath: MOCK_DROID,
        defaultModel: 'mock-model',
        ...(bwrap ? { bwrapPath: bwrap } : { sandbox: 'off' }),
        ...extra,
      }),
      { mode: 0o600 },
    );
    return path;
  }

  it('passes a good host: one ok line per check, exit 0, and --json for scripts', async () => {
    const config = goodConfig();
    const { code, stdout, stderr } = await runCli(['doctor', '--config', config], serviceEnv());
    expect(code, `${stdout}\n${stderr}`).toBe(0);
    for (const line of [
      /^ok {4}config +.*config\.json is valid \(stdio, 1 approved root\(s\)/m,
      /^ok {4}droid +.*mock-droid\.mjs, version 0\.225\.2-mock$/m,
      /^ok {4}catalog +droid\.list_models answered with 2 usable models in \d+ ms \(no session created\)$/m,
      /^ok {4}default model +"mock-model" \(Mock Model\) is in the catalog and not Fast$/m,
      /^ok {4}state directory +.*state does not exist yet: the server creates it/m,
      /^ok {4}approved root +.*repos exists, is a directory, canonical$/m,
      /^ok {4}cloud sync +cloudSessionSync is false in .*settings\.json/m,
    ])
      expect(stdout).toMatch(line);
    // Issue 37: whom turns may reach, by default the model endpoints only.
    if (bwrapOnPath())
      expect(stdout).toMatch(
        /^ok {4}network +proxy: turns reach Factory, the custom models' endpoints and nothing else; refusals are listed in each run's egress$/m,
      );
    if (bwrapOnPath())
      expect(stdout).toMatch(
        /^ok {4}sandbox +bwrap .*: a trial run with the turn's flags works, and its seccomp filter refuses ptrace, pidfd_getfd and AF_UNIX sockets$/m,
      );
    const json = await runCli(['doctor', '--config', config, '--json'], serviceEnv());
    const report = JSON.parse(json.stdout) as { ok: boolean; checks: Check[] };
    expect(report.ok).toBe(true);
    // The sandbox comes before the catalog: the catalog's droid runs in it.
    expect(report.checks.map((c) => c.name)).toEqual([
      'config',
      'droid',
      'sandbox',
      'network',
      'catalog',
      'default model',
      'state directory',
      'approved root',
      'cloud sync',
    ]);
  });

  it('fails a broken host, each broken item with what to do, and exits 1', async () => {
    mkdirSync(join(tmp, 'state'));
    execFileSync('chmod', ['755', join(tmp, 'state')]);
    writeFileSync(join(etc, 'token'), 'short\n', { mode: 0o600 });
    mkdirSync(join(tmp, 'real'));
    execFileSync('ln', ['-s', join(tmp, 'real'), join(tmp, 'link')]);
    const config = goodConfig({
      approvedDirectories: [approved, join(tmp, 'gone'), join(tmp, 'link')],
      defaultModel: 'claude-opus-5-5',
      transport: 'http',
      tokenFile: join(etc, 'token'),
      port: 8898,
      bwrapPath: join(tmp, 'no-bwrap'),
      sandbox: undefined,
    });
    const { code, stdout } = await runCli(['doctor', '--config', config], serviceEnv());
    expect(code).toBe(1);
    for (const line of [
      /^fail {2}config +the server would refuse to start: .*"approvedDirectories\[1\]"/m,
      // No sandbox, no catalog read: its droid would run unconfined.
      /^fail {2}catalog +not read: the sandbox its droid runs in failed its trial run/m,
      /^warn {2}default model +"claude-opus-5-5" was not checked: no catalog/m,
      // Start-up's own refusal, word for word.
      /^fail {2}state directory +start-up would refuse it \(state_dir_not_private\): state directory .*state has mode 755; group and others must have no access\n +→ Run: chmod 700 /m,
      /^fail {2}approved root +.*gone does not exist/m,
      /^warn {2}approved root +.*link resolves to .*real \(a symlink\)/m,
      /^fail {2}token +.*holds 5 characters; at least 32 are required/m,
      /^fail {2}sandbox +bwrap .*no-bwrap: the sandbox program \(bubblewrap\) is not an executable file/m,
      /^\d+ check\(s\) failed, \d+ warning\(s\): fix the failures before registering the server\.$/m,
    ])
      expect(stdout).toMatch(line);

    const wrongModel = await runCli(['doctor', '--config', goodConfig({ defaultModel: 'claude-opus-5-5' })], serviceEnv());
    expect(wrongModel.stdout).toMatch(
      /^fail {2}default model +"claude-opus-5-5" is not in the live catalog\n +→ Choose one of: mock-model, custom:Mock-Custom-0\.$/m,
    );

    const noDroid = await doctor(goodConfig({ droidPath: join(tmp, 'no-droid') }), { env: serviceEnv(), factoryReachable: async () => false });
    expect(byName(noDroid, 'droid')[0]).toMatchObject({ status: 'fail', action: expect.stringContaining('Install the droid CLI') });
    expect(byName(noDroid, 'default model')[0]).toMatchObject({ status: 'warn', detail: expect.stringContaining('not checked') });

    // A droid in an approved root is never run: a turn could have rewritten it, and --version runs unconfined.
    const planted = join(approved, 'droid');
    writeFileSync(planted, `#!/bin/sh\ntouch ${join(tmp, 'planted-droid-ran')}\necho 0.0.0\n`, { mode: 0o755 });
    const misplaced = await doctor(goodConfig({ droidPath: planted }), { env: serviceEnv(), factoryReachable: async () => false });
    expect(byName(misplaced, 'droid')[0]).toMatchObject({ status: 'fail', detail: expect.stringContaining(`${planted} was not run`) });
    expect(existsSync(join(tmp, 'planted-droid-ran'))).toBe(false);
    rmSync(planted);

    const unparsable = join(etc, 'bad.json');
    writeFileSync(unparsable, '{"approvedDirectories": [', { mode: 0o600 });
    const bad = await runCli(['doctor', '--config', unparsable], serviceEnv());
    expect(bad.code).toBe(1);
    expect(bad.stdout).toMatch(/^fail {2}config +Config file .*bad\.json is not valid JSON/m);
  });

  it('names the live controller that holds the state directory, and a port it holds', async () => {
    const config = goodConfig({ transport: 'http', tokenFile: join(etc, 'token'), port: 8897 });
    writeFileSync(join(etc, 'token'), `${'t'.repeat(40)}\n`, { mode: 0o600 });
    const store = await StateStore.open(join(tmp, 'state'), { logger: quiet });
    try {
      const held = await doctor(config, { env: serviceEnv(), factoryReachable: async () => true });
      expect(byName(held, 'state directory')[0]).toMatchObject({
        status: 'warn',
        detail: expect.stringContaining(`held by a live controller, pid ${process.pid}`),
      });
    } finally {
      await store.close();
    }
    const free = await doctor(config, { env: serviceEnv(), factoryReachable: async () => true });
    expect(byName(free, 'state directory')[0]).toMatchObject({
      status: 'ok',
      detail: expect.stringContaining(`free (last owner pid ${process.pid} stopped cleanly)`),
    });
    expect(byName(free, 'port')[0]).toMatchObject({ status: 'ok' });
    expect(byName(free, 'token')[0]).toMatchObject({ status: 'ok', detail: expect.stringContaining('40 characters') });
  });

  it("reports droid's effective cloud session sync, and warns when Factory cannot be reached", async () => {
    const config = goodConfig();
    const check = async (sync: boolean | 'unset', reachable: boolean) =>
      byName(await doctor(config, { env: serviceEnv(sync), factoryReachable: async () => reachable }), 'cloud sync')[0]!;
    expect(await check(false, false)).toMatchObject({ status: 'ok', detail: expect.stringContaining('cloudSessionSync is false') });
    expect(await check('unset', true)).toMatchObject({ status: 'ok', detail: expect.stringContaining('not set in') });
    const offline = await check(true, false);
    expect(offline).toMatchObject({
      status: 'warn',
      detail: expect.stringContaining('api.factory.ai is unreachable'),
      action: expect.stringContaining('"cloudSessionSync": false'),
    });
  });
});

describe('droid-mcp --version and --help', () => {
  it('print the version and the usage, and exit 0', async () => {
    const version = await runCli(['--version'], process.env);
    expect(version).toMatchObject({
      code: 0,
      stdout: `${(JSON.parse(readFileSync(join(SERVER_ENTRY, '../../../package.json'), 'utf8')) as { version: string }).version}\n`,
    });
    const help = await runCli(['--help'], process.env);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('droid-mcp init --config');
    expect(help.stdout).toContain('droid-mcp doctor --config');
  });
});
