/**
 * droid's own session powers through the tools (issue 40): fork a session,
 * rewind a turn (its words and its files), compact a conversation. The
 * built server over stdio, real workers in the default sandbox (bwrap), the
 * real droid CLI and the scripted model.
 */
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { isSummaryRequest, messageText, script, SCRIPTED_SUMMARY } from '../../../src/testbed/scripted-model.js';
import type { RunningServer } from '../../support/mcp-server.js';
import { waitForNoProcesses } from '../../support/processes.js';
import { turnOpenings } from '../../support/fault-harness.js';
import { makeContext, type E2EContext } from '../../support/e2e-context.js';
import type { Acceptance, SessionView } from '../../support/tool-views.js';

let ctx: E2EContext;
let server: RunningServer;
const TAG = `e2e-powers-${process.pid}-${Date.now()}`;

beforeAll(async () => {
  ctx = await makeContext(TAG);
  server = await ctx.start({ maxConcurrentRuns: 4 });
});
afterEach(async () => {
  // Nothing of a test is still running when the next begins.
  for (;;) {
    const live = (await server.ok<{ sessions: SessionView[] }>('droid_find_sessions', { state: 'working' })).sessions;
    if (live.length === 0) break;
    await settle(...live.map((s) => s.session));
  }
});
afterAll(async () => {
  await server?.close();
  await waitForNoProcesses(TAG, 15_000);
  await ctx?.cleanup();
});

let keys = 0;
const key = () => `powers-${++keys}`;

async function settle(...sessions: string[]): Promise<SessionView[]> {
  for (;;) {
    const waited = await server.ok<{ sessions: SessionView[]; timedOut: boolean }>('droid_wait_for_sessions', { sessions, timeoutSeconds: 30 });
    if (!waited.timedOut) return waited.sessions;
  }
}

async function create(args: Record<string, unknown>): Promise<Acceptance> {
  return server.ok<Acceptance>('droid_create_session', { requestKey: key(), replyTo: null, autonomy: 'high', ...args });
}

async function send(session: string, args: Record<string, unknown>): Promise<Acceptance> {
  return server.ok<Acceptance>('droid_send_message', { requestKey: key(), session, ...args });
}

async function done(session: string): Promise<SessionView> {
  const [view] = await settle(session);
  return view!;
}

/** The text of every message of the model request that carried `marker`, joined. */
function requestWith(marker: string): string {
  const request = ctx.bed.model.requests.find((r) => r.messages.some((m) => m.role === 'user' && messageText(m).includes(marker)));
  if (!request) throw new Error(`no model request carried ${marker}`);
  return request.messages.map(messageText).join('\n');
}

/** The rejection of a call expected to fail. */
async function fail(name: string, args: Record<string, unknown>): Promise<{ code: string; message: string; retryable: boolean; action: string }> {
  const outcome = await server.call(name, args);
  if (!outcome.isError) throw new Error(`${name} was expected to fail: ${outcome.text.slice(0, 300)}`);
  return outcome.structured.error as { code: string; message: string; retryable: boolean; action: string };
}

const createFile = (path: string, content: string) => ({ name: 'Create', arguments: { file_path: path, content } });

