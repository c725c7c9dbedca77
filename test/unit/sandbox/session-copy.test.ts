import { execFileSync } from 'node:child_process';
import { removeTree } from '../../../src/util/remove-tree.js';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { prepareSessionCopy, recoverSessionCopies, sessionFolderName } from '../../../src/sandbox/session-copy.js';
import { privateTmpRoot } from '../../../src/sandbox/turn-paths.js';

const ID = '3709f433-37e3-4602-ae47-48a455b9052d';
const OTHER = '57f5faa6-8a61-4dea-a607-c52534e5a632';
const WORKSPACE = '/srv/repos/project';
let home: string | undefined;
const runId = () => `r-${randomUUID()}`;
const real = () => join(home!, 'sessions', sessionFolderName(WORKSPACE));

afterEach(() => {
  if (home) rmSync(home, { recursive: true, force: true });
});

function makeHome(): void {
  home = mkdtempSync(join(tmpdir(), 'session-copy-'));
  mkdirSync(real(), { recursive: true });
  writeFileSync(join(real(), `${ID}.jsonl`), 'mine\n');
  writeFileSync(join(real(), `${ID}.settings.json`), '{"mine":true}');
  writeFileSync(join(real(), `${OTHER}.jsonl`), 'theirs\n');
}

describe('session copy', () => {
  it("droid's folder is the workspace path with every / as -", async () => {
    expect(sessionFolderName('/tmp/a b.c_d@e')).toBe('-tmp-a b.c_d@e');
  });

  it("a resumed turn sees only its own session's files", async () => {
    makeHome();
    const copy = prepareSessionCopy(home!, WORKSPACE, ID, runId());
    try {
      expect(readdirSync(copy.dir)).toEqual([sessionFolderName(WORKSPACE)]);
      expect(readdirSync(join(copy.dir, sessionFolderName(WORKSPACE))).sort()).toEqual([`${ID}.jsonl`, `${ID}.settings.json`]);
    } finally {
      await copy.dispose();
    }
    expect(existsSync(copy.dir)).toBe(false);
  });

  it("only this session's regular files come back; other ids, folders and symlinks are refused, droid's by-products dropped", async () => {
    makeHome();
    const copy = prepareSessionCopy(home!, WORKSPACE, ID, runId());
    const mine = join(copy.dir, sessionFolderName(WORKSPACE));
    writeFileSync(join(mine, `${ID}.jsonl`), 'mine\nturn two\n');
    writeFileSync(join(mine, `${ID}.settings.json.bak`), 'bak');
    mkdirSync(join(mine, `${ID}.jsonl.events.lock`));
    writeFileSync(join(mine, `${OTHER}.jsonl`), 'forged\n');
    rmSync(join(mine, `${ID}.settings.json`));
    symlinkSync('/etc/passwd', join(mine, `${ID}.settings.json`));
    mkdirSync(join(copy.dir, '-elsewhere'));
    writeFileSync(join(copy.dir, '-elsewhere', `${ID}.jsonl`), 'elsewhere\n');
    const result = await copy.commit(ID);
    await copy.dispose();
    expect(result.copied).toEqual([`${ID}.jsonl`]);
    expect(result.refused.sort()).toEqual(
      [`-elsewhere: not this workspace's folder`, `${ID}.settings.json: not a regular file`, `${OTHER}.jsonl: not a file of this session`].sort(),
    );
    expect(readdirSync(real()).filter((n) => n.startsWith('.'))).toEqual([]); // no temp file left
    expect(readFileSync(join(real(), `${ID}.jsonl`), 'utf8')).toBe('mine\nturn two\n');
    expect(readFileSync(join(real(), `${ID}.settings.json`), 'utf8')).toBe('{"mine":true}');
    expect(readFileSync(join(real(), `${OTHER}.jsonl`), 'utf8')).toBe('theirs\n');
    expect(readdirSync(real()).sort()).toEqual([`${ID}.jsonl`, `${ID}.settings.json`, `${OTHER}.jsonl`].sort());
    expect(existsSync(join(home!, 'sessions', '-elsewhere'))).toBe(false);
  });

  it("a new session's files come back into the workspace's folder, created when missing", async () => {
    home = mkdtempSync(join(tmpdir(), 'session-copy-'));
    const copy = prepareSessionCopy(home!, WORKSPACE, null, runId());
    const mine = join(copy.dir, sessionFolderName(WORKSPACE));
    expect(readdirSync(mine)).toEqual([]);
    writeFileSync(join(mine, `${ID}.jsonl`), 'new\n');
    expect(await copy.commit(ID)).toEqual({ copied: [`${ID}.jsonl`], refused: [] });
    await copy.dispose();
    expect(readFileSync(join(real(), `${ID}.jsonl`), 'utf8')).toBe('new\n');
  });

  it("a session a fork, rewind or compaction made (issue 40) comes back, but never over a file droid's folder already has", async () => {
    makeHome();
    const copy = prepareSessionCopy(home!, WORKSPACE, ID, runId());
    const mine = join(copy.dir, sessionFolderName(WORKSPACE));
    const made = randomUUID();
    writeFileSync(join(mine, `${made}.jsonl`), 'made\n');
    expect(await copy.commit(made, true)).toMatchObject({ copied: [`${made}.jsonl`] });
    // A power that names an id droid's folder has (another session's): nothing of it is replaced.
    writeFileSync(join(mine, `${OTHER}.jsonl`), 'forged\n');
    const refused = await copy.commit(OTHER, true);
    await copy.dispose();
    expect(refused.copied).toEqual([]);
    expect(refused.refused.join('\n')).toContain(`${OTHER}.jsonl: droid's sessions folder already has it`);
    expect(readFileSync(join(real(), `${OTHER}.jsonl`), 'utf8')).toBe('theirs\n');
    expect(readFileSync(join(real(), `${made}.jsonl`), 'utf8')).toBe('made\n');
  });

  it('a fork reads its source from the folder of the workspace the source ran in (issue 40)', async () => {
    makeHome();
    const copy = prepareSessionCopy(home!, '/srv/checkouts/fork', null, runId());
    copy.fill(ID, WORKSPACE);
    try {
      expect(readdirSync(join(copy.dir, sessionFolderName('/srv/checkouts/fork'))).sort()).toEqual([`${ID}.jsonl`, `${ID}.settings.json`]);
    } finally {
      await copy.dispose();
    }
  });

  it('an id that is not a UUID copies nothing back', async () => {
    home = mkdtempSync(join(tmpdir(), 'session-copy-'));
    const copy = prepareSessionCopy(home!, WORKSPACE, null, runId());
    writeFileSync(join(copy.dir, sessionFolderName(WORKSPACE), '..jsonl'), 'x');
    expect((await copy.commit('.')).copied).toEqual([]);
    expect((await copy.commit(null)).copied).toEqual([]);
    await copy.dispose();
  });
});

