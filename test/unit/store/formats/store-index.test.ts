/**
 * The run index (state.index) and the runs kept in the snapshot until asked
 * for (run-table.ts): start-up through the index shows exactly what a whole
 * read shows, through every accessor; an index that is missing, damaged,
 * foreign or stale only sends start-up the whole way (with the same
 * refusals); compaction copies unread runs and keeps them readable; bulk
 * reads read no record; and a record that no longer reads back as verified
 * is an error, never a wrong record.
 */
import { cp, mkdir, open as openFile, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { SessionReader } from '../../../../src/controller/sessions/session-reader.js';
import { callTool } from '../../../../src/mcp/call-tool.js';
import type { ToolContext } from '../../../../src/mcp/tools.js';
import type { SessionController } from '../../../../src/controller/controller.js';
import { StoreError } from '../../../../src/store/errors.js';
import type { RunRecord, RunState, SessionRecord } from '../../../../src/shared/records.js';
import { INDEX_FILE, readRunIndex, RUN_STATE_CODES, writeRunIndex } from '../../../../src/store/formats/run-index.js';
import { runState } from '../../../../src/shared/record-schemas.js';
import { differingFact, factsOf, type RunTable } from '../../../../src/store/tables/run-table.js';
import { STATE_FILE, writeSnapshot } from '../../../../src/store/formats/snapshot.js';
import type { RunFacts, StateStore } from '../../../../src/store/store.js';
import { tokensOf } from '../../../../src/shared/budget.js';
import { CrashFs } from '../store-crash-fs.js';
import { atEveryCrashPoint, capture, contents, openImage, openStore, removeTemps, T0, tempBase, type Contents } from '../store-fixtures.js';
import { runRecord, sessionRecord } from '../../../support/records.js';

afterEach(removeTemps);

const STATES: RunState[] = ['succeeded', 'failed', 'cancelled', 'unknown', 'interrupted', 'timed_out'];

/** A small deterministic generator, so a failure names a reproducible case. */
function prng(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return x / 0x100000000;
  };
}

const at = (minutes: number): string => new Date(Date.parse(T0) + minutes * 60_000).toISOString();

/** Varied finished runs (crash recovery leaves them alone), with every optional field sometimes present. */
function generated(seed: number, sessions: number, perSession: number): { sessions: SessionRecord[]; runs: RunRecord[] } {
  const rnd = prng(seed);
  const pick = <T>(list: readonly T[]): T => list[Math.floor(rnd() * list.length)]!;
  const out = { sessions: [] as SessionRecord[], runs: [] as RunRecord[] };
  for (let s = 0; s < sessions; s++) {
    const id = `s${s}`;
    const n = 1 + Math.floor(rnd() * perSession);
    for (let q = 1; q <= n; q++) {
      const state = pick(STATES);
      const started = state !== 'cancelled' || rnd() < 0.5;
      out.runs.push(
        runRecord({
          sessionId: id,
          seq: q,
          requestKey: rnd() < 0.2 ? null : `key-${seed}-${s}-${q}`,
          state,
          acceptedAt: rnd() < 0.05 ? 'not a time' : at(s * 10 + q),
          startedAt: started ? at(s * 10 + q) : null,
          usage:
            rnd() < 0.3
              ? null
              : {
                  inputTokens: Math.floor(rnd() * 5000),
                  outputTokens: Math.floor(rnd() * 900),
                  cacheCreationTokens: 0,
                  cacheReadTokens: Math.floor(rnd() * 100),
                  thinkingTokens: 7,
                  factoryCredits: rnd() < 0.5 ? null : Math.round(rnd() * 1000) / 100,
                },
          preview: rnd() < 0.3 ? '' : `output of ${id}#${q} ${'é✓'.repeat(Math.floor(rnd() * 5))}`,
          events: rnd() < 0.5 ? [] : [{ at: at(q), kind: 'tool_started', detail: `Read ${q}` }],
          ...(rnd() < 0.3 && {
            changes: { added: rnd() < 0.5 ? [] : ['a.ts'], modified: [], deleted: [], renamed: [], truncated: 0, outsideWorkspace: false },
          }),
          ...(rnd() < 0.2 && { structuredOutput: { ok: true, n: q } }),
          ...(rnd() < 0.2 && { context: null }),
          // Not drawn from rnd, so the other fields stay as they were: a figure that never became final.
          ...(q % 3 === 0 && { usageLive: true as const }),
        }),
      );
    }
    out.sessions.push(
      sessionRecord({
        id,
        createdAt: at(s),
        updatedAt: at(s),
        title: rnd() < 0.5 ? null : `title ${s}`,
        labels: rnd() < 0.5 ? [] : ['x'],
        headRunId: `${id}-r${n}`,
      }),
    );
  }
  return out;
}