describe('fork', () => {
  it("a fork's first turn carries the source's history, and the source never sees the fork's", async () => {
    const ws = ctx.workspace('fork-history');
    const usage = (prompt_tokens: number, completion_tokens: number) => ({ prompt_tokens, completion_tokens });
    const source = await create({ workspace: ws, autonomy: 'off', prompt: `source-one-qk1 ${script({ text: 'source answer one', usage: usage(1000, 70) })}` });
    const sourceDone = await done(source.metadata.session);
    expect(sourceDone.latestRun.state).toBe('succeeded');

    const fork = await create({
      workspace: ws,
      autonomy: 'off',
      title: 'The fork',
      // Its own budget, below what the source spent: a running figure counted from zero rather than from the fork's start would stop it.
      budget: { maxTokens: 1000 },
      forkFrom: { session: source.metadata.session },
      prompt: `fork-turn-qk2 ${script({ text: 'fork answer', usage: usage(500, 30) })}`,
    });
    const forkDone = await done(fork.metadata.session);
    expect(forkDone.latestRun.state, JSON.stringify(forkDone.latestRun.error)).toBe('succeeded');
    expect(forkDone.forkOf).toEqual({ session: source.metadata.session, run: source.metadata.run });
    expect(forkDone.title).toBe('The fork');
    expect(fork.metadata.session).not.toBe(source.metadata.session);
    // The fork accounts for its own turn only, not the source's it carries.
    expect(forkDone.latestRun.usage).toMatchObject({ inputTokens: 500, outputTokens: 30, final: true });
    expect(forkDone.budget).toMatchObject({ maxTokens: 1000, spentTokens: 530 });
    // The fork's model request holds the source's turn.
    expect(requestWith('fork-turn-qk2')).toContain('source-one-qk1');

    // The source goes on without the fork's turn.
    await send(source.metadata.session, { prompt: `source-two-qk3 ${script({ text: 'source answer two' })}` });
    expect((await done(source.metadata.session)).latestRun.state).toBe('succeeded');
    const sourceSees = requestWith('source-two-qk3');
    expect(sourceSees).toContain('source-one-qk1');
    expect(sourceSees).not.toContain('fork-turn-qk2');
  });

  it('forks right after an earlier run, and refuses a run not of the source, an unknown source, and another workspace', async () => {
    const ws = ctx.workspace('fork-at');
    const source = await create({ workspace: ws, autonomy: 'off', prompt: `at-one-qk4 ${script({ text: 'one' })}` });
    await done(source.metadata.session);
    await send(source.metadata.session, { prompt: `at-two-qk5 ${script({ text: 'two' })}` });
    await done(source.metadata.session);

    const fork = await create({
      workspace: ws,
      autonomy: 'off',
      forkFrom: { session: source.metadata.session, run: source.metadata.run },
      prompt: `at-fork-qk6 ${script({ text: 'f' })}`,
    });
    const forkDone = await done(fork.metadata.session);
    expect(forkDone.latestRun.state, JSON.stringify(forkDone.latestRun.error)).toBe('succeeded');
    const seen = requestWith('at-fork-qk6');
    expect(seen).toContain('at-one-qk4');
    expect(seen).not.toContain('at-two-qk5');

    const other = await create({ workspace: ctx.workspace('fork-other'), autonomy: 'off', prompt: `other ${script({ text: 'o' })}` });
    await done(other.metadata.session);
    const refusals = [
      { forkFrom: { session: source.metadata.session, run: other.metadata.run }, code: 'fork_point_invalid', workspace: ws },
      { forkFrom: { session: 'no-such-session' }, code: 'session_not_found', workspace: ws },
      { forkFrom: { session: source.metadata.session }, code: 'invalid_arguments', workspace: ctx.workspace('fork-elsewhere') },
    ];
    for (const r of refusals) {
      const error = await fail('droid_create_session', {
        requestKey: key(),
        replyTo: null,
        autonomy: 'off',
        workspace: r.workspace,
        forkFrom: r.forkFrom,
        prompt: 'x',
      });
      expect(error.code).toBe(r.code);
      expect(error.action).toBeTruthy();
    }
  });
});

