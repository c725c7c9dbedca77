import { chmod, mkdir, mkdtemp, realpath, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError } from '../../../src/config/errors.js';
import { loadConfig, type LoadConfigEnv } from '../../../src/config/load.js';
import { installRoot } from '../../../src/config/unconfined-programs.js';
import { AMP_MCP_URL, autonomyAtMost, looksFast } from '../../../src/config/schema.js';
import { AUTONOMY_LEVELS as AUTONOMY_ORDER } from '../../../src/droid/permission-policy.js';

let tmp: string;
let root: string;
let state: string;
let binDir: string;
let home: string;

async function makeExecutable(path: string, mode = 0o755): Promise<string> {
  await writeFile(path, '#!/bin/sh\nexit 0\n');
  await chmod(path, mode);
  return path;
}

beforeEach(async () => {
  // Real path of the temp dir, since macOS spells it through a symlink.
  tmp = await realpath(await mkdtemp(join(tmpdir(), 'droid-mcp-config-')));
  root = join(tmp, 'root');
  state = join(tmp, 'state');
  binDir = join(tmp, 'bin');
  home = join(tmp, 'home');
  await mkdir(root);
  await mkdir(state);
  await chmod(state, 0o700);
  await mkdir(binDir);
  await mkdir(home);
  await makeExecutable(join(binDir, 'droid'));
});

afterEach(async () => {
  await rm(tmp, { recursive: true, force: true });
});

function base(extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { approvedDirectories: [root], stateDirectory: state, ...extra };
}

async function writeConfig(content: unknown): Promise<string> {
  const path = join(tmp, 'config.json');
  await writeFile(path, typeof content === 'string' ? content : JSON.stringify(content));
  return path;
}

async function load(content: unknown, env: LoadConfigEnv = {}) {
  return loadConfig(await writeConfig(content), { platform: 'linux', home, pathEnv: binDir, ...env });
}

async function refusal(promise: Promise<unknown>): Promise<ConfigError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ConfigError);
  return err as ConfigError;
}

/** Asserts a refusal that names `key` in both the message and the `key` field. */
async function expectRefused(content: unknown, key: string, opts: { code?: string; env?: LoadConfigEnv; mentions?: string[] } = {}): Promise<ConfigError> {
  const err = await refusal(load(content, opts.env));
  expect(err.code).toBe(opts.code ?? 'config_invalid');
  expect(err.key).toBe(key);
  expect(err.message).toContain(`"${key}"`);
  for (const text of opts.mentions ?? []) expect(err.message).toContain(text);
  return err;
}

