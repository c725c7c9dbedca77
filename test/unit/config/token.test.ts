import { chmod, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError } from '../../../src/config/errors.js';
import { readTokenFile } from '../../../src/config/token.js';

const GOOD = 'Ab3_-'.repeat(7) + 'xyz01'; // 40 URL-safe characters
let dir: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'droid-mcp-token-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function tokenFile(content: string, mode = 0o600): Promise<string> {
  const path = join(dir, `token-${Math.random().toString(36).slice(2)}`);
  await writeFile(path, content, { mode });
  await chmod(path, mode);
  return path;
}

async function refusal(path: string, uid?: number): Promise<ConfigError> {
  const err = await readTokenFile(path, uid).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ConfigError);
  const configError = err as ConfigError;
  expect(configError.key).toBe('tokenFile');
  // Every refusal says how to make a good file, and never echoes the contents.
  expect(configError.message).toContain('umask 077;');
  expect(configError.message).toContain("randomBytes(32).toString('base64url')");
  expect(configError.message).toContain(path);
  return configError;
}

describe('readTokenFile', () => {
  it('reads a private token file, with or without a trailing newline', async () => {
    expect(await readTokenFile(await tokenFile(GOOD))).toBe(GOOD);
    expect(await readTokenFile(await tokenFile(`${GOOD}\n`))).toBe(GOOD);
    expect(await readTokenFile(await tokenFile(`${GOOD}\n`, 0o400))).toBe(GOOD);
  });

  it('accepts what the documented command makes', async () => {
    const path = join(dir, 'made');
    execFileSync('sh', ['-c', `umask 077; ${JSON.stringify(process.execPath)} -p "require('crypto').randomBytes(32).toString('base64url')" > ${path}`]);
    expect(await readTokenFile(path)).toMatch(/^[A-Za-z0-9_-]{43}$/);
  });

  it.each([0o640, 0o604, 0o644, 0o660, 0o601])('refuses mode %s (group/other bits)', async (mode) => {
    const err = await refusal(await tokenFile(GOOD, mode));
    expect(err.message).toContain('accessible by group/other');
  });

  it('refuses a file owned by another user', async () => {
    const path = await tokenFile(GOOD);
    const err = await refusal(path, (process.getuid?.() ?? 0) + 1);
    expect(err.message).toContain('not by the service user');
  });

  it.each([
    ['too short', 'a'.repeat(31), 'at least 32'],
    ['empty', '', 'at least 32'],
    ['only a newline', '\n', 'at least 32'],
    ['padded base64', `${'a'.repeat(40)}==`, 'URL-safe'],
    ['standard base64 characters', `${'a'.repeat(40)}+/`, 'URL-safe'],
    ['surrounding spaces', ` ${GOOD} `, 'URL-safe'],
    ['two lines', `${GOOD}\n${GOOD}\n`, 'URL-safe'],
    ['a CRLF ending', `${GOOD}\r\n`, 'URL-safe'],
    ['two trailing newlines', `${GOOD}\n\n`, 'URL-safe'],
  ])('refuses a token that is %s', async (_what, content, mentions) => {
    const err = await refusal(await tokenFile(content));
    expect(err.message).toContain(mentions);
    if (content.trim().length > 0) expect(err.message).not.toContain(content.trim());
  });

  it('refuses a missing file, a directory, and an oversized file', async () => {
    expect((await refusal(join(dir, 'absent'))).message).toContain('does not exist');
    expect((await refusal(dir)).message).toContain('not a regular file');
    expect((await refusal(await tokenFile('a'.repeat(5000)))).message).toContain('too large');
  });

  it('checks the file a symlink points to', async () => {
    const target = await tokenFile(GOOD, 0o644);
    const link = join(dir, 'link');
    await symlink(target, link);
    expect((await refusal(link)).message).toContain('accessible by group/other');
  });
});
