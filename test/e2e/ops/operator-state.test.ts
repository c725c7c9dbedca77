/**
 * Issue 23, the operator's path: `init` takes its default model from the
 * live catalog of the pinned droid CLI (or checks `--model` against it) so
 * that its own `doctor` passes; `doctor` reads the state directory as
 * start-up does, reporting a corrupt state, an unversioned owner record or a
 * torn journal tail in start-up's own words, and changes no byte of it.
 */
import { appendFileSync, existsSync, mkdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { droidCatalogFetcher, visibleModels } from '../../../src/controller/catalog/model-catalog.js';
import { StateStore } from '../../../src/store/store.js';
import { runCli, sandboxKeys, treeFingerprint } from '../../support/cli.js';
import { privateDir, startExpectingRefusal } from '../../support/mcp-server.js';
import { DROID_PATH, MOCK_DROID } from '../../support/paths.js';
import { runRecord, sessionRecord } from '../../support/records.js';

let tmp: string;
let home: string;
let approved: string;
let etc: string;
let state: string;
const quiet = { info() {}, warn() {}, error() {} };

/** The service user: a private home (droid's too) whose settings keep sessions local. */
function serviceEnv(): Record<string, string> {
  return { PATH: process.env.PATH ?? '', HOME: home, FACTORY_HOME_OVERRIDE: home };
}

beforeEach(() => {
  tmp = realpathSync(privateDir('droid-mcp-opstate-'));
  home = join(tmp, 'home');
  approved = join(tmp, 'repos');
  etc = join(tmp, 'etc');
  state = join(tmp, 'state');
  for (const dir of [home, join(home, '.factory'), approved, etc]) mkdirSync(dir, { recursive: true, mode: 0o700 });
  writeFileSync(join(home, '.factory', 'settings.json'), JSON.stringify({ cloudSessionSync: false }));
});
afterEach(() => {
  rmSync(tmp, { recursive: true, force: true });
});

describe('droid-mcp init against the pinned droid CLI', () => {
  const initArgs = (config: string, ...extra: string[]) => [
    'init',
    '--config',
    config,
    '--approve',
    approved,
    '--state',
    state,
    '--droid',
    DROID_PATH,
    ...extra,
  ];

  it('without --model writes a standard model of the live catalog, and its own doctor passes the default model', async () => {
    const catalog = visibleModels(await droidCatalogFetcher(DROID_PATH, serviceEnv(), { mode: 'off' })(), []);
    const config = join(etc, 'config.json');
    const made = await runCli(initArgs(config), serviceEnv());
    expect(made.code, made.stderr).toBe(0);
    const written = (JSON.parse(readFileSync(config, 'utf8')) as { defaultModel?: string }).defaultModel;
    expect(catalog.map((m) => m.id)).toContain(written);
    expect(written).not.toMatch(/fast/i);
    const checked = await runCli(['doctor', '--config', config, '--json'], serviceEnv());
    const report = JSON.parse(checked.stdout) as { checks: Array<{ name: string; status: string; detail: string }> };
    expect(report.checks.find((c) => c.name === 'default model')).toMatchObject({ status: 'ok', detail: expect.stringContaining(`"${written}"`) });
  });

  it('--model is checked against the live catalog: one it has is written, one it lacks or a Fast one is refused with every choice and nothing written', async () => {
    const catalog = visibleModels(await droidCatalogFetcher(DROID_PATH, serviceEnv(), { mode: 'off' })(), []);
    const standard = catalog.filter((m) => !/fast/i.test(`${m.id} ${m.displayName ?? ''}`)).map((m) => m.id);
    const chosen = standard.at(-1)!;
    const config = join(etc, 'config.json');

    const absent = await runCli(initArgs(config, '--model', 'claude-opus-5-5'), serviceEnv());
    expect(absent.code).toBe(2);
    // The whole list, not cut off.
    expect(absent.stderr).toContain(`--model claude-opus-5-5 is not in the live catalog of ${DROID_PATH}; choose one of: ${standard.join(', ')}\n`);
    const fast = catalog.find((m) => /Fast Mode/.test(m.displayName ?? ''))!;
    const refusedFast = await runCli(initArgs(config, '--model', fast.id), serviceEnv());
    expect(refusedFast.code).toBe(2);
    expect(refusedFast.stderr).toMatch(/Fast/);
    expect(existsSync(config)).toBe(false);
    expect(existsSync(state)).toBe(false);

    const made = await runCli(initArgs(config, '--model', chosen), serviceEnv());
    expect(made.code, made.stderr).toBe(0);
    expect((JSON.parse(readFileSync(config, 'utf8')) as { defaultModel?: string }).defaultModel).toBe(chosen);
  });

  it('with no catalog to read (no bwrap on PATH for its sandbox) writes no defaultModel and refuses --model', async () => {
    const noBwrap = { ...serviceEnv(), PATH: join(tmp, 'empty-path') };
    const config = join(etc, 'config.json');
    const refused = await runCli(initArgs(config, '--model', 'claude-opus-5'), noBwrap);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain(
      '--model claude-opus-5 cannot be checked against the live catalog (not read: the sandbox its droid runs in failed its trial run',
    );
    expect(existsSync(config)).toBe(false);
    const made = await runCli(initArgs(config), noBwrap);
    expect(made.code, made.stderr).toBe(0);
    expect(JSON.parse(readFileSync(config, 'utf8'))).not.toHaveProperty('defaultModel');
    expect(made.stdout).toContain('note: no defaultModel was written: the live catalog could not be read');
  });

  it('doctor --json names every standard model of the catalog when the default is not in it', async () => {
    const catalog = visibleModels(await droidCatalogFetcher(DROID_PATH, serviceEnv(), { mode: 'off' })(), []);
    const standard = catalog.filter((m) => !/fast/i.test(`${m.id} ${m.displayName ?? ''}`)).map((m) => m.id);
    const config = join(etc, 'config.json');
    writeFileSync(
      config,
      JSON.stringify({ approvedDirectories: [approved], stateDirectory: state, droidPath: DROID_PATH, defaultModel: 'claude-opus-5-5', ...sandboxKeys() }),
      { mode: 0o600 },
    );
    const checked = await runCli(['doctor', '--config', config, '--json'], serviceEnv());
    expect(checked.code).toBe(1);
    const report = JSON.parse(checked.stdout) as { checks: Array<{ name: string; status: string; action: string | null }> };
    expect(report.checks.find((c) => c.name === 'default model')).toMatchObject({ status: 'fail', action: `Choose one of: ${standard.join(', ')}.` });
    expect(standard.length).toBeGreaterThan(8);
  });
});

/** The server's refusal log lines (pino JSON on stderr): code and message. */
function refusals(stderr: string): Array<{ code: string; msg: string }> {
  return stderr
    .split('\n')
    .filter((l) => l.includes('refusing to start'))
    .map((l) => {
      const { code, msg } = JSON.parse(l) as { code: string; msg: string };
      return { code, msg };
    });
}

describe('droid-mcp doctor reads the state as start-up does', () => {
  /** A state directory with two sessions and runs, owned (last) by the service user's identity, and a config naming it. */
  async function stateWithRecords(): Promise<string> {
    const store = await StateStore.open(state, { logger: quiet });
    await store.commit({ sessions: [sessionRecord({ id: 's1' })], runs: [runRecord({ sessionId: 's1', seq: 1 })] });
    await store.commit({ sessions: [sessionRecord({ id: 's2' })], runs: [runRecord({ sessionId: 's2', seq: 1 })] });
    await store.close();
    // As if the service user's controller had owned it: doctor and the server run with that HOME.
    const owner = { version: 1, pid: 999_999, hostname: hostname(), home, factoryHomeOverride: home, startedAt: '2030-01-01T00:00:00.000Z' };
    writeFileSync(join(state, 'owner.json'), `${JSON.stringify(owner, null, 2)}\n`, { mode: 0o600 });
    const config = join(etc, 'config.json');
    writeFileSync(
      config,
      JSON.stringify({ approvedDirectories: [approved], stateDirectory: state, droidPath: MOCK_DROID, defaultModel: 'mock-model', ...sandboxKeys() }),
      { mode: 0o600 },
    );
    return config;
  }

  async function doctorState(config: string): Promise<{ code: number; check: { status: string; detail: string; action: string | null } }> {
    const before = treeFingerprint(state);
    const text = await runCli(['doctor', '--config', config], serviceEnv());
    const json = await runCli(['doctor', '--config', config, '--json'], serviceEnv());
    // Not a byte, not a mode changed, and no file added or removed.
    expect(treeFingerprint(state)).toEqual(before);
    const check = (JSON.parse(json.stdout) as { checks: Array<{ name: string; status: string; detail: string; action: string | null }> }).checks.find(
      (c) => c.name === 'state directory',
    )!;
    return { code: text.code, check };
  }

  it('a good state: ok, with what it read', async () => {
    const { code, check } = await doctorState(await stateWithRecords());
    expect(code).toBe(0);
    expect(check).toMatchObject({
      status: 'ok',
      detail: expect.stringMatching(
        /is private \(700\) and free \(last owner pid 999999 stopped cleanly\); 2 session\(s\) and 2 run\(s\) read as start-up reads them$/,
      ),
    });
  });

  it('a corrupt journal line: fail with the state_corrupt refusal start-up then gives, word for word', async () => {
    const config = await stateWithRecords();
    appendFileSync(join(state, 'journal.jsonl'), '{"seq": 3, "sessions": [], "runs": [}\n');
    const { code, check } = await doctorState(config);
    expect(code).toBe(1);
    expect(check.status).toBe('fail');
    expect(check.detail).toMatch(/^start-up would refuse it \(state_corrupt\): .*journal\.jsonl line \d+ is not valid JSON/);
    const refused = await startExpectingRefusal(config, serviceEnv());
    expect(refused.code).toBe(1);
    const problem = check.detail.replace('start-up would refuse it (state_corrupt): ', '');
    expect(refusals(refused.stderr)).toEqual([{ code: 'state_corrupt', msg: `refusing to start: ${problem}. ${check.action}` }]);
  });

  it('an unversioned owner record: fail with start-up’s state_version_unsupported', async () => {
    const config = await stateWithRecords();
    writeFileSync(join(state, 'owner.json'), JSON.stringify({ pid: 999_999, hostname: hostname(), home, startedAt: '2030-01-01T00:00:00.000Z' }), {
      mode: 0o600,
    });
    const { code, check } = await doctorState(config);
    expect(code).toBe(1);
    expect(check).toMatchObject({
      status: 'fail',
      detail: expect.stringMatching(/^start-up would refuse it \(state_version_unsupported\): owner record .*owner\.json has no version/),
    });
    const refused = await startExpectingRefusal(config, serviceEnv());
    const problem = check.detail.replace('start-up would refuse it (state_version_unsupported): ', '');
    expect(refusals(refused.stderr)).toEqual([{ code: 'state_version_unsupported', msg: `refusing to start: ${problem}. ${check.action}` }]);
  });

  it('a torn journal tail: a warning that start-up cuts it off, and the directory left as it was', async () => {
    const config = await stateWithRecords();
    appendFileSync(join(state, 'journal.jsonl'), '{"seq": 3, "sessi');
    const { code, check } = await doctorState(config);
    expect(code).toBe(0);
    expect(check).toMatchObject({
      status: 'warn',
      detail: expect.stringMatching(
        /its journal ends in a torn line \(line \d+, 17 bytes, never acknowledged\): start-up copies it to journal\.torn-<time> and cuts it off/,
      ),
    });
  });
});
