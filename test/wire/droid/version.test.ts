/**
 * `droid --version` against the real CLI the test bed runs (pinned, or
 * $DROID_MCP_TEST_DROID), the mock, and binaries that misbehave.
 */
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { readDroidVersion } from '../../../src/droid/version.js';
import { DROID_PATH, MOCK_DROID } from '../../support/paths.js';

const dir = mkdtempSync(join(tmpdir(), 'droid-version-'));
const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: dir };
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function script(name: string, body: string): string {
  const path = join(dir, name);
  writeFileSync(path, `#!/bin/sh\n${body}\n`);
  chmodSync(path, 0o700);
  return path;
}

describe('readDroidVersion', () => {
  it('reads the real CLI version: the version of the npm package that installed the binary', async () => {
    const installed = (JSON.parse(readFileSync(join(dirname(DROID_PATH), '..', 'package.json'), 'utf8')) as { version: string }).version;
    expect(await readDroidVersion(DROID_PATH, env)).toBe(installed);
  });

  it('accepts a pre-release suffix (the mock prints 0.225.2-mock)', async () => {
    expect(await readDroidVersion(MOCK_DROID, env)).toBe('0.225.2-mock');
  });

  it('names what went wrong: not a version, a failing binary, a hanging one, a missing one', async () => {
    await expect(readDroidVersion(script('chatty', 'echo "Welcome to droid!"'), env)).rejects.toMatchObject({
      code: 'droid_version_unreadable',
      message: 'droid --version printed "Welcome to droid!", not a version number',
    });
    await expect(readDroidVersion(script('broken', 'echo "no such flag" >&2; exit 3'), env)).rejects.toMatchObject({
      code: 'droid_version_unreadable',
      message: 'droid --version failed (3): no such flag',
    });
    await expect(readDroidVersion(script('hung', 'exec sleep 30'), env, 300)).rejects.toMatchObject({
      code: 'droid_version_unreadable',
      message: 'droid --version did not answer within 300 ms',
    });
    await expect(readDroidVersion(join(dir, 'absent'), env)).rejects.toMatchObject({ code: 'droid_not_found' });
  });
});