describe('fork containment', () => {
  it('a fork of a model-only session stays model-only, and refuses to widen it', async () => {
    const ws = ctx.workspace('fork-model-only');
    const source = await create({ workspace: ws, autonomy: 'off', network: 'model-only', prompt: `mo-one ${script({ text: 'one' })}` });
    await done(source.metadata.session);
    const wider = await fail('droid_create_session', {
      requestKey: key(),
      replyTo: null,
      autonomy: 'off',
      workspace: ws,
      network: 'host',
      forkFrom: { session: source.metadata.session },
      prompt: 'x',
    });
    expect(wider.code).toBe('network_above_ceiling');
    const fork = await create({ workspace: ws, autonomy: 'off', forkFrom: { session: source.metadata.session }, prompt: `mo-fork ${script({ text: 'f' })}` });
    expect(fork.status.network).toBe('model-only');
    expect((await done(fork.metadata.session)).latestRun.state).toBe('succeeded');
  });

  it("a hostile fork's turn reaches no host its model-only source could not: its curl to the operator's allow list is refused", async () => {
    // A server of its own, whose operator allows one more host than the model endpoints.
    const host = await ctx.start({ network: { allow: ['allowed.invalid'] }, stateDirectory: join(ctx.root, '..', 'state-fork-egress') });
    const call = <T>(name: string, args: Record<string, unknown>) => host.ok<T>(name, { requestKey: key(), ...args });
    const settleOn = async (session: string): Promise<SessionView> => {
      for (;;) {
        const waited = await host.ok<{ sessions: SessionView[]; timedOut: boolean }>('droid_wait_for_sessions', { sessions: [session], timeoutSeconds: 30 });
        if (!waited.timedOut) return waited.sessions[0]!;
      }
    };
    const curl = {
      name: 'Execute',
      arguments: { command: 'curl -s -m 10 http://allowed.invalid/ | head -c 60; echo', riskLevel: 'low', riskLevelReason: 'test' },
    };
    const refused = (v: SessionView) => (v.latestRun.egress?.refused ?? []).map((r) => `${r.host}:${r.port}`);
    try {
      const ws = ctx.workspace('fork-egress');
      const open = await call<Acceptance>('droid_create_session', {
        replyTo: null,
        autonomy: 'high',
        workspace: ws,
        prompt: `fe-open ${script({ tool: curl })}`,
      });
      // The allow list works: a session with the host's policy is not refused (the name does not resolve: a 502).
      expect(refused(await settleOn(open.metadata.session))).toEqual([]);
      const source = await call<Acceptance>('droid_create_session', {
        replyTo: null,
        autonomy: 'off',
        workspace: ws,
        network: 'model-only',
        prompt: `fe-source ${script({ text: 'one' })}`,
      });
      await settleOn(source.metadata.session);
      const fork = await call<Acceptance>('droid_create_session', {
        replyTo: null,
        autonomy: 'high',
        workspace: ws,
        forkFrom: { session: source.metadata.session },
        prompt: `fe-fork ${script({ tool: curl })}`,
      });
      const view = await settleOn(fork.metadata.session);
      expect(view.latestRun.state, JSON.stringify(view.latestRun.error)).toBe('succeeded');
      expect(refused(view)).toEqual(['allowed.invalid:80']);
    } finally {
      await host.close();
    }
  });
});

describe('model-only on a host since unconfined', () => {
  it('a model-only session never runs its turn once the host runs turns without the sandbox: nothing reaches droid', async () => {
    const state = join(ctx.root, '..', 'state-model-only-off');
    const first = await ctx.start({ stateDirectory: state });
    const ws = ctx.workspace('model-only-off');
    let session: string;
    try {
      const a = await first.ok<Acceptance>('droid_create_session', {
        requestKey: key(),
        replyTo: null,
        autonomy: 'off',
        workspace: ws,
        network: 'model-only',
        prompt: `mo-off-one ${script({ text: 'one' })}`,
      });
      session = a.metadata.session;
      await first.ok('droid_wait_for_sessions', { sessions: [session], timeoutSeconds: 30 });
    } finally {
      await first.close();
    }
    // The operator turns the sandbox off: the session's next turn, a hostile fetch, would have had the host's whole network.
    const unconfined = await ctx.start({ stateDirectory: state, sandbox: 'off' });
    try {
      const curl = { name: 'Execute', arguments: { command: 'curl -s -m 5 http://example.invalid/; echo', riskLevel: 'low', riskLevelReason: 'test' } };
      await unconfined.ok('droid_send_message', { requestKey: key(), session, autonomy: 'high', prompt: `mo-off-two ${script({ tool: curl })}` });
      const waited = await unconfined.ok<{ sessions: SessionView[] }>('droid_wait_for_sessions', { sessions: [session], timeoutSeconds: 30 });
      expect(waited.sessions[0]!.latestRun).toMatchObject({ state: 'failed', error: { code: 'network_unavailable' } });
      expect(ctx.bed.model.requests.some((r) => r.messages.some((m) => messageText(m).includes('mo-off-two')))).toBe(false);
    } finally {
      await unconfined.close();
    }
  });
});