/** A state directory: `first` committed and compacted into the snapshot (with its index), `then` in the journal on top. */
async function bed(
  first: { sessions: SessionRecord[]; runs: RunRecord[] },
  then: Array<{ sessions?: SessionRecord[]; runs?: RunRecord[] }> = [],
): Promise<string> {
  const dir = join(await tempBase(), 'state');
  const store = await openStore(dir);
  await store.commit(first);
  await store.close();
  await (await openStore(dir)).close(); // folds the journal into a snapshot and writes its index
  if (then.length > 0) {
    const again = await openStore(dir);
    for (const change of then) await again.commit(change);
    await again.close();
  }
  return dir;
}

/** A copy of `dir` without its run index, so start-up reads the whole snapshot. */
async function withoutIndex(dir: string): Promise<string> {
  const copy = join(await tempBase(), 'state');
  await cp(dir, copy, { recursive: true });
  await rm(join(copy, INDEX_FILE));
  return copy;
}

/** Everything the store shows, through every accessor. */
function everything(store: StateStore): unknown {
  const sessions = [...store.sessions.values()];
  const ids = [...store.runs.keys()];
  return {
    sessions,
    byId: ids.map((id) => store.runs.get(id)),
    bySession: sessions.map((s) => store.runsBySession(s.id)),
    byKey: ids.map((id) => store.runs.get(id)!.requestKey).map((k) => (k === null ? null : store.runByRequestKey(k)?.id)),
    values: [...store.runs.values()],
    entries: [...store.runs.entries()].map(([id, r]) => [id, r.id]),
    has: ids.every((id) => store.runs.has(id)) && !store.runs.has('nope'),
    size: store.runs.size,
  };
}

async function refusalOf(dir: string): Promise<StoreError> {
  try {
    await (await openStore(dir)).close();
  } catch (err) {
    expect(err).toBeInstanceOf(StoreError);
    return err as StoreError;
  }
  throw new Error('expected a refusal');
}

function reader(store: StateStore): SessionReader {
  return new SessionReader(store, { live: () => undefined, shown: (r) => r, override: () => undefined }, async (p) => p, { warn() {} });
}

describe('the index format', () => {
  it("the state column's codes name every run state exactly once", () => {
    expect(new Set(RUN_STATE_CODES).size).toBe(RUN_STATE_CODES.length);
    expect([...RUN_STATE_CODES].sort()).toEqual([...runState.options].sort());
  });
});