describe('loadConfig defaults', () => {
  it('fills every default from a minimal config', async () => {
    const config = await load(base());
    expect(config).toEqual({
      approvedDirectories: [root],
      stateDirectory: state,
      droidPath: join(binDir, 'droid'),
      transport: 'stdio',
      maxAutonomy: 'high',
      defaultAutonomy: 'high',
      excludeModelIds: [],
      maxConcurrentRuns: 4,
      warmPoolSize: 1,
      runTimeoutMs: 3_600_000,
      cancelGraceMs: 5_000,
      ceilings: { maxTurnTokens: null, maxTurnCredits: null, maxSessionCredits: null },
      modelCacheTtlMs: 60_000,
      port: 8787,
      sandbox: { mode: 'bwrap', bwrapPath: null },
      network: { mode: 'proxy', allow: [] },
      sandboxReadable: [],
    });
    expect(config.defaultModel).toBeUndefined();
    expect(config.reasoningEffort).toBeUndefined();
    expect(config.ampMcp).toBeUndefined();
  });

  it('keeps explicit values and resolves ampMcp {} to the generic endpoint', async () => {
    const tokenFile = join(tmp, 'token');
    const config = await load(
      base({
        transport: 'http',
        tokenFile,
        publicUrl: 'https://droid.example.com/mcp',
        port: 9000,
        maxAutonomy: 'medium',
        defaultAutonomy: 'low',
        defaultModel: 'claude-opus-5-5',
        reasoningEffort: 'high',
        excludeModelIds: ['old-model', 'old-model'],
        maxConcurrentRuns: 16,
        runTimeoutMs: 1000,
        cancelGraceMs: 100,
        modelCacheTtlMs: 600_000,
        ampMcp: {},
      }),
    );
    expect(config).toMatchObject({
      transport: 'http',
      tokenFile,
      publicUrl: 'https://droid.example.com/mcp',
      port: 9000,
      maxAutonomy: 'medium',
      defaultAutonomy: 'low',
      defaultModel: 'claude-opus-5-5',
      reasoningEffort: 'high',
      excludeModelIds: ['old-model'],
      maxConcurrentRuns: 16,
      runTimeoutMs: 1000,
      cancelGraceMs: 100,
      modelCacheTtlMs: 600_000,
      ampMcp: { url: AMP_MCP_URL },
    });
  });

  it('accepts ampMcp with the exact generic url', async () => {
    const config = await load(base({ ampMcp: { url: 'https://ampcode.com/mcp?profile=puck' } }));
    expect(config.ampMcp).toEqual({ url: AMP_MCP_URL });
  });

  it('inherits defaultAutonomy from an explicit maxAutonomy', async () => {
    const config = await load(base({ maxAutonomy: 'low' }));
    expect(config.defaultAutonomy).toBe('low');
  });

  it('stores canonical approved directories, de-duplicated', async () => {
    const link = join(tmp, 'link-to-root');
    await symlink(root, link);
    const sub = join(root, 'sub');
    await mkdir(sub);
    const config = await load(base({ approvedDirectories: [link, `${root}/`, join(root, 'sub', '..', 'sub')] }));
    expect(config.approvedDirectories).toEqual([root, sub]);
  });

  it('accepts a state directory that does not exist yet (the store creates it)', async () => {
    const config = await load(base({ stateDirectory: join(tmp, 'new-state') }));
    expect(config.stateDirectory).toBe(join(tmp, 'new-state'));
  });

  it.each(['off', 'none', 'dynamic', 'minimal', 'low', 'medium', 'high', 'xhigh', 'max'])('accepts reasoningEffort %s', async (effort) => {
    expect((await load(base({ reasoningEffort: effort }))).reasoningEffort).toBe(effort);
  });

  it('accepts darwin with the sandbox explicitly off', async () => {
    await expect(load(base({ sandbox: 'off' }), { platform: 'darwin' })).resolves.toMatchObject({ sandbox: { mode: 'off' } });
  });
});

describe('loadConfig sandbox', () => {
  it('defaults to bwrap on Linux, found on PATH', async () => {
    const bwrap = await makeExecutable(join(binDir, 'bwrap'));
    expect((await load(base())).sandbox).toEqual({ mode: 'bwrap', bwrapPath: bwrap });
  });

  it('keeps bwrap (unavailable, never silently off) when no bwrap is found', async () => {
    expect((await load(base())).sandbox).toEqual({ mode: 'bwrap', bwrapPath: null });
  });

  it('takes an explicit bwrapPath as given; the trial run judges it', async () => {
    expect((await load(base({ bwrapPath: '/opt/bw/bwrap' }))).sandbox).toEqual({ mode: 'bwrap', bwrapPath: '/opt/bw/bwrap' });
  });

  it('"off" is an explicit choice', async () => {
    expect((await load(base({ sandbox: 'off' }))).sandbox).toEqual({ mode: 'off' });
  });

  it('refuses bwrapPath with the sandbox off, an unknown mode, and a relative bwrapPath', async () => {
    expect((await refusal(load(base({ sandbox: 'off', bwrapPath: '/usr/bin/bwrap' })))).key).toBe('bwrapPath');
    const mode = await refusal(load(base({ sandbox: 'landlock' })));
    expect(mode.key).toBe('sandbox');
    expect(mode.message).toContain('"bwrap", "off"');
    expect((await refusal(load(base({ bwrapPath: 'bwrap' })))).key).toBe('bwrapPath');
  });

  it('on macOS, refuses to start unless the sandbox is off, saying why', async () => {
    const missing = await refusal(load(base(), { platform: 'darwin' }));
    expect(missing.key).toBe('sandbox');
    expect(missing.message).toContain('"sandbox": "off"');
    expect((await refusal(load(base({ sandbox: 'bwrap' }), { platform: 'darwin' }))).key).toBe('sandbox');
  });
});