describe('rewind', () => {
  it('deletes the file the undone turn created, restores one it edited, and the model no longer sees it but still sees the turn before', async () => {
    const ws = ctx.workspace('rewind-files');
    const edited = join(ws, 'edited.txt');
    const created = join(ws, 'created.txt');
    writeFileSync(edited, 'original\n');
    const first = await create({ workspace: ws, prompt: `rw-one-qk7 ${script({ text: 'kept turn' })}` });
    await done(first.metadata.session);
    const session = first.metadata.session;
    const undone = await send(session, { prompt: `rw-two-qk8 ${script({ steps: [createFile(created, 'new\n'), createFile(edited, 'changed\n')] })}` });
    expect((await done(session)).latestRun.state).toBe('succeeded');
    expect(readFileSync(edited, 'utf8')).toBe('changed\n');
    expect(existsSync(created)).toBe(true);

    const usage = { prompt_tokens: 300, completion_tokens: 20 };
    const rewind = await send(session, { rewindTo: undone.metadata.run, prompt: `rw-three-qk9 ${script({ text: 'after the rewind', usage })}` });
    const view = await done(session);
    expect(view.latestRun.state, JSON.stringify(view.latestRun.error)).toBe('succeeded');
    expect(view.latestRun.rewindTo).toBe(undone.metadata.run);
    // The rewound session's turn accounts for itself, from droid's new session.
    expect(view.latestRun.usage).toMatchObject({ inputTokens: 300, outputTokens: 20, final: true });
    expect(view.latestRun.rewind).toMatchObject({ restored: [edited], deleted: [created], failed: 0 });
    expect(readFileSync(edited, 'utf8')).toBe('original\n');
    expect(existsSync(created)).toBe(false);
    const seen = requestWith('rw-three-qk9');
    expect(seen).toContain('rw-one-qk7');
    expect(seen).not.toContain('rw-two-qk8');

    // The undone run stays in history, marked.
    const history = await server.ok<{ items: Array<{ run: string; type: string; kind?: string }> }>('droid_read_session', { session, limit: 100 });
    expect(history.items.filter((i) => i.run === undone.metadata.run && i.type === 'tool_call')).toHaveLength(2);
    expect(history.items.find((i) => i.run === undone.metadata.run && i.kind === 'rewound')).toBeTruthy();
    expect(history.items.find((i) => i.run === rewind.metadata.run && i.kind === 'rewind')).toBeTruthy();
    const status = await server.ok<{ status: SessionView }>('droid_get_session_status', { session });
    expect(status.status.latestRun.run).toBe(rewind.metadata.run);
  });

  it('refuses a foreign or unfinished run, and never overwrites a file a person edited after the turn', async () => {
    const ws = ctx.workspace('rewind-refusals');
    const file = join(ws, 'notes.txt');
    const a = await create({ workspace: ws, prompt: `rf-one ${script({ steps: [createFile(file, 'by the turn\n')] })}` });
    await done(a.metadata.session);
    const other = await create({ workspace: ctx.workspace('rewind-foreign'), autonomy: 'off', prompt: `foreign ${script({ text: 'f' })}` });
    await done(other.metadata.session);
    const foreign = await fail('droid_send_message', { requestKey: key(), session: a.metadata.session, rewindTo: other.metadata.run, prompt: 'x' });
    expect(foreign.code).toBe('rewind_target_invalid');
    // A rewind writes the files it puts back: never at autonomy off.
    const reader = await fail('droid_send_message', { requestKey: key(), session: a.metadata.session, rewindTo: a.metadata.run, autonomy: 'off', prompt: 'x' });
    expect(reader.code).toBe('rewind_read_only');

    const slow = await send(a.metadata.session, { prompt: `rf-slow ${script({ text: 'slow', slowMs: 3_000 })}` });
    const unfinished = await fail('droid_send_message', { requestKey: key(), session: a.metadata.session, rewindTo: slow.metadata.run, prompt: 'x' });
    expect(unfinished.code).toBe('rewind_target_unfinished');
    expect(unfinished.retryable).toBe(true);
    await done(a.metadata.session);

    // A person edits the file after the turn: the rewind refuses, and nothing changes.
    writeFileSync(file, 'edited by a person\n');
    await send(a.metadata.session, { rewindTo: a.metadata.run, prompt: `rf-rewind ${script({ text: 'never runs' })}` });
    const view = await done(a.metadata.session);
    expect(view.latestRun.state).toBe('failed');
    expect(view.latestRun.error?.code).toBe('rewind_conflict');
    expect(view.latestRun.error?.message).toContain(file);
    expect(readFileSync(file, 'utf8')).toBe('edited by a person\n');
    expect(ctx.bed.model.requests.some((r) => r.messages.some((m) => messageText(m).includes('rf-rewind')))).toBe(false);
  });
});

