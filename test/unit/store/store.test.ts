import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { appendFile, chmod, mkdir, mkdtemp, readdir, readFile, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { hostname, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { StoreError } from '../../../src/store/errors.js';
import type { Log } from '../../../src/util/logger.js';
import type { RunRecord, RunState, SessionRecord } from '../../../src/shared/records.js';
import { STATE_FILE, writeSnapshot } from '../../../src/store/formats/snapshot.js';
import { COMPACT_MIN_LINES, StateStore } from '../../../src/store/store.js';
import { runRecord, sessionRecord } from '../../support/records.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const silent: Log = { info() {}, warn() {}, error() {} };
const T0 = '2030-01-01T00:00:00.000Z';

// ---- fixtures ----

const bases: string[] = [];
const children: ChildProcess[] = [];

afterEach(async () => {
  for (const child of children.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  for (const base of bases.splice(0)) await rm(base, { recursive: true, force: true });
});

/** A state directory path inside a private temp dir; the directory itself does not exist yet. */
async function stateDir(): Promise<string> {
  const base = await mkdtemp(join(tmpdir(), 'droid-mcp-store-'));
  bases.push(base);
  return join(base, 'state');
}

function session(id: string, headRunId: string, over: Partial<SessionRecord> = {}): SessionRecord {
  return sessionRecord({ id, createdAt: T0, updatedAt: T0, workspace: '/work/space', headRunId, ...over });
}

function run(id: string, sessionId: string, seq: number, over: Partial<RunRecord> = {}): RunRecord {
  return runRecord({
    id,
    sessionId,
    seq,
    requestKey: null,
    settings: { model: 'model-a', autonomy: 'low', reasoningEffort: null },
    state: 'queued',
    acceptedAt: T0,
    startedAt: null,
    endedAt: null,
    reason: null,
    hasResult: false,
    ...over,
  });
}

/** Every entry under `dir` with its bytes (directories as null), for before/after comparison. */
async function listing(dir: string): Promise<Record<string, string | null>> {
  const out: Record<string, string | null> = {};
  async function walk(rel: string): Promise<void> {
    for (const entry of await readdir(join(dir, rel), { withFileTypes: true })) {
      const path = join(rel, entry.name);
      if (entry.isDirectory()) {
        out[path + '/'] = null;
        await walk(path);
      } else {
        out[path] = (await readFile(join(dir, path))).toString('base64');
      }
    }
  }
  await walk('');
  return out;
}

/** The snapshot's lines: header first, then one record per line; the file ends with a newline. */
async function snapshotLines(dir: string): Promise<string[]> {
  const text = await readFile(join(dir, STATE_FILE), 'utf8');
  expect(text.endsWith('\n')).toBe(true);
  return text.slice(0, -1).split('\n');
}

/** The snapshot parsed: its header and its records in file order. */
async function readSnapshot(dir: string): Promise<{ header: Record<string, unknown>; sessions: SessionRecord[]; runs: RunRecord[] }> {
  const [header, ...lines] = (await snapshotLines(dir)).map((line) => JSON.parse(line) as Record<string, unknown>);
  return {
    header: header!,
    sessions: lines.filter((l) => 'session' in l).map((l) => l.session as SessionRecord),
    runs: lines.filter((l) => 'run' in l).map((l) => l.run as RunRecord),
  };
}

/** A logger that keeps the warnings. */
function capture(): { log: Log; warnings: Array<{ obj: Record<string, unknown>; msg: string }> } {
  const warnings: Array<{ obj: Record<string, unknown>; msg: string }> = [];
  return { warnings, log: { info() {}, error() {}, warn: (obj, msg) => warnings.push({ obj: obj as Record<string, unknown>, msg }) } };
}

async function openStore(dir: string, now = () => new Date(T0)): Promise<StateStore> {
  return StateStore.open(dir, { now, logger: silent });
}

async function refusal(dir: string): Promise<StoreError> {
  try {
    const store = await openStore(dir);
    await store.close();
  } catch (err) {
    expect(err).toBeInstanceOf(StoreError);
    return err as StoreError;
  }
  throw new Error('open should have been refused');
}

/** Asserts that opening `dir` is refused with `code` and leaves every byte and name as it was. */
async function expectRefusedUntouched(dir: string, code: StoreError['code']): Promise<StoreError> {
  const before = await listing(dir);
  const err = await refusal(dir);
  expect(err.code).toBe(code);
  expect(err.action.length).toBeGreaterThan(0);
  expect(await listing(dir)).toEqual(before);
  return err;
}

/** A store holding one session with two runs, closed cleanly, journal non-empty. */
async function seeded(): Promise<string> {
  const dir = await stateDir();
  const store = await openStore(dir);
  await store.commit({ sessions: [session('s1', 'r1')], runs: [run('r1', 's1', 1, { state: 'succeeded' })] });
  await store.commit({ sessions: [session('s1', 'r2')], runs: [run('r2', 's1', 2, { state: 'failed', requestKey: 'k2' })] });
  await store.close();
  return dir;
}

// ---- child processes: the store compiled on the fly, so no build is needed ----

const LOADER = `
import { createRequire } from 'node:module';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
const ts = createRequire(${JSON.stringify(join(ROOT, 'package.json'))})('typescript');
export async function resolve(specifier, context, next) {
  if (specifier.endsWith('.js') && context.parentURL?.endsWith('.ts') && specifier.startsWith('.')) {
    const url = new URL(specifier.slice(0, -3) + '.ts', context.parentURL);
    if (existsSync(fileURLToPath(url))) return { url: url.href, shortCircuit: true };
  }
  return next(specifier, context);
}
export async function load(url, context, next) {
  if (!url.endsWith('.ts')) return next(url, context);
  const source = await readFile(fileURLToPath(url), 'utf8');
  const out = ts.transpileModule(source, {
    fileName: fileURLToPath(url),
    compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
  });
  return { format: 'module', source: out.outputText, shortCircuit: true };
}
`;

const CHILD = `
const [storeUrl, dir, change] = process.argv.slice(2);
const { StateStore } = await import(storeUrl);
const silent = { info() {}, warn() {}, error() {} };
const store = await StateStore.open(dir, { logger: silent });
await store.commit(JSON.parse(change));
process.stdout.write('ready\\n');
setInterval(() => {}, 1 << 30);
`;

/** Starts a separate process that opens `dir`, commits `change`, and then stays alive. */
async function ownerProcess(dir: string, change: unknown): Promise<ChildProcess> {
  const scripts = await mkdtemp(join(tmpdir(), 'droid-mcp-store-child-'));
  bases.push(scripts);
  await writeFile(join(scripts, 'loader.mjs'), LOADER);
  await writeFile(join(scripts, 'register.mjs'), `import { register } from 'node:module';\nregister('./loader.mjs', import.meta.url);\n`);
  await writeFile(join(scripts, 'child.mjs'), CHILD);
  const storeUrl = pathToFileURL(join(ROOT, 'src/store/store.ts')).href;
  const child = spawn(
    process.execPath,
    ['--import', pathToFileURL(join(scripts, 'register.mjs')).href, join(scripts, 'child.mjs'), storeUrl, dir, JSON.stringify(change)],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  children.push(child);
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  await new Promise<void>((done, fail) => {
    child.stdout!.on('data', (chunk: Buffer) => {
      if (chunk.toString().includes('ready')) done();
    });
    child.on('exit', (code) => fail(new Error(`child exited (${code}) before it was ready: ${stderr}`)));
  });
  return child;
}

// ---- tests ----

describe('StateStore basics', () => {
  it('round-trips sessions, runs, indexes and results, with private files', async () => {
    const dir = await stateDir();
    const store = await openStore(dir);
    expect(store.recovery).toEqual({ unknown: 0, queueLost: 0 });
    await store.commit({
      sessions: [session('s1', 'r1')],
      runs: [run('r1', 's1', 1, { state: 'succeeded', requestKey: 'key-1' })],
    });
    await store.commit({ sessions: [session('s1', 'r2')], runs: [run('r2', 's1', 2, { state: 'succeeded' })] });
    await store.commit({ runs: [run('r1', 's1', 1, { state: 'succeeded', requestKey: 'key-1', preview: 'done' })] });

    expect(store.sessions.get('s1')?.headRunId).toBe('r2');
    expect(store.runs.get('r1')?.preview).toBe('done');
    expect(store.runsBySession('s1').map((r) => r.id)).toEqual(['r1', 'r2']);
    expect(store.runsBySession('nope')).toEqual([]);
    expect(store.runByRequestKey('key-1')?.id).toBe('r1');
    expect(store.runByRequestKey('key-2')).toBeUndefined();

    const result = {
      runId: 'r1',
      finalText: 'all done',
      transcript: [
        { kind: 'assistant' as const, text: 'hi' },
        { kind: 'tool' as const, toolUseId: 't1', name: 'Read', input: '{}', status: 'done' as const, isError: false, result: 'ok' },
      ],
      permissionsApproved: [{ tool: 'Edit', summary: 'edit a.txt' }],
      diagnostics: [],
      stderrTail: '',
    };
    await store.writeResult(result);
    expect(await store.readResult('r1')).toEqual(result);
    expect(await store.readResult('r2')).toBeUndefined();
    expect(await store.readResult('../state')).toBeUndefined();
    await store.close();

    expect((await stat(dir)).mode & 0o777).toBe(0o700);
    for (const name of ['state.jsonl', 'journal.jsonl', 'owner.json', 'results/r1.json']) {
      expect((await stat(join(dir, name))).mode & 0o777, name).toBe(0o600);
    }
    expect(await readdir(dir)).not.toContain('owner.lock');
    const owner = JSON.parse(await readFile(join(dir, 'owner.json'), 'utf8'));
    expect(owner).toMatchObject({ pid: process.pid, hostname: hostname() });
  });

  it('reopens with everything committed, folding the journal into the snapshot', async () => {
    const dir = await seeded();
    expect((await readFile(join(dir, 'journal.jsonl'), 'utf8')).trim().split('\n')).toHaveLength(2);
    const store = await openStore(dir);
    expect([...store.sessions.keys()]).toEqual(['s1']);
    expect(store.runsBySession('s1').map((r) => [r.id, r.state])).toEqual([
      ['r1', 'succeeded'],
      ['r2', 'failed'],
    ]);
    expect(store.runByRequestKey('k2')?.id).toBe('r2');
    expect(await readFile(join(dir, 'journal.jsonl'), 'utf8')).toBe('');
    const snapshot = await readSnapshot(dir);
    expect(snapshot.header).toEqual({ version: 1, seq: 2, sessions: 1, runs: 2 });
    expect(await snapshotLines(dir)).toHaveLength(4);
    expect(snapshot.sessions.map((s) => s.id)).toEqual(['s1']);
    expect(snapshot.runs).toEqual([...store.runs.values()]);
    await store.close();
  });

  it('copies records in and freezes what it holds', async () => {
    const dir = await stateDir();
    const store = await openStore(dir);
    const s = session('s1', 'r1');
    const r = run('r1', 's1', 1);
    const pending = store.commit({ sessions: [s], runs: [r] });
    r.state = 'failed';
    s.labels.push('late');
    await pending;
    expect(store.runs.get('r1')?.state).toBe('queued');
    expect(store.sessions.get('s1')?.labels).toEqual([]);
    const stored = store.runs.get('r1')!;
    expect(() => {
      (stored as { state: RunState }).state = 'running';
    }).toThrow(TypeError);
    expect(() => store.runsBySession('s1')[0]!.events.push({ at: T0, kind: 'x', detail: '' })).toThrow(TypeError);
    await store.close();
  });

  it('rejects changes that would break invariants, writing nothing', async () => {
    const dir = await seeded();
    const store = await openStore(dir);
    const journal = join(dir, 'journal.jsonl');
    const before = await readFile(journal);
    const bad: Array<[string, Parameters<StateStore['commit']>[0]]> = [
      ['run in unknown session', { runs: [run('r9', 'ghost', 1)] }],
      ['session with unknown head', { sessions: [session('s2', 'ghost')] }],
      ['head in another session', { sessions: [session('s2', 'r1')], runs: [run('r3', 's2', 1)] }],
      ['duplicate position', { runs: [run('r3', 's1', 2)] }],
      ['moved run', { runs: [run('r2', 's1', 5, { state: 'failed', requestKey: 'k2' })] }],
      ['reused request key', { runs: [run('r3', 's1', 3, { requestKey: 'k2' })] }],
      ['unknown field', { runs: [{ ...run('r3', 's1', 3), prompt: 'secret' } as RunRecord] }],
      ['wrong type', { runs: [run('r3', 's1', 3, { state: 'exploded' as RunState })] }],
    ];
    for (const [what, change] of bad) {
      await expect(store.commit(change), what).rejects.toMatchObject({ code: 'invalid_change' });
    }
    expect(await readFile(journal)).toEqual(before);
    await expect(
      store.writeResult({ runId: 'ghost', finalText: '', transcript: [], permissionsApproved: [], diagnostics: [], stderrTail: '' }),
    ).rejects.toMatchObject({
      code: 'invalid_change',
    });
    // A key may move between runs within one change.
    await store.commit({
      sessions: [session('s1', 'r3')],
      runs: [run('r2', 's1', 2, { state: 'failed' }), run('r3', 's1', 3, { requestKey: 'k2' })],
    });
    expect(store.runByRequestKey('k2')?.id).toBe('r3');
    await store.close();
    await expect(store.commit({ runs: [] })).rejects.toMatchObject({ code: 'store_closed' });
  });

  it('lands every one of many concurrent commits, in order, without torn lines', async () => {
    const dir = await stateDir();
    const store = await openStore(dir);
    await store.commit({ sessions: [session('s1', 'r1')], runs: [run('r1', 's1', 1, { state: 'succeeded' })] });
    const commits = [];
    for (let i = 2; i <= 150; i++) {
      commits.push(store.commit({ sessions: [session('s1', `r${i}`)], runs: [run(`r${i}`, 's1', i, { state: 'succeeded' })] }));
    }
    await Promise.all(commits);
    expect(store.runsBySession('s1')).toHaveLength(150);
    expect(store.sessions.get('s1')?.headRunId).toBe('r150');
    await store.close();
    const lines = (await readFile(join(dir, 'journal.jsonl'), 'utf8')).trim().split('\n');
    expect(lines.map((l) => JSON.parse(l).seq)).toEqual(lines.map((_, i) => i + 1));
    const reopened = await openStore(dir);
    expect(reopened.runs.size).toBe(150);
    expect(reopened.sessions.get('s1')?.headRunId).toBe('r150');
    await reopened.close();
  });

  it('compacts once the journal outgrows its threshold and the record count, keeping the data', async () => {
    const dir = await stateDir();
    const store = await openStore(dir);
    await store.commit({ sessions: [session('s1', 'r1')], runs: [run('r1', 's1', 1, { state: 'running' })] });
    for (let i = 0; i < COMPACT_MIN_LINES; i++) {
      await store.commit({ runs: [run('r1', 's1', 1, { state: 'running', preview: `step ${i}` })] });
    }
    await store.commit({ runs: [run('r1', 's1', 1, { state: 'succeeded', preview: 'final' })] });
    const journal = (await readFile(join(dir, 'journal.jsonl'), 'utf8')).trim().split('\n').filter(Boolean);
    expect(journal.length).toBeLessThan(5);
    const snapshot = await readSnapshot(dir);
    expect(snapshot.header.seq).toBeGreaterThan(COMPACT_MIN_LINES);
    expect(snapshot.header).toMatchObject({ sessions: 1, runs: 1 });
    await store.close();
    const reopened = await openStore(dir);
    expect(reopened.runs.get('r1')).toMatchObject({ state: 'succeeded', preview: 'final' });
    await reopened.close();
  });

  it('skips journal lines already in the snapshot (crash between compaction steps)', async () => {
    const dir = await seeded();
    const oldJournal = await readFile(join(dir, 'journal.jsonl'));
    const store = await openStore(dir); // compacts: snapshot seq 2, journal emptied
    await store.close();
    await writeFile(join(dir, 'journal.jsonl'), oldJournal); // as if the truncate never happened
    const again = await openStore(dir);
    expect(again.runs.size).toBe(2);
    await again.commit({ sessions: [session('s1', 'r3')], runs: [run('r3', 's1', 3, { state: 'succeeded' })] });
    await again.close();
    const last = await openStore(dir);
    expect(last.runsBySession('s1').map((r) => r.id)).toEqual(['r1', 'r2', 'r3']);
    await last.close();
  });

  it('reads and writes files far larger than one read chunk, with lines spanning chunks', async () => {
    const dir = await stateDir();
    const store = await openStore(dir);
    const preview = 'p'.repeat(1500);
    const big = session('s1', 'r2000', { title: 't'.repeat(3_000_000), labels: ['a', 'b'] });
    const runs = Array.from({ length: 2000 }, (_, i) => run(`r${i + 1}`, 's1', i + 1, { state: 'succeeded', preview: `${i} ${preview}` }));
    // One commit: a journal line of several megabytes.
    await store.commit({ sessions: [big], runs });
    await store.close();
    expect((await stat(join(dir, 'journal.jsonl'))).size).toBeGreaterThan(5_000_000);

    const reopened = await openStore(dir); // reads the journal, then compacts it into the snapshot
    expect(await readFile(join(dir, 'journal.jsonl'), 'utf8')).toBe('');
    await reopened.close();
    expect((await stat(join(dir, STATE_FILE))).size).toBeGreaterThan(5_000_000);
    expect(await snapshotLines(dir)).toHaveLength(2002);

    const last = await openStore(dir); // reads the snapshot
    expect(last.sessions.get('s1')).toEqual(big);
    expect(last.runsBySession('s1')).toEqual(runs);
    await last.close();
  });

  it('holds loaded records deeply frozen and equal to what was committed', async () => {
    const dir = await stateDir();
    const store = await openStore(dir);
    const s = session('s1', 'r2', { labels: ['x', 'y'], title: 'same', factoryTitle: 'same' });
    const r1 = run('r1', 's1', 1, {
      state: 'failed',
      error: { code: 'boom', message: 'it broke', retryable: true },
      usage: { inputTokens: 1, outputTokens: 2, cacheCreationTokens: 3, cacheReadTokens: 4, thinkingTokens: 5, factoryCredits: null },
      permissionsDeclined: [{ tool: 'Edit', summary: 'edit a.txt' }],
      questions: [{ topic: 'scope', question: 'which?', options: ['a', 'b'] }],
      events: [{ at: T0, kind: 'tool_started', detail: 'Read a.txt' }],
      reason: 'completed',
      startedAt: T0,
      endedAt: T0,
    });
    const r2 = run('r2', 's1', 2, {
      state: 'cancelled',
      cancelReason: 'predecessor_failed',
      predecessorFailure: { runId: 'r1', state: 'failed', error: { code: 'boom', message: 'it broke', retryable: true } },
      endedAt: T0,
    });
    await store.commit({ sessions: [s], runs: [r1, r2] });
    await store.close();
    const reopened = await openStore(dir);
    expect(reopened.sessions.get('s1')).toEqual(s);
    expect(reopened.runs.get('r1')).toEqual(r1);
    expect(reopened.runs.get('r2')).toEqual(r2);
    const loaded = reopened.runs.get('r2')!;
    const frozen = (value: unknown): void => {
      expect(Object.isFrozen(value)).toBe(true);
      if (typeof value === 'object' && value !== null) for (const child of Object.values(value)) frozen(child);
    };
    for (const record of [...reopened.sessions.values(), ...reopened.runs.values()]) frozen(record);
    expect(() => {
      (loaded.settings as { model: string }).model = 'other';
    }).toThrow(TypeError);
    expect(() => loaded.permissionsDeclined.push({ tool: 'x', summary: '' })).toThrow(TypeError);
    expect(reopened.runs.get('r1')!.settings.model).toBe('model-a');
    await reopened.close();
  });

  it('a snapshot write that fails part-way leaves the old snapshot and no temp file', async () => {
    const dir = await seeded();
    await (await openStore(dir)).close();
    const before = await listing(dir);
    const liar = { size: 5, values: () => [session('s1', 'r1')] };
    await expect(writeSnapshot(dir, 9, liar, new Map())).rejects.toThrow(/announced 5 session records but listed 1/);
    expect(await listing(dir)).toEqual(before);
  });

  it('removes temp files left by an interrupted atomic write', async () => {
    const dir = await seeded();
    await writeFile(join(dir, '.state.jsonl.abc123.tmp'), 'half');
    await writeFile(join(dir, 'results', '.r1.json.abc123.tmp'), 'half');
    const store = await openStore(dir);
    await store.close();
    expect((await readdir(dir)).filter((n) => n.endsWith('.tmp'))).toEqual([]);
    expect(await readdir(join(dir, 'results'))).toEqual([]);
  });
});

describe('reply-back fields (optional: absent on records written before reply-back)', () => {
  const ROUTE = 'route-1';
  const CONV = 'T-11111111-2222-4333-8444-555555555555';
  const reply = { routeId: ROUTE, accepted: 1, handles: [{ handle: 'rh-1', routeId: ROUTE }], failure: null };

  it('reads state written by the previous version (no reply fields) and writes it back without adding any', async () => {
    const dir = await seeded();
    const store = await openStore(dir);
    expect(store.sessions.get('s1')!.replyRouteId).toBeUndefined();
    expect(store.runsBySession('s1').map((r) => r.reply)).toEqual([undefined, undefined]);
    await store.close();
    // The compacted snapshot spells no new key: absent stays absent.
    const text = await readFile(join(dir, STATE_FILE), 'utf8');
    expect(text).not.toContain('replyRouteId');
    expect(text).not.toContain('"reply"');
  });

  it('round-trips a routed session and a run with handles through journal and snapshot', async () => {
    const dir = await stateDir();
    const store = await openStore(dir);
    await store.commit({ sessions: [session('s1', 'r1', { replyTo: CONV, replyRouteId: ROUTE })], runs: [run('r1', 's1', 1, { state: 'succeeded', reply })] });
    await store.close();
    for (let i = 0; i < 2; i++) {
      // First open folds the journal in; the second reads the snapshot alone.
      const again = await openStore(dir);
      expect(again.sessions.get('s1')).toMatchObject({ replyTo: CONV, replyRouteId: ROUTE });
      expect(again.runs.get('r1')!.reply).toEqual(reply);
      expect(Object.isFrozen(again.runs.get('r1')!.reply!.handles[0])).toBe(true);
      await again.close();
    }
  });

  it('refuses incomplete reply-back records, writing nothing', async () => {
    const dir = await seeded();
    const store = await openStore(dir);
    const journal = join(dir, 'journal.jsonl');
    const before = await readFile(journal);
    const bad: Array<[string, Parameters<StateStore['commit']>[0]]> = [
      ['routed session without its route', { sessions: [session('s1', 'r2', { replyTo: CONV })] }],
      ['route without a recipient', { sessions: [session('s1', 'r2', { replyRouteId: ROUTE })] }],
      [
        'reply without handles',
        { runs: [run('r2', 's1', 2, { state: 'failed', requestKey: 'k2', reply: { routeId: ROUTE, accepted: 0, failure: null } as never })] },
      ],
      [
        'handle without its route',
        { runs: [run('r2', 's1', 2, { state: 'failed', requestKey: 'k2', reply: { ...reply, handles: [{ handle: 'rh-1' } as never] } })] },
      ],
    ];
    for (const [what, change] of bad) {
      await expect(store.commit(change), what).rejects.toMatchObject({ code: 'invalid_change' });
    }
    expect(await readFile(journal)).toEqual(before);
    await store.close();
  });

  it('refuses a snapshot holding a routed session without its route, leaving it untouched', async () => {
    const dir = await seeded();
    await (await openStore(dir)).close();
    const path = join(dir, STATE_FILE);
    const lines = (await readFile(path, 'utf8')).slice(0, -1).split('\n');
    lines[1] = lines[1]!.replace('"replyTo":null', `"replyTo":"${CONV}"`);
    await writeFile(path, lines.join('\n') + '\n');
    const err = await expectRefusedUntouched(dir, 'state_corrupt');
    expect(err.message).toContain('replyRouteId');
  });
});

describe('crash recovery', () => {
  it('marks in-flight runs unknown and queued runs queue_lost, durably, replaying nothing', async () => {
    const dir = await stateDir();
    const store = await openStore(dir);
    const states: RunState[] = ['succeeded', 'starting', 'running', 'cancelling', 'queued', 'queued'];
    await store.commit({
      sessions: [session('s1', 'r6')],
      runs: states.map((state, i) => run(`r${i + 1}`, 's1', i + 1, { state, startedAt: state === 'queued' ? null : T0 })),
    });
    await store.close();

    const later = new Date('2030-01-02T00:00:00.000Z');
    const reopened = await openStore(dir, () => later);
    expect(reopened.recovery).toEqual({ unknown: 3, queueLost: 2 });
    const byId = (id: string): RunRecord => reopened.runs.get(id)!;
    expect(byId('r1')).toEqual(run('r1', 's1', 1, { state: 'succeeded', startedAt: T0 }));
    for (const id of ['r2', 'r3', 'r4']) {
      expect(byId(id)).toMatchObject({
        state: 'unknown',
        needsAttention: true,
        endedAt: later.toISOString(),
        error: {
          code: 'controller_stopped',
          message: 'the controller stopped while this turn was running; its outcome is unknown',
          retryable: false,
        },
      });
    }
    for (const id of ['r5', 'r6']) {
      expect(byId(id)).toMatchObject({ state: 'cancelled', cancelReason: 'queue_lost', endedAt: later.toISOString() });
      expect(byId(id).error?.code).toBe('queue_lost');
      expect(byId(id).error?.message).toMatch(/never sent/);
    }
    await reopened.close();

    const third = await openStore(dir);
    expect(third.recovery).toEqual({ unknown: 0, queueLost: 0 });
    expect(third.runs.get('r3')?.state).toBe('unknown');
    await third.close();
  });
});

describe('torn last journal line', () => {
  const journalPath = (dir: string): string => join(dir, 'journal.jsonl');
  const tornCopy = (dir: string): string => join(dir, 'journal.torn-2030-01-01T00-00-00.000Z');

  /** The first `keep` bytes of a terminal commit's journal line: 20 events of 4,000 characters, far more than a page. */
  function tornLine(keep: number): Buffer {
    const events = Array.from({ length: 20 }, (_, i) => ({ at: T0, kind: 'tool_result', detail: String(i).padEnd(4000, 'x') }));
    const line = Buffer.from(JSON.stringify({ seq: 3, sessions: [], runs: [run('r2', 's1', 2, { state: 'failed', requestKey: 'k2', events })] }) + '\n');
    expect(line.length).toBeGreaterThan(80_000);
    return line.subarray(0, keep);
  }

  it('is dropped at start-up, keeping its bytes beside the state; the state before it loads intact', async () => {
    const dir = await seeded();
    const expected = await openStore(dir);
    const sessions = [...expected.sessions.values()];
    const runs = [...expected.runs.values()];
    await expected.close();
    // Compacted by that open; the kill -9 hits the next commit, after one more good one.
    const good = await openStore(dir);
    await good.commit({ runs: [run('r1', 's1', 1, { state: 'succeeded', preview: 'kept' })] });
    await good.close();
    const torn = tornLine(60_000);
    expect(torn.length).toBeGreaterThan(4096);
    await appendFile(journalPath(dir), torn);

    const { log, warnings } = capture();
    const store = await StateStore.open(dir, { now: () => new Date(T0), logger: log });
    expect([...store.sessions.values()]).toEqual(sessions);
    expect(store.runs.get('r1')).toEqual({ ...runs[0]!, preview: 'kept' });
    expect(store.runs.get('r2')).toEqual(runs[1]);
    expect(store.runs.get('r2')?.events).toEqual([]);
    expect(await readFile(tornCopy(dir))).toEqual(torn);
    expect((await stat(tornCopy(dir))).mode & 0o777).toBe(0o600);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]!.msg).toMatch(/dropped an incomplete last journal line/);
    expect(warnings[0]!.obj).toMatchObject({ journal: journalPath(dir), line: 2, bytes: torn.length, copy: tornCopy(dir) });
    // The next commit follows the good lines (the journal was folded into the snapshot at open).
    await store.commit({ runs: [run('r2', 's1', 2, { state: 'failed', requestKey: 'k2', preview: 'after' })] });
    await store.close();

    const again = capture();
    const second = await StateStore.open(dir, { now: () => new Date(T0), logger: again.log });
    expect(again.warnings).toEqual([]);
    expect(second.runs.get('r1')?.preview).toBe('kept');
    expect(second.runs.get('r2')?.preview).toBe('after');
    await second.close();
    expect((await readdir(dir)).filter((n) => n.startsWith('journal.torn-'))).toEqual(['journal.torn-2030-01-01T00-00-00.000Z']);
  });

  it('is dropped when it is all the journal holds, without replacing an earlier copy', async () => {
    const dir = await seeded();
    await (await openStore(dir)).close(); // journal now empty
    await writeFile(tornCopy(dir), 'an earlier copy', { mode: 0o600 });
    const torn = tornLine(5000);
    await writeFile(journalPath(dir), torn);
    const store = await openStore(dir);
    expect(store.runs.size).toBe(2);
    await store.close();
    expect(await readFile(tornCopy(dir), 'utf8')).toBe('an earlier copy');
    expect(await readFile(tornCopy(dir) + '.1')).toEqual(torn);
    expect(await readFile(journalPath(dir), 'utf8')).toBe('');
  });
});

describe('ownership', () => {
  it('refuses a second store in this process', async () => {
    const dir = await stateDir();
    const store = await openStore(dir);
    const err = await expectRefusedUntouched(dir, 'state_locked');
    expect(err.message).toContain(String(process.pid));
    await store.close();
    await (await openStore(dir)).close();
  });

  it('refuses while another process owns the directory, then recovers once it is killed', async () => {
    const dir = await stateDir();
    const child = await ownerProcess(dir, {
      sessions: [session('s1', 'r2')],
      runs: [run('r1', 's1', 1, { state: 'running', startedAt: T0 }), run('r2', 's1', 2, { state: 'queued' })],
    });
    const err = await expectRefusedUntouched(dir, 'state_locked');
    expect(err.message).toContain(`pid ${child.pid}`);
    expect(err.action).toContain(`kill ${child.pid}`);

    // An unclean stop: no close, no lock release, journal not compacted.
    const exited = once(child, 'exit');
    child.kill('SIGKILL');
    await exited;
    expect(await readdir(dir)).toContain('owner.lock');
    expect((await readFile(join(dir, 'journal.jsonl'), 'utf8')).trim().split('\n')).toHaveLength(1);

    const store = await openStore(dir);
    expect(store.recovery).toEqual({ unknown: 1, queueLost: 1 });
    expect(store.runs.get('r1')?.state).toBe('unknown');
    expect(store.runs.get('r2')).toMatchObject({ state: 'cancelled', cancelReason: 'queue_lost' });
    expect(JSON.parse(await readFile(join(dir, 'owner.json'), 'utf8')).pid).toBe(process.pid);
    // The owner taken over is named: what carries its mark is killed before turns start (worker/parent/predecessor.ts).
    expect(store.owners.previous?.pid).toBe(child.pid);
    expect(store.owners.current.pid).toBe(process.pid);
    await store.close();
    expect(await readdir(dir)).not.toContain('owner.lock');
    // After a clean stop there is nothing to take over.
    const again = await openStore(dir);
    expect(again.owners.previous).toBeNull();
    await again.close();
  });

  it('refuses a fresh lock that names no owner, but recovers a stale one', async () => {
    const dir = await seeded();
    await rm(join(dir, 'owner.json'));
    await mkdir(join(dir, 'owner.lock'));
    const err = await expectRefusedUntouched(dir, 'state_locked');
    expect(err.message).toContain('left no owner record');
    const longAgo = new Date(Date.now() - 60_000);
    await utimes(join(dir, 'owner.lock'), longAgo, longAgo);
    const store = await openStore(dir);
    expect(store.runs.size).toBe(2);
    await store.close();
  });

  it('refuses state owned by another host or HOME', async () => {
    const dir = await seeded();
    const ownerPath = join(dir, 'owner.json');
    const owner = JSON.parse(await readFile(ownerPath, 'utf8'));
    await writeFile(ownerPath, JSON.stringify({ ...owner, hostname: 'elsewhere.example' }));
    const err = await expectRefusedUntouched(dir, 'state_owned_elsewhere');
    expect(err.message).toContain('elsewhere.example');
    await writeFile(ownerPath, JSON.stringify({ ...owner, home: '/home/someone-else' }));
    await expectRefusedUntouched(dir, 'state_owned_elsewhere');
  });

  it('recovers a lock recorded under our own pid by an earlier process (a restart that reused the pid)', async () => {
    const dir = await seeded();
    const record = JSON.parse(await readFile(join(dir, 'owner.json'), 'utf8'));
    expect(record.pid).toBe(process.pid);
    // As a container restart leaves it: node was pid 1 before and is pid 1 again; the lock is fresh.
    await mkdir(join(dir, 'owner.lock'));
    const { log, warnings } = capture();
    const store = await StateStore.open(dir, { now: () => new Date(T0), logger: log });
    expect(store.runs.size).toBe(2);
    expect(warnings).toEqual([
      { obj: expect.objectContaining({ pid: process.pid, why: expect.stringMatching(/our own pid/) }), msg: 'recovered the state directory from a dead owner' },
    ]);
    // This process does hold it now: a second store is still refused.
    await expectRefusedUntouched(dir, 'state_locked');
    await store.close();
  });

  it('refuses a live pid whose lock is fresh, and recovers it once the lock is not refreshed', async () => {
    const dir = await seeded();
    const sleeper = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1 << 30)'], { stdio: 'ignore' });
    children.push(sleeper);
    await once(sleeper, 'spawn');
    const ownerPath = join(dir, 'owner.json');
    const record = JSON.parse(await readFile(ownerPath, 'utf8'));
    await writeFile(ownerPath, JSON.stringify({ ...record, pid: sleeper.pid }));
    await mkdir(join(dir, 'owner.lock'));
    const err = await expectRefusedUntouched(dir, 'state_locked');
    expect(err.message).toContain(`in use by controller pid ${sleeper.pid}`);

    // A live owner refreshes its lock every 5 s; this one was last touched a minute ago.
    const longAgo = new Date(Date.now() - 60_000);
    await utimes(join(dir, 'owner.lock'), longAgo, longAgo);
    const { log, warnings } = capture();
    const store = await StateStore.open(dir, { now: () => new Date(T0), logger: log });
    expect(store.runs.size).toBe(2);
    expect(warnings).toEqual([
      {
        obj: expect.objectContaining({ pid: sleeper.pid, why: expect.stringMatching(/not refreshed/) }),
        msg: 'recovered the state directory from a dead owner',
      },
    ]);
    expect(JSON.parse(await readFile(ownerPath, 'utf8')).pid).toBe(process.pid);
    expect(sleeper.exitCode).toBeNull();
    await store.close();
  });

  it('refuses state used with another FACTORY_HOME_OVERRIDE, as it refuses another HOME', async () => {
    try {
      vi.stubEnv('FACTORY_HOME_OVERRIDE', '/srv/factory-a');
      const dir = await seeded();
      expect(JSON.parse(await readFile(join(dir, 'owner.json'), 'utf8'))).toMatchObject({ version: 1, factoryHomeOverride: '/srv/factory-a' });

      vi.stubEnv('FACTORY_HOME_OVERRIDE', '/srv/factory-b');
      let err = await expectRefusedUntouched(dir, 'state_owned_elsewhere');
      expect(err.message).toContain('ran with FACTORY_HOME_OVERRIDE=/srv/factory-a (this one runs with FACTORY_HOME_OVERRIDE=/srv/factory-b)');
      expect(err.action).toContain('Start the controller with FACTORY_HOME_OVERRIDE=/srv/factory-a');

      vi.stubEnv('FACTORY_HOME_OVERRIDE', undefined);
      err = await expectRefusedUntouched(dir, 'state_owned_elsewhere');
      expect(err.message).toContain('this one runs with FACTORY_HOME_OVERRIDE unset');

      vi.stubEnv('FACTORY_HOME_OVERRIDE', '/srv/factory-a');
      const store = await openStore(dir);
      expect(store.runs.size).toBe(2);
      await store.close();

      // And the other way round: state made without it refuses a controller that sets it.
      vi.stubEnv('FACTORY_HOME_OVERRIDE', undefined);
      const plain = await seeded();
      vi.stubEnv('FACTORY_HOME_OVERRIDE', '/srv/factory-a');
      err = await expectRefusedUntouched(plain, 'state_owned_elsewhere');
      expect(err.action).toContain('Start the controller with FACTORY_HOME_OVERRIDE unset');
    } finally {
      vi.unstubAllEnvs();
    }
  });

  it('refuses an owner record without a version (which Factory home it used is unknown), saying how to proceed', async () => {
    const dir = await seeded();
    const ownerPath = join(dir, 'owner.json');
    const { pid, hostname: host, home, startedAt } = JSON.parse(await readFile(ownerPath, 'utf8'));
    await writeFile(ownerPath, JSON.stringify({ pid, hostname: host, home, startedAt }));
    let err = await expectRefusedUntouched(dir, 'state_version_unsupported');
    expect(err.message).toContain(`owner record ${ownerPath} has no version`);
    expect(err.action).toContain(`remove ${ownerPath} and start again`);
    await writeFile(ownerPath, JSON.stringify({ version: 2, pid, hostname: host, home, startedAt }));
    err = await expectRefusedUntouched(dir, 'state_version_unsupported');
    expect(err.message).toContain('has version 2');
    // Doing what the first refusal says:
    await rm(ownerPath);
    const store = await openStore(dir);
    expect(store.runs.size).toBe(2);
    await store.close();
  });

  it('refuses a state directory others can read, and relative paths', async () => {
    const dir = await stateDir();
    await mkdir(dir, { mode: 0o755 });
    await chmod(dir, 0o755);
    const err = await expectRefusedUntouched(dir, 'state_dir_not_private');
    expect(err.message).toContain(dir);
    expect(err.message).toContain(`chmod 700 ${dir}`);
    await expect(openStore('relative/state')).rejects.toMatchObject({ code: 'state_dir_not_private' });
    const file = join(dirname(dir), 'a-file');
    await writeFile(file, '');
    await expect(openStore(file)).rejects.toMatchObject({ code: 'state_dir_not_private' });
  });
});

describe('refusing damaged state, leaving it untouched', () => {
  async function damaged(edit: (dir: string) => Promise<void>): Promise<string> {
    const dir = await seeded();
    await edit(dir);
    return dir;
  }
  const journalPath = (dir: string): string => join(dir, 'journal.jsonl');
  const statePath = (dir: string): string => join(dir, STATE_FILE);
  /** Folds the journal into the snapshot, so every record is in it. */
  const compacted = async (d: string): Promise<void> => (await openStore(d)).close();

  it('corrupt snapshot', async () => {
    const dir = await damaged((d) => writeFile(statePath(d), '{"version":1,"seq":0,'));
    const err = await expectRefusedUntouched(dir, 'state_corrupt');
    expect(err.message).toContain(statePath(dir));
    expect(err.action).toMatch(/backup|move it aside/);
  });

  it('unknown version', async () => {
    const dir = await damaged((d) => writeFile(statePath(d), JSON.stringify({ version: 2, seq: 0, sessions: 0, runs: 0 }) + '\n'));
    const err = await expectRefusedUntouched(dir, 'state_version_unsupported');
    expect(err.message).toContain('version 2');
  });

  it('a newline-terminated last journal line that does not parse (corruption, not a torn write)', async () => {
    const dir = await damaged(async (d) => {
      const lines = (await readFile(journalPath(d), 'utf8')).split('\n');
      lines[1] = '{"seq":2,"sessions":[';
      await writeFile(journalPath(d), lines.join('\n'));
    });
    expect((await readFile(journalPath(dir), 'utf8')).endsWith('[\n')).toBe(true);
    const err = await expectRefusedUntouched(dir, 'state_corrupt');
    expect(err.message).toContain(`${journalPath(dir)} line 2 is not valid JSON`);
  });

  it('a corrupt middle line, even when a torn last line follows it', async () => {
    const dir = await damaged(async (d) => {
      const lines = (await readFile(journalPath(d), 'utf8')).split('\n');
      lines[0] = '{"seq":1,"sessions":[';
      await writeFile(journalPath(d), lines.join('\n') + '{"seq":3,"sess');
    });
    const err = await expectRefusedUntouched(dir, 'state_corrupt');
    expect(err.message).toContain(`${journalPath(dir)} line 1`);
  });

  it('unparsable journal line in the middle', async () => {
    const dir = await damaged(async (d) => {
      const lines = (await readFile(journalPath(d), 'utf8')).split('\n');
      lines[0] = '{"seq":1,"sessions":[';
      await writeFile(journalPath(d), lines.join('\n'));
    });
    const err = await expectRefusedUntouched(dir, 'state_corrupt');
    expect(err.message).toContain(`${journalPath(dir)} line 1`);
  });

  it('missing journal entries (a gap in seq)', async () => {
    const dir = await damaged(async (d) => {
      const lines = (await readFile(journalPath(d), 'utf8')).split('\n');
      await writeFile(journalPath(d), lines.slice(1).join('\n'));
    });
    const err = await expectRefusedUntouched(dir, 'state_corrupt');
    expect(err.message).toMatch(/commits are missing/);
  });

  it('invalid record in the snapshot', async () => {
    const dir = await damaged(async (d) => {
      await compacted(d);
      const lines = await snapshotLines(d);
      // header, session s1, run r1, run r2
      const entry = JSON.parse(lines[3]!);
      entry.run.state = 'exploded';
      lines[3] = JSON.stringify(entry);
      await writeFile(statePath(d), lines.join('\n') + '\n');
    });
    const err = await expectRefusedUntouched(dir, 'state_corrupt');
    expect(err.message).toContain(`${statePath(dir)} line 4 (id "r2")`);
    expect(err.message).toContain('state');
  });

  it('record with an unknown field in the snapshot', async () => {
    const dir = await damaged(async (d) => {
      await compacted(d);
      const lines = await snapshotLines(d);
      lines[1] = lines[1]!.replace('"archived":false', '"archived":false,"prompt":"secret"');
      await writeFile(statePath(d), lines.join('\n') + '\n');
    });
    const err = await expectRefusedUntouched(dir, 'state_corrupt');
    expect(err.message).toContain(`${statePath(dir)} line 2 (id "s1") is not a valid record`);
  });

  it('snapshot cut at a line end (fewer records than its header announces)', async () => {
    const dir = await damaged(async (d) => {
      await compacted(d);
      const lines = await snapshotLines(d);
      await writeFile(statePath(d), lines.slice(0, -1).join('\n') + '\n');
    });
    const err = await expectRefusedUntouched(dir, 'state_corrupt');
    expect(err.message).toContain(`${statePath(dir)} is truncated: its header announces 1 sessions and 2 runs, but it ends after 2 complete record lines`);
  });

  it('snapshot cut in the middle of a line', async () => {
    const dir = await damaged(async (d) => {
      await compacted(d);
      const text = await readFile(statePath(d), 'utf8');
      await writeFile(statePath(d), text.slice(0, -20));
    });
    const err = await expectRefusedUntouched(dir, 'state_corrupt');
    expect(err.message).toContain('ends after 2 complete record lines and a partial one');
  });

  it('snapshot with more records than its header announces, or a record twice', async () => {
    const dir = await damaged(async (d) => {
      await compacted(d);
      const lines = await snapshotLines(d);
      await writeFile(statePath(d), [...lines, lines[3]].join('\n') + '\n');
    });
    let err = await expectRefusedUntouched(dir, 'state_corrupt');
    expect(err.message).toContain(`${statePath(dir)} line 5 is past the last record`);

    const lines = await snapshotLines(dir);
    lines[0] = JSON.stringify({ version: 1, seq: 2, sessions: 1, runs: 3 });
    await writeFile(statePath(dir), lines.join('\n') + '\n');
    err = await expectRefusedUntouched(dir, 'state_corrupt');
    expect(err.message).toContain(`${statePath(dir)} line 5: run r2 appears twice`);
  });

  it('snapshot records out of place (a run where a session belongs)', async () => {
    const dir = await damaged(async (d) => {
      await compacted(d);
      const lines = await snapshotLines(d);
      [lines[1], lines[2]] = [lines[2]!, lines[1]!];
      await writeFile(statePath(d), lines.join('\n') + '\n');
    });
    const err = await expectRefusedUntouched(dir, 'state_corrupt');
    expect(err.message).toContain(`${statePath(dir)} line 2 is not a session line`);
  });

  it('snapshot whose first line is not a header', async () => {
    const long = await damaged(async (d) => {
      await compacted(d);
      // Like a single-document snapshot under the new name: refused without reading the whole line.
      await writeFile(statePath(d), JSON.stringify({ version: 1, seq: 2, sessions: [], runs: [], pad: 'x'.repeat(10_000) }));
    });
    let err = await expectRefusedUntouched(long, 'state_corrupt');
    expect(err.message).toContain(`${statePath(long)} does not start with a snapshot header (line 1 is longer than 4096 bytes)`);

    const wrong = await damaged(async (d) => {
      await compacted(d);
      const lines = await snapshotLines(d);
      lines[0] = JSON.stringify({ version: 1, seq: 2, sessions: [], runs: [] });
      await writeFile(statePath(d), lines.join('\n') + '\n');
    });
    err = await expectRefusedUntouched(wrong, 'state_corrupt');
    expect(err.message).toContain(`${statePath(wrong)} line 1 is not a snapshot header`);

    const empty = await damaged((d) => writeFile(statePath(d), ''));
    err = await expectRefusedUntouched(empty, 'state_corrupt');
    expect(err.message).toContain(`${statePath(empty)} is empty`);
  });

  it('snapshot line that is not UTF-8', async () => {
    const dir = await damaged(async (d) => {
      await compacted(d);
      const bytes = await readFile(statePath(d));
      const at = bytes.indexOf('"preview":"') + '"preview":"'.length;
      await writeFile(statePath(d), Buffer.concat([bytes.subarray(0, at), Buffer.from([0xff]), bytes.subarray(at)]));
    });
    const err = await expectRefusedUntouched(dir, 'state_corrupt');
    expect(err.message).toContain(`${statePath(dir)} line 3 is not valid UTF-8`);
  });

  it('broken invariant within the snapshot, named by its line', async () => {
    const dir = await damaged(async (d) => {
      await compacted(d);
      const lines = await snapshotLines(d);
      lines[3] = lines[3]!.replace('"sessionId":"s1"', '"sessionId":"ghost"');
      await writeFile(statePath(d), lines.join('\n') + '\n');
    });
    const err = await expectRefusedUntouched(dir, 'state_corrupt');
    expect(err.message).toContain(`${statePath(dir)} line 4: run r2 belongs to session ghost, which does not exist`);
  });

  it('snapshot in the single-document layout of a pre-release build', async () => {
    const old = JSON.stringify({ version: 1, seq: 0, sessions: [session('s1', 'r1')], runs: [run('r1', 's1', 1)] });
    const alone = await stateDir();
    await mkdir(alone, { mode: 0o700 });
    await writeFile(join(alone, 'state.json'), old, { mode: 0o600 });
    let err = await expectRefusedUntouched(alone, 'state_version_unsupported');
    expect(err.message).toContain(`${join(alone, 'state.json')} is a snapshot in the single-document layout`);
    expect(err.message).toContain('reads only state.jsonl');

    const beside = await damaged((d) => writeFile(join(d, 'state.json'), old));
    err = await expectRefusedUntouched(beside, 'state_version_unsupported');
    expect(err.message).toContain('single-document layout');
  });

  it('record with an unknown field in the journal', async () => {
    const dir = await damaged(async (d) => {
      const lines = (await readFile(journalPath(d), 'utf8')).split('\n');
      const entry = JSON.parse(lines[1]!);
      entry.runs[0].prompt = 'should never be stored';
      lines[1] = JSON.stringify(entry);
      await writeFile(journalPath(d), lines.join('\n'));
    });
    const err = await expectRefusedUntouched(dir, 'state_corrupt');
    expect(err.message).toContain(`${journalPath(dir)} line 2 runs[0]`);
  });

  it('run whose session is unknown', async () => {
    const dir = await damaged((d) => appendFile(journalPath(d), JSON.stringify({ seq: 3, sessions: [], runs: [run('r9', 'ghost', 1)] }) + '\n'));
    const err = await expectRefusedUntouched(dir, 'state_corrupt');
    expect(err.message).toContain(`${journalPath(dir)} line 3`);
    expect(err.message).toContain('ghost');
  });

  it('session whose head run is unknown', async () => {
    const dir = await damaged((d) => appendFile(journalPath(d), JSON.stringify({ seq: 3, sessions: [session('s1', 'ghost')], runs: [] }) + '\n'));
    const err = await expectRefusedUntouched(dir, 'state_corrupt');
    expect(err.message).toContain('head run ghost');
  });

  it('journal without a snapshot', async () => {
    const dir = await damaged((d) => rm(statePath(d)));
    const err = await expectRefusedUntouched(dir, 'state_corrupt');
    expect(err.message).toContain(`${statePath(dir)} is missing`);
  });

  it('unreadable result file (reported on read, not at open)', async () => {
    const dir = await seeded();
    await writeFile(join(dir, 'results', 'r1.json'), '{"runId":"r1"');
    const store = await openStore(dir);
    await expect(store.readResult('r1')).rejects.toMatchObject({ code: 'state_corrupt' });
    await store.close();
  });
});