describe('loadConfig droid discovery', () => {
  it('prefers droid on PATH over ~/.local/bin', async () => {
    await mkdir(join(home, '.local', 'bin'), { recursive: true });
    await makeExecutable(join(home, '.local', 'bin', 'droid'));
    const config = await load(base(), { pathEnv: `/nonexistent-dir:${binDir}` });
    expect(config.droidPath).toBe(join(binDir, 'droid'));
  });

  it('falls back to ~/.local/bin/droid', async () => {
    await mkdir(join(home, '.local', 'bin'), { recursive: true });
    const local = await makeExecutable(join(home, '.local', 'bin', 'droid'));
    const config = await load(base(), { pathEnv: '/nonexistent-dir' });
    expect(config.droidPath).toBe(local);
  });

  it('skips non-executable files and relative PATH entries', async () => {
    const plain = join(tmp, 'plain');
    await mkdir(plain);
    await makeExecutable(join(plain, 'droid'), 0o644);
    await mkdir(join(home, '.local', 'bin'), { recursive: true });
    const local = await makeExecutable(join(home, '.local', 'bin', 'droid'));
    // "bin" relative to cwd would be resolved against wherever the controller started.
    const config = await load(base(), { pathEnv: `${plain}:bin:.` });
    expect(config.droidPath).toBe(local);
  });

  it('uses an explicit executable droidPath without searching', async () => {
    const explicit = await makeExecutable(join(tmp, 'my-droid'));
    const config = await load(base({ droidPath: explicit }), { pathEnv: '' });
    expect(config.droidPath).toBe(explicit);
  });

  it('refuses with droid_not_found and an install hint when nothing is found', async () => {
    await expectRefused(base(), 'droidPath', {
      code: 'droid_not_found',
      env: { pathEnv: '/nonexistent-dir' },
      mentions: ['curl -fsSL https://app.factory.ai/cli | sh', 'PATH', '~/.local/bin/droid'],
    });
  });

  it('refuses a droidPath that is not executable', async () => {
    const plain = join(tmp, 'plain-droid');
    await writeFile(plain, 'not a program');
    await chmod(plain, 0o644);
    await expectRefused(base({ droidPath: plain }), 'droidPath', { code: 'droid_not_found', mentions: [plain] });
  });

  it('refuses a droidPath that is a directory or missing', async () => {
    await expectRefused(base({ droidPath: binDir }), 'droidPath', { code: 'droid_not_found' });
    await expectRefused(base({ droidPath: join(tmp, 'missing') }), 'droidPath', { code: 'droid_not_found' });
  });

  it('refuses a relative droidPath', async () => {
    await expectRefused(base({ droidPath: 'bin/droid' }), 'droidPath', { mentions: ['absolute'] });
  });
});

describe('loadConfig refusals: file and platform', () => {
  it('refuses platforms other than linux and darwin', async () => {
    const err = await refusal(loadConfig(await writeConfig(base()), { platform: 'win32', home, pathEnv: binDir }));
    expect(err.code).toBe('config_invalid');
    expect(err.key).toBe('platform');
    expect(err.message).toContain('win32');
    expect(err.message).toMatch(/Linux or macOS/);
  });

  it('refuses a relative config path', async () => {
    const err = await refusal(loadConfig('config.json', { platform: 'linux' }));
    expect(err.key).toBe('--config');
    expect(err.message).toContain('--config');
    expect(err.message).toContain('absolute');
  });

  it('refuses a missing config file, naming it', async () => {
    const missing = join(tmp, 'nope.json');
    const err = await refusal(loadConfig(missing, { platform: 'linux' }));
    expect(err.key).toBe('--config');
    expect(err.message).toContain(missing);
    expect(err.message).toContain('does not exist');
  });

  it('refuses an unreadable config path (a directory)', async () => {
    const err = await refusal(loadConfig(tmp, { platform: 'linux' }));
    expect(err.key).toBe('--config');
    expect(err.message).toContain('directory');
  });

  it('refuses invalid JSON, saying which file and where', async () => {
    const path = await writeConfig('{ "approvedDirectories": [ ], }');
    const err = await refusal(loadConfig(path, { platform: 'linux' }));
    expect(err.code).toBe('config_invalid');
    expect(err.key).toBe('--config');
    expect(err.message).toContain(path);
    expect(err.message).toContain('not valid JSON');
  });

  it('refuses a config that is not a JSON object', async () => {
    await expectRefused([base()], '(top level)', { mentions: ['JSON object'] });
  });

  it('refuses unknown keys by name, listing allowed keys', async () => {
    await expectRefused(base({ maxConcurrentRun: 4 }), 'maxConcurrentRun', { mentions: ['maxConcurrentRuns'] });
  });

  it('lists every problem at once', async () => {
    const err = await refusal(load(base({ port: 0, transport: 'tcp' })));
    expect(err.message).toContain('"port"');
    expect(err.message).toContain('"transport"');
  });

  it('refuses null for optional keys', async () => {
    await expectRefused(base({ defaultModel: null }), 'defaultModel', { mentions: ['null'] });
  });
});