describe('start-up through the run index', () => {
  it('shows exactly what a whole read shows, through every accessor, with a journal on top', async () => {
    for (const seed of [1, 2, 3]) {
      const data = generated(seed, 40, 6);
      const later = generated(seed + 100, 5, 3);
      const changed = data.runs.filter((_, i) => i % 7 === 0).map((r) => ({ ...r, preview: r.preview === '' ? 'now set' : '', state: 'failed' as const }));
      const dir = await bed(data, [
        { runs: changed.slice(0, 3) },
        { runs: changed.slice(3) },
        {
          sessions: later.sessions.map((s) => ({ ...s, id: `n${s.id}`, headRunId: `n${s.headRunId}` })),
          runs: later.runs.map((r) => ({ ...r, id: `n${r.id}`, sessionId: `n${r.sessionId}`, requestKey: null })),
        },
      ]);
      // Both start-ups compact the journal; compare each against a copy of the same bed.
      const whole = await withoutIndex(dir);
      const lazy = await openStore(dir);
      const full = await openStore(whole);
      try {
        expect(lazy.startup.via, `seed ${seed}`).toBe('index');
        expect(full.startup.via).toBe('whole');
        // Compacting the journal at open read back at most the preview of a session's latest run whose later one lost its preview.
        const readsAtOpen = lazy.runReads;
        expect(readsAtOpen).toBeLessThanOrEqual(changed.length);
        // Facts first, before any record is read: they must agree with the records a whole read makes.
        const facts = [...lazy.runFacts()];
        expect(
          facts.map((f) => differingFact(f, factsOf(full.runs.get(f.id)!))),
          `seed ${seed}`,
        ).toEqual(facts.map(() => undefined));
        for (const s of full.sessions.keys()) expect(lazy.runFactsBySession(s).map((f) => f.id)).toEqual(full.runsBySession(s).map((r) => r.id));
        expect(lazy.runReads).toBe(readsAtOpen);
        expect(everything(lazy), `seed ${seed}`).toEqual(everything(full));
        expect(lazy.runReads).toBeGreaterThan(readsAtOpen);
      } finally {
        await lazy.close();
        await full.close();
      }
    }
  });

  it('is taken only with an index that matches: missing, truncated, another version, damaged or stale send start-up the whole way, with the same state', async () => {
    const data = generated(7, 20, 4);
    const dir = await bed(data);
    const expected = await (async () => {
      const s = await openStore(await withoutIndex(dir));
      const c = contents(s);
      await s.close();
      return c;
    })();
    const index = await readFile(join(dir, INDEX_FILE));
    const header = index.subarray(0, index.indexOf(0x0a) + 1);
    const cases: Array<[string, (d: string) => Promise<void>, RegExp]> = [
      ['missing', (d) => rm(join(d, INDEX_FILE)), /does not exist/],
      ['truncated', (d) => writeFile(join(d, INDEX_FILE), index.subarray(0, index.length - 100)), /truncated/],
      ['empty', (d) => writeFile(join(d, INDEX_FILE), ''), /no header line/],
      [
        'of another version',
        (d) =>
          writeFile(join(d, INDEX_FILE), Buffer.concat([Buffer.from(header.toString().replace('"version":2', '"version":9')), index.subarray(header.length)])),
        /version 9/,
      ],
      ['with a damaged body', (d) => writeFile(join(d, INDEX_FILE), Buffer.from(index).fill(0x31, index.length - 50, index.length - 49)), /checksum/],
    ];
    for (const [what, damage, why] of cases) {
      const copy = join(await tempBase(), 'state');
      await cp(dir, copy, { recursive: true });
      await damage(copy);
      const { log, logged } = capture();
      const store = await openStore(copy, { logger: log });
      expect(store.startup.via, what).toBe('whole');
      expect(store.startup.why, what).toMatch(why);
      expect(contents(store), what).toEqual(expected);
      await store.close();
      // A damaged index is worth a warning; a missing one only an info line.
      expect(
        logged.some((l) => l.msg.startsWith('run index not used')),
        what,
      ).toBe(what !== 'missing');
      // Start-up wrote a good index again: the next one goes through it.
      const next = await openStore(copy);
      expect(next.startup.via, `${what}, then restarted`).toBe('index');
      expect(contents(next), what).toEqual(expected);
      await next.close();
    }
  });

  it('is not taken when one byte of a run line changed (the SHA-256 differs): the whole read then shows it, or refuses it exactly as without an index', async () => {
    const data = generated(11, 10, 3);
    const dir = await bed(data);
    const text = await readFile(join(dir, STATE_FILE), 'utf8');
    const target = data.runs.find((r) => r.preview.startsWith('output'))!;
    // Same length, still valid: only the hash can tell.
    const edited = text.replace(`"preview":"${target.preview}"`, `"preview":"${'O' + target.preview.slice(1)}"`);
    expect(edited).not.toBe(text);
    await writeFile(join(dir, STATE_FILE), edited);
    const store = await openStore(dir);
    expect(store.startup).toEqual({ via: 'whole', why: expect.stringContaining('SHA-256 differs') });
    expect(store.runs.get(target.id)!.preview).toBe('O' + target.preview.slice(1));
    await store.close();

    // Made invalid: the same refusal, word for word, as with no index at all.
    const broken = join(await tempBase(), 'state');
    await cp(await bed(data), broken, { recursive: true });
    const lines = (await readFile(join(broken, STATE_FILE), 'utf8')).split('\n');
    const at = lines.findIndex((l) => l.includes(`"id":"${target.id}"`));
    lines[at] = lines[at]!.replace('"hasResult":true', '"hasResult":"yes"');
    await writeFile(join(broken, STATE_FILE), lines.join('\n'));
    const withIndex = await refusalOf(broken);
    const withoutAny = await refusalOf(await withoutIndex(broken));
    expect(withIndex.code).toBe('state_corrupt');
    expect(withIndex.message.replaceAll(broken, '<dir>')).toBe(withoutAny.message.replace(/\/tmp\/[^ ]*?\/state/g, '<dir>'));
  });

  it("is not taken when a crash left the previous snapshot's index beside a new snapshot", async () => {
    const data = generated(5, 10, 3);
    const dir = await bed(data);
    const old = await readFile(join(dir, INDEX_FILE));
    const store = await openStore(dir);
    await store.commit({ runs: [{ ...data.runs[0]!, preview: 'changed' }] });
    await store.close();
    await (await openStore(dir)).close(); // compacts: a new snapshot and index
    await writeFile(join(dir, INDEX_FILE), old);
    const again = await openStore(dir);
    expect(again.startup).toEqual({ via: 'whole', why: expect.stringContaining('describes another snapshot') });
    expect(again.runs.get(data.runs[0]!.id)!.preview).toBe('changed');
    await again.close();
  });
});