describe('snapshots', () => {
  it("keep a session's file snapshots for its later rewinds, and no other session's turn sees them", async () => {
    const allManifests = () =>
      readdirSync(join(ctx.stateDir, 'snapshots'), { recursive: true, encoding: 'utf8' }).filter((path) => path.endsWith('.snapshots.json'));
    const earlier = allManifests();
    const ws = ctx.workspace('snapshots-a');
    const a = await create({ workspace: ws, prompt: `sn-a ${script({ steps: [createFile(join(ws, 'kept.txt'), 'a\n')] })}` });
    await done(a.metadata.session);
    // Session a's manifests (droid names each by its droid session), wherever they were kept: the ones its turn added.
    const manifests = allManifests().filter((path) => !earlier.includes(path));
    expect(manifests.length).toBeGreaterThan(0);
    // A turn of another session lists what droid's snapshots folder holds for it: nothing of session a.
    const snapshots = join(ctx.bed.home.dir, '.factory', 'snapshots');
    const look = { name: 'Execute', arguments: { command: `ls -R ${snapshots}; echo LISTED`, riskLevel: 'low', riskLevelReason: 'test' } };
    const b = await create({ workspace: ctx.workspace('snapshots-b'), prompt: `sn-b ${script({ steps: [look] })}` });
    await done(b.metadata.session);
    const items = (
      await server.ok<{ items: Array<{ type: string; result?: string | null }> }>('droid_read_session', { session: b.metadata.session, limit: 100 })
    ).items;
    const listing = items.map((i) => (i.type === 'tool_call' ? (i.result ?? '') : '')).join('\n');
    expect(listing).toContain('LISTED');
    for (const path of manifests) expect(listing).not.toContain(basename(path));
    // Kept in session a's own folder, for its later rewinds.
    expect(manifests.every((path) => path.startsWith(`${a.metadata.session}/manifests/`))).toBe(true);
  });
});