describe('loadConfig refusals: paths', () => {
  it('requires approvedDirectories', async () => {
    await expectRefused({ stateDirectory: state }, 'approvedDirectories', { mentions: ['required'] });
  });

  it('refuses an empty approvedDirectories', async () => {
    await expectRefused(base({ approvedDirectories: [] }), 'approvedDirectories');
  });

  it('refuses a non-array approvedDirectories', async () => {
    await expectRefused(base({ approvedDirectories: root }), 'approvedDirectories');
  });

  it('refuses a relative or ~ approved directory', async () => {
    await expectRefused(base({ approvedDirectories: [root, '~/projects'] }), 'approvedDirectories[1]', { mentions: ['~'] });
    await expectRefused(base({ approvedDirectories: ['projects/a'] }), 'approvedDirectories[0]', { mentions: ['absolute'] });
  });

  it('refuses a missing approved directory, naming it', async () => {
    const missing = join(tmp, 'missing');
    await expectRefused(base({ approvedDirectories: [root, missing] }), 'approvedDirectories[1]', {
      mentions: [missing, 'does not exist'],
    });
  });

  it('refuses an approved path that is a file', async () => {
    const file = join(tmp, 'file.txt');
    await writeFile(file, 'x');
    await expectRefused(base({ approvedDirectories: [file] }), 'approvedDirectories[0]', { mentions: ['not a directory'] });
  });

  it('requires stateDirectory', async () => {
    await expectRefused({ approvedDirectories: [root] }, 'stateDirectory', { mentions: ['required'] });
  });

  it('refuses a relative stateDirectory', async () => {
    await expectRefused(base({ stateDirectory: './state' }), 'stateDirectory', { mentions: ['absolute'] });
  });

  it('refuses a group/other-accessible stateDirectory with the chmod fix', async () => {
    await chmod(state, 0o750);
    await expectRefused(base(), 'stateDirectory', { mentions: ['chmod 700', state, '750'] });
    await chmod(state, 0o701);
    await expectRefused(base(), 'stateDirectory', { mentions: ['chmod 700'] });
  });

  it('refuses a stateDirectory that is a file', async () => {
    const file = join(tmp, 'state-file');
    await writeFile(file, 'x');
    await expectRefused(base({ stateDirectory: file }), 'stateDirectory', { mentions: ['not a directory'] });
  });
});

describe('loadConfig refusals: policy and limits', () => {
  it('refuses an unknown transport', async () => {
    await expectRefused(base({ transport: 'tcp' }), 'transport', { mentions: ['"stdio"', '"http"'] });
  });

  it('refuses an unknown maxAutonomy and defaultAutonomy', async () => {
    await expectRefused(base({ maxAutonomy: 'full' }), 'maxAutonomy');
    await expectRefused(base({ defaultAutonomy: 'HIGH' }), 'defaultAutonomy');
  });

  it('refuses a defaultAutonomy above maxAutonomy', async () => {
    await expectRefused(base({ maxAutonomy: 'low', defaultAutonomy: 'medium' }), 'defaultAutonomy', {
      mentions: ['maxAutonomy', 'off < low < medium < high'],
    });
    await expectRefused(base({ maxAutonomy: 'off', defaultAutonomy: 'low' }), 'defaultAutonomy');
  });

  it.each(['claude-opus-4-5-fast', 'gpt-5-fast', 'GPT-5-FAST', 'gpt-5-fast-preview', 'opus fast mode', 'opus_fastmode'])(
    'refuses the Fast-looking defaultModel %s',
    async (model) => {
      await expectRefused(base({ defaultModel: model }), 'defaultModel', { mentions: ['Fast', model] });
    },
  );

  it('refuses an empty or padded defaultModel', async () => {
    await expectRefused(base({ defaultModel: '' }), 'defaultModel');
    await expectRefused(base({ defaultModel: ' claude-opus-5-5' }), 'defaultModel');
  });

  it('refuses a defaultModel that is also excluded', async () => {
    await expectRefused(base({ defaultModel: 'm1', excludeModelIds: ['m1'] }), 'defaultModel', { mentions: ['excludeModelIds'] });
  });

  it('refuses an unknown reasoningEffort', async () => {
    await expectRefused(base({ reasoningEffort: 'extreme' }), 'reasoningEffort', { mentions: ['xhigh'] });
  });

  it('refuses a malformed excludeModelIds', async () => {
    await expectRefused(base({ excludeModelIds: 'm1' }), 'excludeModelIds');
    await expectRefused(base({ excludeModelIds: ['m1', 7] }), 'excludeModelIds[1]');
  });

  it.each([
    ['maxConcurrentRuns', 0],
    ['maxConcurrentRuns', 17],
    ['maxConcurrentRuns', 2.5],
    ['maxConcurrentRuns', '4'],
    ['runTimeoutMs', 999],
    ['runTimeoutMs', 2 ** 31],
    ['cancelGraceMs', 99],
    ['modelCacheTtlMs', 4999],
    ['modelCacheTtlMs', 600_001],
    ['port', 0],
    ['port', 65_536],
    ['warmPoolSize', -1],
    ['warmPoolSize', 17],
    ['warmPoolSize', 1.5],
  ])('refuses %s = %j', async (key, value) => {
    await expectRefused(base({ [key]: value }), key, { mentions: ['integer'] });
  });
});