describe('the index written after a whole read', () => {
  it('describes the snapshot as it is on disk, even when crash recovery then changes runs in the journal', async () => {
    const data = generated(71, 6, 3);
    const live = { ...data.runs[0]!, state: 'running' as const, endedAt: null };
    // A snapshot as a crash leaves it (a run in flight) with an empty journal and no index.
    const dir = join(await tempBase(), 'state');
    await mkdir(dir, { mode: 0o700 });
    const runs = [live, ...data.runs.slice(1)];
    await writeSnapshot(dir, 0, { size: data.sessions.length, values: () => data.sessions }, { size: runs.length, values: () => runs });
    await rm(join(dir, INDEX_FILE));
    const store = await openStore(dir);
    expect(store.startup.via).toBe('whole');
    expect(store.recovery.unknown).toBe(1);
    expect(store.runs.get(live.id)!.state).toBe('unknown');
    await store.close();
    const read = await readRunIndex(dir);
    if (!('body' in read)) throw new Error(read.why);
    const onDisk = (await readFile(join(dir, STATE_FILE), 'utf8'))
      .split('\n')
      .filter((l) => l.startsWith('{"run":'))
      .map((l) => (JSON.parse(l) as { run: RunRecord }).run.state);
    expect(
      Array.from(
        read.body.state,
        (code) => ['queued', 'starting', 'running', 'cancelling', 'succeeded', 'interrupted', 'failed', 'timed_out', 'cancelled', 'unknown'][code],
      ),
    ).toEqual(onDisk);
    expect(onDisk[0]).toBe('running');
  });
});

describe('an index that passes its checks but is wrong (a bug in its writer)', () => {
  it('never refuses start-up: a broken invariant among its stubs sends start-up the whole way', async () => {
    const data = generated(61, 8, 3);
    const dir = await bed(data);
    const read = await readRunIndex(dir);
    if (!('body' in read)) throw new Error(read.why);
    const store = await openStore(dir);
    const table = store.runs as unknown as RunTable;
    const runs = [...table.facts()].map((e) => ({ facts: e as RunFacts, length: e.length }));
    const sessions = [...store.sessions.keys()];
    await store.close();
    // Two runs of one session claim the same position.
    const owner = sessions.find((id) => runs.filter((r) => r.facts.sessionId === id).length >= 2)!;
    const [a, b] = runs.filter((r) => r.facts.sessionId === owner);
    expect(b).toBeDefined();
    b!.facts = { ...b!.facts, usage: b!.facts.usage, seq: a!.facts.seq };
    await writeRunIndex(
      dir,
      read.body.snapshot,
      runs,
      (id) => sessions.indexOf(id),
      () => '',
    );
    const { log, logged } = capture();
    const again = await openStore(dir, { logger: log });
    expect(again.startup).toEqual({ via: 'whole', why: expect.stringContaining('breaks an invariant') });
    expect(logged.map((l) => l.msg)).toContain('run index not used (a cache: nothing is lost): reading the whole snapshot');
    expect(again.runsBySession(a!.facts.sessionId).map((r) => r.seq)).toEqual(data.runs.filter((r) => r.sessionId === a!.facts.sessionId).map((r) => r.seq));
    await again.close();
  });
});