describe('compact', () => {
  it('compacts the conversation, shows the context before and after, and the conversation goes on', async () => {
    const ws = ctx.workspace('compact');
    const a = await create({ workspace: ws, autonomy: 'off', prompt: `cp-one-qk10 ${script({ text: 'long answer '.repeat(200) })}` });
    await done(a.metadata.session);
    await send(a.metadata.session, { compact: true, prompt: `cp-two-qk11 ${script({ text: 'after compaction' })}` });
    const view = await done(a.metadata.session);
    expect(view.latestRun.state, JSON.stringify(view.latestRun.error)).toBe('succeeded');
    const compaction = view.latestRun.compaction!;
    expect(compaction.auto).toBe(false);
    expect(compaction.removedMessages).toBeGreaterThan(0);
    expect(compaction.before!.used).toBeGreaterThan(compaction.after!.used);
    const seen = requestWith('cp-two-qk11');
    expect(seen).toContain(SCRIPTED_SUMMARY);
    expect(seen).not.toContain('cp-one-qk10');
  });

  it("compacts by itself before a turn once the last context passed the host's autoCompactAt", async () => {
    // A server of its own beside the file's: its own state directory.
    const auto = await ctx.start({ autoCompactAt: 0.0001, stateDirectory: join(ctx.root, '..', 'state-auto-compact') });
    try {
      const ws = ctx.workspace('auto-compact');
      const args = { requestKey: key(), replyTo: null, autonomy: 'off', workspace: ws, prompt: `ac-one ${script({ text: 'one' })}` };
      const first = await auto.ok<Acceptance>('droid_create_session', args);
      const settleOn = async () => {
        for (;;) {
          const waited = await auto.ok<{ sessions: SessionView[]; timedOut: boolean }>('droid_wait_for_sessions', {
            sessions: [first.metadata.session],
            timeoutSeconds: 30,
          });
          if (!waited.timedOut) return waited.sessions[0]!;
        }
      };
      expect((await settleOn()).latestRun.context!.fraction).toBeGreaterThan(0.0001);
      await auto.ok('droid_send_message', { requestKey: key(), session: first.metadata.session, prompt: `ac-two ${script({ text: 'two' })}` });
      const view = await settleOn();
      expect(view.latestRun.state, JSON.stringify(view.latestRun.error)).toBe('succeeded');
      expect(view.latestRun.compaction).toMatchObject({ auto: true });
      expect(requestWith('ac-two')).not.toContain('ac-one');
    } finally {
      await auto.close();
    }
  });
});

describe('request keys', () => {
  it('replay each new field with the same arguments, and refuse the same key with any of them changed', async () => {
    const ws = ctx.workspace('replays');
    const source = await create({ workspace: ws, autonomy: 'off', prompt: `rk-one ${script({ text: 'one' })}` });
    await done(source.metadata.session);
    const session = source.metadata.session;
    const fork = { requestKey: key(), replyTo: null, autonomy: 'off', workspace: ws, forkFrom: { session }, prompt: `rk-fork ${script({ text: 'f' })}` };
    const forked = await server.ok<Acceptance>('droid_create_session', fork);
    await done(forked.metadata.session);
    const rewind = { requestKey: key(), session, rewindTo: source.metadata.run, autonomy: 'low', prompt: `rk-rewind ${script({ text: 'r' })}` };
    const rewound = await server.ok<Acceptance>('droid_send_message', rewind);
    await done(session);
    const compact = { requestKey: key(), session, compact: true, prompt: `rk-compact ${script({ text: 'c' })}` };
    const compacted = await server.ok<Acceptance>('droid_send_message', compact);
    await done(session);

    for (const [tool, args, original] of [
      ['droid_create_session', fork, forked],
      ['droid_send_message', rewind, rewound],
      ['droid_send_message', compact, compacted],
    ] as const) {
      const again = await server.ok<Acceptance>(tool, args);
      expect(again.metadata).toMatchObject({ run: original.metadata.run, replayed: true });
    }
    const changed: Array<[string, Record<string, unknown>]> = [
      ['droid_create_session', { ...fork, forkFrom: { session, run: source.metadata.run } }],
      ['droid_create_session', { ...fork, forkFrom: undefined }],
      ['droid_send_message', { ...rewind, rewindTo: rewound.metadata.run }],
      ['droid_send_message', { ...rewind, rewindTo: undefined }],
      ['droid_send_message', { ...compact, compact: false }],
    ];
    for (const [tool, args] of changed) expect((await fail(tool, args)).code).toBe('request_key_conflict');
    expect((await fail('droid_send_message', { ...compact, requestKey: key(), rewindTo: source.metadata.run })).code).toBe('invalid_arguments');
    // None of those prompts reached the model twice (droid's summarizer quotes the conversation: not a turn).
    const turns = ctx.bed.model.requests.filter((r) => !isSummaryRequest(r.messages));
    for (const marker of ['rk-fork', 'rk-rewind', 'rk-compact']) expect(turnOpenings(turns, marker), marker).toBe(1);
  });
});