describe('loadConfig: spend ceilings', () => {
  it('reads maxTurnTokens, maxTurnCredits and maxSessionCredits; absent is none', async () => {
    const config = await load(base({ maxTurnTokens: 50_000, maxTurnCredits: 2.5, maxSessionCredits: 10 }));
    expect(config.ceilings).toEqual({ maxTurnTokens: 50_000, maxTurnCredits: 2.5, maxSessionCredits: 10 });
    expect((await load(base({ maxTurnCredits: 1 }))).ceilings).toEqual({ maxTurnTokens: null, maxTurnCredits: 1, maxSessionCredits: null });
  });

  it.each([
    ['maxTurnTokens', 0, 'integer'],
    ['maxTurnTokens', 1.5, 'integer'],
    ['maxTurnCredits', 0, 'above 0'],
    ['maxTurnCredits', -1, 'above 0'],
    ['maxSessionCredits', '10', 'above 0'],
  ])('refuses %s = %j', async (key, value, mention) => {
    await expectRefused(base({ [key]: value }), key, { mentions: [mention] });
  });
});

describe('loadConfig: autoCompactAt (issue 40)', () => {
  it('reads a fraction of the context window; absent is off', async () => {
    expect((await load(base({ autoCompactAt: 0.8 }))).autoCompactAt).toBe(0.8);
    expect((await load(base({ autoCompactAt: 1 }))).autoCompactAt).toBe(1);
    expect((await load(base({}))).autoCompactAt).toBeUndefined();
  });

  it.each([0, -0.1, 1.5, '0.8', null])('refuses autoCompactAt = %j, naming what it takes', async (value) => {
    await expectRefused(base({ autoCompactAt: value }), 'autoCompactAt', { mentions: ['fraction of the context window'] });
  });
});

describe('loadConfig: warmPoolSize', () => {
  it('is 0 (pool off) or up to maxConcurrentRuns, never above', async () => {
    expect((await load(base({ warmPoolSize: 0 }))).warmPoolSize).toBe(0);
    expect((await load(base({ warmPoolSize: 2, maxConcurrentRuns: 2 }))).warmPoolSize).toBe(2);
    await expectRefused(base({ warmPoolSize: 3, maxConcurrentRuns: 2 }), 'warmPoolSize', { mentions: ['maxConcurrentRuns'] });
  });
});