describe('session copy: hostile shapes and crashes', () => {
  it('a FIFO in place of the transcript is refused at once (never waited on)', async () => {
    makeHome();
    const copy = prepareSessionCopy(home!, WORKSPACE, ID, runId());
    const mine = join(copy.dir, sessionFolderName(WORKSPACE));
    rmSync(join(mine, `${ID}.jsonl`));
    execFileSync('mkfifo', [join(mine, `${ID}.jsonl`)]);
    const result = await copy.commit(ID);
    await copy.dispose();
    expect(result.refused).toContain(`${ID}.jsonl: not a regular file`);
    expect(readFileSync(join(real(), `${ID}.jsonl`), 'utf8')).toBe('mine\n');
  });

  it('the workspace folder replaced by a symlink copies nothing back', async () => {
    makeHome();
    const copy = prepareSessionCopy(home!, WORKSPACE, ID, runId());
    const mine = join(copy.dir, sessionFolderName(WORKSPACE));
    rmSync(mine, { recursive: true });
    const elsewhere = mkdtempSync(join(tmpdir(), 'elsewhere-'));
    writeFileSync(join(elsewhere, `${ID}.jsonl`), 'from a symlinked folder\n');
    symlinkSync(elsewhere, mine);
    const result = await copy.commit(ID);
    await copy.dispose();
    rmSync(elsewhere, { recursive: true, force: true });
    expect(result.copied).toEqual([]);
    expect(readFileSync(join(real(), `${ID}.jsonl`), 'utf8')).toBe('mine\n');
  });

  it("a copy a dead controller left is committed for this state's runs only, then removed", async () => {
    makeHome();
    const ours = runId();
    const theirs = runId();
    for (const id of [ours, theirs]) {
      const copy = prepareSessionCopy(home!, WORKSPACE, ID, id);
      writeFileSync(join(copy.dir, sessionFolderName(WORKSPACE), `${ID}.jsonl`), `after the crash ${id}\n`);
    }
    mkdirSync(join(privateTmpRoot(), `turn-${ours}`));
    const recovered = await recoverSessionCopies(home!, (id) => (id === ours ? { droidSessionId: ID, workspace: WORKSPACE } : null));
    expect(recovered).toEqual([{ runId: ours, copied: [`${ID}.jsonl`, `${ID}.settings.json`].sort(), refused: [] }]);
    expect(readFileSync(join(real(), `${ID}.jsonl`), 'utf8')).toBe(`after the crash ${ours}\n`);
    expect(existsSync(join(privateTmpRoot(), `sessions-${ours}`))).toBe(false);
    expect(existsSync(join(privateTmpRoot(), `turn-${ours}`))).toBe(false);
    expect(existsSync(join(privateTmpRoot(), `sessions-${theirs}`))).toBe(true);
    rmSync(join(privateTmpRoot(), `sessions-${theirs}`), { recursive: true, force: true });
  });

  it("a turn's TMPDIR left without its copy (a kill between the two removals) goes too, for this state's runs only", async () => {
    makeHome();
    const [ours, theirs] = [runId(), runId()];
    for (const id of [ours, theirs]) mkdirSync(join(privateTmpRoot(), `turn-${id}`, 'inside'), { recursive: true });
    expect(await recoverSessionCopies(home!, (id) => (id === ours ? { droidSessionId: ID, workspace: WORKSPACE } : null))).toEqual([]);
    expect(existsSync(join(privateTmpRoot(), `turn-${ours}`))).toBe(false);
    expect(existsSync(join(privateTmpRoot(), `turn-${theirs}`))).toBe(true);
    rmSync(join(privateTmpRoot(), `turn-${theirs}`), { recursive: true, force: true });
  });
});