describe('compaction with runs kept in the snapshot', () => {
  it('copies unread runs, writes read and changed ones, and keeps every run readable after it and after a restart', async () => {
    const data = generated(21, 30, 5);
    const dir = await bed(data);
    const store = await openStore(dir, { compactMinLines: 0 });
    expect(store.startup.via).toBe('index');
    // Some read (kept), some changed (journal), most never touched.
    for (const r of data.runs.filter((_, i) => i % 5 === 0)) store.runs.get(r.id);
    const reads = store.runReads;
    const changes = data.runs.filter((_, i) => i % 9 === 0).map((r) => ({ ...r, preview: `changed ${r.id}` }));
    // Enough commits to pass the record count: compaction runs (more than once).
    for (let i = 0; i < data.sessions.length + data.runs.length + 2; i++) await store.commit({ runs: [changes[i % changes.length]!] });
    expect((await readFile(join(dir, 'journal.jsonl'), 'utf8')).split('\n').filter(Boolean).length).toBeLessThan(data.runs.length);
    // Compaction read nothing back to copy the unread runs.
    expect(store.runReads).toBe(reads);
    const expected = everything(store);
    expect(store.runs.get(changes[0]!.id)!.preview).toBe(`changed ${changes[0]!.id}`);
    await store.close();

    const restarted = await openStore(dir);
    expect(restarted.startup.via).toBe('index');
    expect(everything(restarted)).toEqual(expected);
    await restarted.close();
    const whole = await openStore(await withoutIndex(dir));
    expect(everything(whole)).toEqual(expected);
    await whole.close();
  });
});

describe('bulk reads read no record', () => {
  it('usage over every run, and find with a text query, a state or hasChanges over every session', async () => {
    const data = generated(31, 50, 6);
    const dir = await bed(data, [{ runs: [{ ...data.runs[3]!, preview: 'journal preview', state: 'unknown' }] }]);
    const whole = await openStore(await withoutIndex(dir));
    const lazy = await openStore(dir);
    try {
      expect(lazy.startup.via).toBe('index');
      const fast = reader(lazy);
      const slow = reader(whole);
      const queries = [
        { query: 'zzz-nothing' },
        { query: 'output of s4' },
        { state: 'unknown' as const },
        { state: 'idle' as const },
        { hasChanges: true },
        { query: 'journal preview' },
        { tokensAbove: 12_000 },
        { creditsAbove: 15 },
      ];
      const before = lazy.runReads;
      // The spend read off an index stub's columns is the one its usage gives.
      for (const session of data.sessions) {
        for (const f of lazy.runFactsBySession!(session.id)!) {
          const u = f.usage;
          expect([f.spentTokens, f.spentCredits]).toEqual(u === null ? [0, 0] : [tokensOf(u), u.factoryCredits ?? 0]);
        }
      }
      expect(fast.usage({})).toEqual(slow.usage({}));
      expect(fast.usage({ after: at(100), before: at(300) })).toEqual(slow.usage({ after: at(100), before: at(300) }));
      const ids = async (r: SessionReader, q: object) => (await r.find({ ...q }, undefined, 100)).sessions.map((s) => s.session);
      for (const q of queries.filter((q) => 'query' in q && q.query === 'zzz-nothing')) {
        expect(await ids(fast, q)).toEqual([]);
      }
      // A find that matches nothing reads no record at all; one that matches reads only the page it returns.
      expect(lazy.runReads).toBe(before);
      for (const q of queries) expect(await ids(fast, q), JSON.stringify(q)).toEqual(await ids(slow, q));
      // And the spend filter agrees with the runs themselves (journal changes keep their usage).
      const spent = new Map<string, number>();
      for (const r of data.runs) spent.set(r.sessionId, (spent.get(r.sessionId) ?? 0) + (r.usage === null ? 0 : tokensOf(r.usage)));
      const above = [...spent].filter(([, t]) => t > 12_000).map(([id]) => id);
      expect(above.length).toBeGreaterThan(0);
      expect((await ids(fast, { tokensAbove: 12_000 })).sort()).toEqual(above.sort());
    } finally {
      await lazy.close();
      await whole.close();
    }
  });

  it("a status reads back one record, its head run's, and shows what a whole read shows", async () => {
    const data = generated(37, 40, 6);
    const dir = await bed(data, [{ runs: [{ ...data.runs[5]!, preview: 'journal preview', state: 'unknown' }] }]);
    const whole = await openStore(await withoutIndex(dir));
    const lazy = await openStore(dir);
    try {
      expect(lazy.startup.via).toBe('index');
      const fast = reader(lazy);
      const slow = reader(whole);
      // Building the reader (every session's summary) read nothing.
      const atStart = lazy.runReads;
      expect(atStart).toBe(0);
      for (const session of lazy.sessions.values()) {
        const before = lazy.runReads;
        expect(fast.status(session.id)).toEqual(slow.status(session.id));
        expect(lazy.runReads - before, session.id).toBeLessThanOrEqual(1);
        // Read once: a second status reads nothing.
        const again = lazy.runReads;
        fast.status(session.id);
        expect(lazy.runReads).toBe(again);
      }
    } finally {
      await lazy.close();
      await whole.close();
    }
  });
});