describe('loadConfig refusals: http and reply-back', () => {
  it('requires tokenFile for http', async () => {
    await expectRefused(base({ transport: 'http' }), 'tokenFile', { mentions: ['required', 'http'] });
  });

  it('refuses a relative tokenFile', async () => {
    await expectRefused(base({ transport: 'http', tokenFile: 'token' }), 'tokenFile', { mentions: ['absolute'] });
  });

  it.each([
    'http://droid.example.com/mcp',
    'https://droid.example.com/other',
    'https://droid.example.com/mcp?x=1',
    'https://u:p@droid.example.com/mcp',
    'droid.example.com/mcp',
  ])('refuses publicUrl %s', async (url) => {
    await expectRefused(base({ publicUrl: url }), 'publicUrl', { mentions: ['https://', '/mcp'] });
  });

  it('refuses any other ampMcp url', async () => {
    await expectRefused(base({ ampMcp: { url: 'https://ampcode.com/mcp?profile=other' } }), 'ampMcp.url', {
      mentions: [AMP_MCP_URL],
    });
    await expectRefused(base({ ampMcp: { url: 'https://ampcode.com/mcp' } }), 'ampMcp.url');
  });

  it.each(['http://127.0.0.1:8123/mcp?profile=puck', 'http://127.0.0.1:9/', 'http://[::1]:8123/mcp'])(
    'accepts the loopback relay ampMcp url %s',
    async (url) => {
      const config = await load(base({ ampMcp: { url } }));
      expect(config.ampMcp).toEqual({ url });
    },
  );

  it.each([
    'http://localhost:8123/mcp',
    'http://127.0.0.1/mcp',
    'https://127.0.0.1:8123/mcp',
    'http://10.0.0.1:8123/mcp',
    'http://u:p@127.0.0.1:8123/mcp',
    'http://127.0.0.1:8123/mcp#x',
    'http://127.0.0.2:8123/mcp',
    'not a url',
  ])('refuses the ampMcp url %s, naming both accepted forms', async (url) => {
    await expectRefused(base({ ampMcp: { url } }), 'ampMcp.url', { mentions: [AMP_MCP_URL, '127.0.0.1'] });
  });

  it('refuses a thread in a loopback relay url too', async () => {
    await expectRefused(base({ ampMcp: { url: 'http://127.0.0.1:8123/mcp?threadID=T-1' } }), 'ampMcp.url', { mentions: ['thread', 'replyTo'] });
  });

  it('refuses a threadID in the ampMcp url with an explanation', async () => {
    await expectRefused(base({ ampMcp: { url: `${AMP_MCP_URL}&threadID=T-123` } }), 'ampMcp.url', {
      mentions: ['thread', 'replyTo'],
    });
  });

  it('refuses other keys in ampMcp', async () => {
    await expectRefused(base({ ampMcp: { threadID: 'T-1' } }), 'ampMcp.threadID', { mentions: ['replyTo'] });
    await expectRefused(base({ ampMcp: { headers: {} } }), 'ampMcp.headers', { mentions: ['url'] });
  });

  it('refuses a non-object ampMcp', async () => {
    await expectRefused(base({ ampMcp: true }), 'ampMcp');
    await expectRefused(base({ ampMcp: null }), 'ampMcp');
  });

  it('refuses the old top-level puck key with an explanation', async () => {
    await expectRefused(base({ puck: { conversationId: 'T-1' } }), 'puck', { mentions: ['replyTo', '"ampMcp": {}'] });
  });
});

describe('autonomy ordering and Fast heuristic', () => {
  it('orders autonomy off < low < medium < high', () => {
    expect(AUTONOMY_ORDER).toEqual(['off', 'low', 'medium', 'high']);
    expect(autonomyAtMost('off', 'off')).toBe(true);
    expect(autonomyAtMost('medium', 'high')).toBe(true);
    expect(autonomyAtMost('high', 'medium')).toBe(false);
    expect(autonomyAtMost('low', 'off')).toBe(false);
  });

  it('recognizes Fast ids and display names', () => {
    for (const s of ['gpt-5-fast', 'claude-opus-4-5-fast', 'Claude Opus 4.5 (Fast Mode)', 'GPT-5 Fast', 'fast', 'x_FASTMODE']) {
      expect(looksFast(s), s).toBe(true);
    }
  });

  it('does not flag words that merely contain "fast"', () => {
    for (const s of ['claude-opus-5-5', 'breakfast-model', 'fastest-model', 'steadfast', 'gpt-5', 'Claude Opus 4.5']) {
      expect(looksFast(s), s).toBe(false);
    }
  });
});

describe('state and token never where a turn writes (placement)', () => {
  it('refuses a state directory at, inside or above an approved root, naming the key', async () => {
    const inside = join(root, 'state');
    await mkdir(inside, { mode: 0o700 });
    // Private, so the mode check (which comes first) passes and placement is what refuses.
    await chmod(root, 0o700);
    await chmod(tmp, 0o700);
    for (const stateDirectory of [root, inside, tmp]) {
      const err = await refusal(load(base({ stateDirectory })));
      expect(err.key).toBe('stateDirectory');
      expect(err.message).toMatch(/approved root|temp folder/);
    }
  });

  it("refuses a state directory or token file inside droid's home, through a symlink too", async () => {
    const factory = join(home, '.factory');
    await mkdir(join(factory, 'state'), { recursive: true, mode: 0o700 });
    await symlink(factory, join(tmp, 'factory-link'));
    let err = await refusal(load(base({ stateDirectory: join(tmp, 'factory-link', 'state') }), { factoryDir: factory }));
    expect(err.key).toBe('stateDirectory');
    expect(err.message).toContain("droid's home");
    await writeFile(join(factory, 'token'), 'x'.repeat(40), { mode: 0o600 });
    err = await refusal(load(base({ transport: 'http', tokenFile: join(factory, 'token') }), { factoryDir: factory }));
    expect(err.key).toBe('tokenFile');
  });

  it('refuses a token file inside an approved root, and a state directory that does not exist yet inside one', async () => {
    await writeFile(join(root, 'token'), 'x'.repeat(40), { mode: 0o600 });
    let err = await refusal(load(base({ transport: 'http', tokenFile: join(root, 'token') })));
    expect(err.key).toBe('tokenFile');
    err = await refusal(load(base({ stateDirectory: join(root, 'not', 'yet') })));
    expect(err.key).toBe('stateDirectory');
  });

  it('accepts state and token beside the approved roots', async () => {
    await writeFile(join(tmp, 'token'), 'x'.repeat(40), { mode: 0o600 });
    const config = await load(base({ transport: 'http', tokenFile: join(tmp, 'token') }), { factoryDir: join(home, '.factory') });
    expect(config.stateDirectory).toBe(state);
  });
});