describe('session copy: what a turn can leave for the controller to remove or copy', () => {
  it('a sparse transcript is refused, and no temp file is left', async () => {
    makeHome();
    const copy = prepareSessionCopy(home!, WORKSPACE, ID, runId());
    const mine = join(copy.dir, sessionFolderName(WORKSPACE));
    execFileSync('truncate', ['-s', '200M', join(mine, `${ID}.jsonl`)]);
    const result = await copy.commit(ID);
    await copy.dispose();
    expect(result.refused).toContain(`${ID}.jsonl: a sparse file`);
    expect(readFileSync(join(real(), `${ID}.jsonl`), 'utf8')).toBe('mine\n');
    expect(readdirSync(real()).filter((n) => n.startsWith('.'))).toEqual([]);
  });

  it('a folder its owner may not list or unlink is removed anyway, and removal never throws', async () => {
    makeHome();
    const copy = prepareSessionCopy(home!, WORKSPACE, ID, runId());
    const locked = join(copy.dir, sessionFolderName(WORKSPACE), 'locked');
    mkdirSync(join(locked, 'inner'), { recursive: true });
    writeFileSync(join(locked, 'inner', 'x'), 'x');
    chmodSync(join(locked, 'inner'), 0o500);
    chmodSync(locked, 0o000);
    expect(await copy.dispose()).toBeNull();
    expect(existsSync(copy.dir)).toBe(false);
    expect(await removeTree(join(copy.dir, 'never-was'))).toBeNull();
  });

  it('only a few of a million-name mess are named in the report', async () => {
    makeHome();
    const copy = prepareSessionCopy(home!, WORKSPACE, ID, runId());
    const mine = join(copy.dir, sessionFolderName(WORKSPACE));
    for (let i = 0; i < 500; i++) writeFileSync(join(mine, `junk-${i}`), '');
    const result = await copy.commit(ID);
    await copy.dispose();
    expect(result.refused.length).toBeLessThanOrEqual(20);
    expect(result.copied.sort()).toEqual([`${ID}.jsonl`, `${ID}.settings.json`]);
  });
});