describe('a run that no longer reads back as verified', () => {
  it('is refused as state_unreadable, never read as a record; a tool call says so without naming files', async () => {
    const data = generated(41, 5, 3);
    const dir = await bed(data);
    const store = await openStore(dir);
    expect(store.startup.via).toBe('index');
    const victim = data.runs.find((r) => r.preview.startsWith('output'))!;
    // Written in place (not replaced by rename): the descriptor the store reads from sees it. The
    // fingerprint is no fact the index holds: only the check that the file is unchanged can tell.
    const bytes = await readFile(join(dir, STATE_FILE));
    const line = bytes.indexOf(`{"run":{"id":"${victim.id}"`);
    const where = bytes.indexOf('"fingerprint":"f', line);
    expect(line).toBeGreaterThan(0);
    const file = await openFile(join(dir, STATE_FILE), 'r+');
    await file.write(Buffer.from('"fingerprint":"e'), 0, 16, where);
    await file.close();

    let err: unknown;
    try {
      store.runs.get(victim.id);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(StoreError);
    expect((err as StoreError).code).toBe('state_unreadable');
    expect((err as StoreError).message).toContain(`run ${victim.id}`);

    const sessions = reader(store);
    const ctx = { controller: { status: (id: string) => sessions.status(id) } as unknown as SessionController } as unknown as ToolContext;
    const logged: unknown[] = [];
    const result = await callTool('droid_get_session_status', { session: victim.sessionId }, ctx, { error: (obj: unknown) => logged.push(obj) } as never);
    expect(result.isError).toBe(true);
    const text = (result.content as Array<{ text: string }>)[0]!.text;
    expect(JSON.parse(text).error).toMatchObject({ code: 'state_unreadable', retryable: false });
    expect(text).not.toContain(dir);
    expect(logged).toHaveLength(1);
    await store.close();
  });

  it('is refused when the file keeps its times but the line is not the run the index named', async () => {
    const data = generated(43, 4, 3);
    const dir = await bed(data);
    // Swap two runs' facts in the index: each line then reads back as another run than its stub.
    const store = await openStore(dir);
    const [a, b] = [...store.runs.keys()];
    const ea = (store.runs as unknown as { entry(id: string): { offset: number; length: number } }).entry(a!)!;
    const eb = (store.runs as unknown as { entry(id: string): { offset: number; length: number } }).entry(b!)!;
    [ea.offset, eb.offset, ea.length, eb.length] = [eb.offset, ea.offset, eb.length, ea.length];
    expect(() => store.runs.get(a!)).toThrow(/cannot be read back: its id differs from the run index/);
    await store.close();
  });
});

describe('crash images of the run index write', () => {
  it('every image of a compaction loads the same state, through the index once it is durable', async () => {
    const root = await tempBase();
    const dir = join(root, 'state');
    const first = await openStore(dir);
    const data = generated(51, 6, 3);
    await first.commit(data);
    const state: Contents = contents(first);
    await first.close();
    const fs = await CrashFs.over(root);
    let store: StateStore | undefined;
    const vias: string[] = [];
    await atEveryCrashPoint(
      fs,
      async () => (store = await openStore(dir, { fs })),
      async (image) =>
        openImage(image, async (s) => {
          expect(contents(s), `the ${image.kind} image after ${image.after}`).toEqual(state);
          vias.push(`${image.kind} ${image.settled ? 'settled' : image.after.split(' ')[0]} ${s.startup.via}`);
        }),
    );
    expect(fs.callsSince(0)).toContain('rename state/.state.index.<tmp> -> state/state.index');
    // Once open resolved, the index is durable: both kinds of image start through it.
    expect(vias.filter((v) => v.includes('settled'))).toEqual(['synced settled index', 'metadata-first settled index']);
    await store!.close();
  });
});
