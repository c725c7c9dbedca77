import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { sessionFolderName } from '../../../../../src/sandbox/session-copy.js';
import { relocateFork } from '../../../../../src/worker/child/session/relocate-fork.js';

const ID = '3709f433-37e3-4602-ae47-48a455b9052d';
const FROM = '/srv/repos/project';
const TO = '/srv/checkouts/fork';
const dirs: string[] = [];

afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** droid's sessions folder holding a fork of ID as droid 0.225.2 writes it, with `first` as its first line. */
function sessions(first: object | string): string {
  const dir = mkdtempSync(join(tmpdir(), 'relocate-'));
  dirs.push(dir);
  const folder = join(dir, sessionFolderName(FROM));
  mkdirSync(folder);
  writeFileSync(join(folder, `${ID}.jsonl`), `${typeof first === 'string' ? first : JSON.stringify(first)}\n{"type":"message","id":"m1"}\n`);
  writeFileSync(join(folder, `${ID}.settings.json`), '{"s":1}');
  return dir;
}

describe('relocateFork', () => {
  it("moves droid's fork to the new directory's folder, its first line naming that directory and nothing else changed", async () => {
    const root = sessions({ type: 'session_start', id: ID, cwd: FROM, lastCwd: FROM, title: 't' });
    await relocateFork(root, ID, FROM, TO);
    expect(readdirSync(root)).toEqual([sessionFolderName(TO)]);
    const [first, rest] = readFileSync(join(root, sessionFolderName(TO), `${ID}.jsonl`), 'utf8').split(/\n(.*)/s);
    expect(JSON.parse(first!)).toEqual({ type: 'session_start', id: ID, cwd: TO, title: 't' });
    expect(rest).toBe('{"type":"message","id":"m1"}\n');
    expect(readFileSync(join(root, sessionFolderName(TO), `${ID}.settings.json`), 'utf8')).toBe('{"s":1}');
  });

  it.each([
    ['a first line that is not JSON', 'garbage'],
    ['another id', { type: 'session_start', id: 'other', cwd: FROM }],
    ['another directory', { type: 'session_start', id: ID, cwd: '/elsewhere' }],
    ['no session start', { type: 'message', id: ID, cwd: FROM }],
  ])('refuses %s, moving nothing', async (_what, first) => {
    const root = sessions(first);
    await expect(relocateFork(root, ID, FROM, TO)).rejects.toMatchObject({ code: 'session_power_failed' });
    expect(readdirSync(root)).toEqual([sessionFolderName(FROM)]);
  });

  it('refuses a transcript that is a link, and never writes over a file already there', async () => {
    const root = sessions({ type: 'session_start', id: ID, cwd: FROM });
    const transcript = join(root, sessionFolderName(FROM), `${ID}.jsonl`);
    rmSync(transcript);
    symlinkSync('/etc/passwd', transcript);
    await expect(relocateFork(root, ID, FROM, TO)).rejects.toMatchObject({ code: 'session_power_failed' });
    const again = sessions({ type: 'session_start', id: ID, cwd: FROM });
    mkdirSync(join(again, sessionFolderName(TO)));
    writeFileSync(join(again, sessionFolderName(TO), `${ID}.jsonl`), 'there\n');
    await expect(relocateFork(again, ID, FROM, TO)).rejects.toThrow();
    expect(readFileSync(join(again, sessionFolderName(TO), `${ID}.jsonl`), 'utf8')).toBe('there\n');
  });
});