describe('no approved root holds droid home or the temp folder (placement)', () => {
  it("refuses an approved root at, above or inside droid's home", async () => {
    const factory = join(root, 'svc', '.factory');
    await mkdir(factory, { recursive: true });
    for (const dir of [join(root, 'svc'), factory, join(factory, 'sessions')]) {
      await mkdir(dir, { recursive: true });
      const err = await refusal(load(base({ approvedDirectories: [dir] }), { factoryDir: factory }));
      expect(err.key).toBe('approvedDirectories');
      expect(err.message).toContain("droid's home");
    }
  });

  it('refuses an approved root holding the system temp folder, and accepts one below it', async () => {
    const err = await refusal(load(base({ approvedDirectories: [await realpath(tmpdir())] }), { factoryDir: '/nonexistent-home/.factory' }));
    expect(err.key).toBe('approvedDirectories');
    expect(err.message).toContain('temp folder');
    expect((await load(base())).approvedDirectories).toEqual([root]);
  });
});

describe("droid's home may not link into an approved root (placement)", () => {
  it('refuses a settings file or a hook in droid home that links into an approved root, naming the link', async () => {
    const factory = join(home, '.factory');
    await mkdir(join(factory, 'hooks'), { recursive: true });
    await writeFile(join(root, 'settings.json'), '{}');
    await symlink(join(root, 'settings.json'), join(factory, 'settings.json'));
    let err = await refusal(load(base(), { factoryDir: factory }));
    expect(err.key).toBe('approvedDirectories');
    expect(err.message).toContain(join(factory, 'settings.json'));
    await rm(join(factory, 'settings.json'));
    await symlink(join(root, 'settings.json'), join(factory, 'hooks', 'pre.sh'));
    err = await refusal(load(base(), { factoryDir: factory }));
    expect(err.message).toContain(join(factory, 'hooks', 'pre.sh'));
    // Links elsewhere, and links in droid's scratch, are fine.
    await rm(join(factory, 'hooks', 'pre.sh'));
    await symlink('/etc/hostname', join(factory, 'hooks', 'pre.sh'));
    await mkdir(join(factory, 'cache'));
    await symlink(root, join(factory, 'cache', 'into-root'));
    expect((await load(base(), { factoryDir: factory })).approvedDirectories).toEqual([root]);
  });
});

describe('no approved root holds what the controller runs unconfined (placement)', () => {
  const expectHolds = (err: ConfigError, what: string, path: string, through?: string) => {
    expect(err.key).toBe('approvedDirectories');
    expect(err.message).toContain(`holds ${what} ${path}${through === undefined ? '' : ` (through ${through})`}, which runs outside the sandbox`);
  };

  it("refuses a root holding droid-mcp's install, the Node executable or a PATH entry, naming it", async () => {
    const install = join(root, 'tools', 'droid-mcp');
    await mkdir(install, { recursive: true });
    expectHolds(await refusal(load(base(), { installDir: install })), "droid-mcp's install", install);
    await mkdir(join(root, 'node'));
    const node = await makeExecutable(join(root, 'node', 'node'));
    expectHolds(await refusal(load(base(), { nodePath: node })), 'the Node.js executable', node);
    // A program planted there would run wherever the controller calls one by name.
    expectHolds(await refusal(load(base(), { pathEnv: `${binDir}:${join(root, 'node')}` })), 'the PATH entry', join(root, 'node'));
    // Beside the root, not in it: accepted.
    const config = await load(base(), { installDir: join(tmp, 'droid-mcp'), nodePath: join(tmp, 'node') });
    expect(config.approvedDirectories).toEqual([root]);
  });

  it('refuses a droid in a root, or any link on the way to it that lies in one, wherever in the path', async () => {
    const inside = await makeExecutable(join(root, 'droid'));
    expectHolds(await refusal(load(base({ droidPath: inside }))), 'the droid executable', inside);
    // A link outside the root that leads into it.
    await symlink(inside, join(tmp, 'droid-link'));
    expectHolds(await refusal(load(base({ droidPath: join(tmp, 'droid-link') }))), 'the droid executable', join(tmp, 'droid-link'), inside);
    // A link inside the root that leads out: the turn can replace the link.
    await symlink(join(binDir, 'droid'), join(root, 'droid-out'));
    expectHolds(await refusal(load(base({ droidPath: join(root, 'droid-out') }))), 'the droid executable', join(root, 'droid-out'));
    // A folder on the way that is a link in the root (the last part is not a link).
    await symlink(binDir, join(root, 'tools'));
    expectHolds(
      await refusal(load(base({ droidPath: join(root, 'tools', 'droid') }))),
      'the droid executable',
      join(root, 'tools', 'droid'),
      join(root, 'tools'),
    );
    // A link outside whose target is a relative link chain through the root.
    await symlink(join('root', 'tools', 'droid'), join(tmp, 'chain'));
    expectHolds(await refusal(load(base({ droidPath: join(tmp, 'chain') }))), 'the droid executable', join(tmp, 'chain'), join(root, 'tools'));
    expect((await load(base({ droidPath: join(binDir, 'droid') }))).droidPath).toBe(join(binDir, 'droid'));
  });

  it('refuses a bwrap in a root, and still reports a misplaced state directory first when droid is missing (init relies on it)', async () => {
    const bwrap = await makeExecutable(join(root, 'bwrap'));
    expectHolds(await refusal(load(base({ bwrapPath: bwrap }))), 'the bwrap executable', bwrap);
    await mkdir(join(root, 'state'), { mode: 0o700 });
    const err = await refusal(load(base({ stateDirectory: join(root, 'state') }), { pathEnv: join(tmp, 'empty') }));
    expect(err.key).toBe('stateDirectory');
  });
});

describe('unconfined programs', () => {
  it("names this checkout's root (the folder holding package.json and node_modules) as droid-mcp's install", () => {
    const repository = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
    expect(installRoot()).toBe(repository);
  });
});

describe('loadConfig network and sandboxReadable (issue 37)', () => {
  it('keeps an allow list (deduplicated) and mode open', async () => {
    const config = await load(
      base({ network: { allow: ['registry.npmjs.org', '*.github.com', '127.0.0.1:4873', 'registry.npmjs.org'] }, sandboxReadable: [join(home, '.pyenv')] }),
    );
    expect(config.network).toEqual({ mode: 'proxy', allow: ['registry.npmjs.org', '*.github.com', '127.0.0.1:4873'] });
    expect(config.sandboxReadable).toEqual([join(home, '.pyenv')]);
    expect((await load(base({ network: { mode: 'open' } }))).network).toEqual({ mode: 'open', allow: [] });
  });

  it('refuses a malformed allow entry, an unknown network key or mode, naming what to write', async () => {
    await expectRefused(base({ network: { allow: ['https://registry.npmjs.org'] } }), 'network.allow[0]', { mentions: ['no scheme'] });
    await expectRefused(base({ network: { allow: ['host:99999'] } }), 'network.allow[0]', { mentions: ['port'] });
    await expectRefused(base({ network: { mode: 'wide' } }), 'network.mode', { mentions: ['"proxy", "open"'] });
    await expectRefused(base({ network: { allowed: [] } }), 'network.allowed');
  });

  it('refuses a readable path that would undo a cover: /, a whole home, an approved root, the state directory', async () => {
    await expectRefused(base({ sandboxReadable: ['/'] }), 'sandboxReadable', { mentions: ['whole host'] });
    await expectRefused(base({ sandboxReadable: [home] }), 'sandboxReadable', { mentions: ['home'] });
    await expectRefused(base({ sandboxReadable: [join(root, 'sub')] }), 'sandboxReadable', { mentions: ['approved root'] });
    await expectRefused(base({ sandboxReadable: [dirname(state)] }), 'sandboxReadable');
    await expectRefused(base({ sandboxReadable: [join(home, '.factory', 'sessions')] }), 'sandboxReadable', { mentions: ["droid's home"] });
    await expectRefused(base({ sandboxReadable: ['relative/path'] }), 'sandboxReadable[0]', { mentions: ['absolute'] });
  });
});
