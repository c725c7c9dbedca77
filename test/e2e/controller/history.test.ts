/**
 * History, search, metadata, usage and privacy, end to end through the MCP
 * client against the built server, real workers and the real droid CLI.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DroidClient } from '../../../src/droid/client.js';
import { prose, script } from '../../../src/testbed/scripted-model.js';
import type { RunningServer } from '../../support/mcp-server.js';
import { waitForNoProcesses } from '../../support/processes.js';
import { makeContext, waitForNoDroids, type E2EContext } from '../../support/e2e-context.js';

interface SessionView {
  session: string;
  title: string | null;
  labels: string[];
  archived: boolean;
  agentState: string;
  latestRun: { run: string; state: string; usage: { inputTokens: number; outputTokens: number } | null };
}
interface Item {
  type: string;
  run: string;
  text?: string;
  tool?: string;
  kind?: string;
}
interface Page {
  items: Item[];
  nextCursor: string | null;
  historyAvailable: boolean;
}
interface Usage {
  turns: number;
  turnsWithUsage: number;
  inputTokens: number;
  outputTokens: number;
  factoryCredits: number | null;
}

const TAG = `e2e-history-${process.pid}-${Date.now()}`;
let ctx: E2EContext;
let server: RunningServer;
/** Every tool output of this file, to check for leaks at the end. */
const outputs: string[] = [];

beforeAll(async () => {
  ctx = await makeContext(TAG);
  server = await ctx.start();
  const call = server.call.bind(server);
  server.call = async (name, args) => {
    const outcome = await call(name, args);
    outputs.push(outcome.text);
    return outcome;
  };
});
afterEach(async () => {
  // Every turn of this file ends before the next test, so no droid may be left.
  await waitForNoDroids(TAG, 15_000);
});
afterAll(async () => {
  await server?.close();
  await waitForNoProcesses(TAG, 15_000);
  await ctx?.cleanup();
});

let keys = 0;
const key = () => `h-${++keys}`;

async function settle(...sessions: string[]): Promise<SessionView[]> {
  for (;;) {
    const waited = await server.ok<{ sessions: SessionView[]; timedOut: boolean }>('droid_wait_for_sessions', { sessions, timeoutSeconds: 30 });
    if (!waited.timedOut) return waited.sessions;
  }
}

async function create(args: Record<string, unknown>): Promise<string> {
  const accepted = await server.ok<{ metadata: { session: string } }>('droid_create_session', { requestKey: key(), replyTo: null, autonomy: 'high', ...args });
  return accepted.metadata.session;
}

async function send(session: string, prompt: string, extra: Record<string, unknown> = {}): Promise<void> {
  await server.ok('droid_send_message', { requestKey: key(), session, prompt, ...extra });
}

async function readAll(session: string, limit: number): Promise<Page['items']> {
  const items: Item[] = [];
  let cursor: string | null = null;
  do {
    const page: Page = await server.ok<Page>('droid_read_session', { session, limit, ...(cursor ? { cursor } : {}) });
    expect(page.items.length).toBeLessThanOrEqual(limit);
    items.push(...page.items);
    cursor = page.nextCursor;
  } while (cursor);
  return items;
}

/** droid's own session id, read from the controller's private state as an operator would. */
function droidSessionId(session: string): string {
  const lines = [
    ...readFileSync(join(ctx.stateDir, 'state.jsonl'), 'utf8').split('\n').filter(Boolean),
    ...(existsSync(join(ctx.stateDir, 'journal.jsonl')) ? readFileSync(join(ctx.stateDir, 'journal.jsonl'), 'utf8').split('\n').filter(Boolean) : []),
  ];
  let id: string | null = null;
  type StoredSession = { id: string; droidSessionId: string | null };
  for (const line of lines) {
    // Snapshot lines hold one record ({"session": …}) after a header counting them ({"sessions": n});
    // journal lines hold lists ({"sessions": […]}).
    const value = JSON.parse(line) as { session?: StoredSession; sessions?: StoredSession[] | number };
    for (const s of Array.isArray(value.sessions) ? value.sessions : value.session ? [value.session] : []) {
      if (s.id === session && s.droidSessionId) id = s.droidSessionId;
    }
  }
  if (!id) throw new Error('no droid session recorded');
  return id;
}

/**
 * Title as droid reports it, tags as droid saved them beside the session
 * (`<home>/.factory/sessions/<cwd slug>/<id>.settings.json`, same in 0.215.0
 * and 0.225.2): 0.215.0 never reports `settings.tags`. Where tags are reported
 * they must agree with the saved ones.
 */
async function factorySession(droidId: string): Promise<{ title?: string; tags: string[] }> {
  const client = DroidClient.spawn({ droidPath: ctx.bed.droidPath, env: ctx.bed.home.env });
  try {
    const loaded = (await client.loadSession(droidId)) as { session?: { title?: string }; settings?: { tags?: Array<{ name: string }> } };
    const tags = savedTags(droidId);
    if (loaded.settings?.tags !== undefined) expect(loaded.settings.tags.map((t) => t.name)).toEqual(tags);
    return { title: loaded.session?.title, tags };
  } finally {
    await client.shutdown();
  }
}

/**
 * A sandboxed turn's droid writes a private copy of its session; the copy
 * comes back to droid's home once the turn's process group is gone, a moment
 * after the turn settled (runner.ts releaseConfinedTurn).
 */
async function copiedBack(droidId: string): Promise<void> {
  await waitForNoDroids(TAG, 15_000);
  const sessions = join(ctx.bed.home.dir, '.factory', 'sessions');
  const end = Date.now() + 15_000;
  while (!(existsSync(sessions) && readdirSync(sessions).some((dir) => existsSync(join(sessions, dir, `${droidId}.settings.json`))))) {
    if (Date.now() > end) throw new Error(`session ${droidId} was not copied back to droid's home`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

function savedTags(droidId: string): string[] {
  const sessions = join(ctx.bed.home.dir, '.factory', 'sessions');
  const files = readdirSync(sessions)
    .map((dir) => join(sessions, dir, `${droidId}.settings.json`))
    .filter((file) => existsSync(file));
  expect(files, `droid's saved settings of session ${droidId}`).toHaveLength(1);
  const saved = JSON.parse(readFileSync(files[0]!, 'utf8')) as { tags?: Array<{ name: string }> };
  return (saved.tags ?? []).map((t) => t.name);
}

describe('droid_read_session', () => {
  it('pages every item exactly once, in order, with no prompt anywhere', async () => {
    const ws = ctx.workspace('read');
    const prompts = ['first-prompt-zq1', 'second-prompt-zq2', 'third-prompt-zq3'];
    const session = await create({
      workspace: ws,
      prompt: `${prompts[0]} ${script({ tool: { name: 'Create', arguments: { file_path: join(ws, 'a.txt'), content: 'A' } } })}`,
    });
    await settle(session);
    await send(session, `${prompts[1]} ${script({ tool: { name: 'Read', arguments: { file_path: join(ws, 'a.txt') } } })}`);
    await settle(session);
    await send(session, `${prompts[2]} ${script({ text: 'all done' })}`);
    await settle(session);

    const whole = await readAll(session, 100);
    expect(whole.filter((i) => i.type === 'tool_call').map((i) => i.tool)).toEqual(['Create', 'Read']);
    expect(whole.at(-1)).toMatchObject({ type: 'assistant_text', text: 'all done' });
    for (const limit of [1, 2, 3]) expect(await readAll(session, limit)).toEqual(whole);
    const first = await server.ok<Page>('droid_read_session', { session });
    expect(first.historyAvailable).toBe(true);
    for (const p of prompts) expect(JSON.stringify(whole)).not.toContain(p);

    const bad = await server.call('droid_read_session', { session, cursor: 'not-a-cursor' });
    expect(bad.structured.error).toMatchObject({ code: 'invalid_cursor' });
  });

  it('a running turn shows only its latest partial text', async () => {
    const ws = ctx.workspace('partial');
    const session = await create({ workspace: ws, autonomy: 'off', prompt: `talk ${script({ text: prose(40, 'streaming'), slowMs: 3_000 })}` });
    // Bounded by time, not by a count of polls: under load (or on droid 0.215.0, slower to start)
    // the stream may begin several seconds in. The first item seen must be the partial text.
    let page: Page | undefined;
    const giveUpAt = Date.now() + 40_000;
    do {
      page = await server.ok<Page>('droid_read_session', { session });
      if (page.items.length > 0) break;
      await new Promise((r) => setTimeout(r, 50));
    } while (Date.now() < giveUpAt);
    expect(page!.items).toEqual([{ type: 'partial_text', run: expect.any(String), text: expect.stringMatching(/^s/) }]);
    await settle(session);
    const done = await readAll(session, 100);
    expect(
      done.map((i) => i.type),
      JSON.stringify(done),
    ).toEqual(['assistant_text']);
  });

  it('shows declined permissions and questions as notices', async () => {
    const ws = ctx.workspace('notices');
    const marker = join(ws, 'nope');
    const session = await create({
      workspace: ws,
      autonomy: 'low',
      prompt: `try ${script({ tool: { name: 'Execute', arguments: { command: `touch ${marker}`, riskLevel: 'high', riskLevelReason: 'x', summary: 'Touch a file' } } })}`,
    });
    const [status] = await settle(session);
    expect(status!.latestRun.state).toBe('succeeded');
    const items = await readAll(session, 10);
    expect(items.some((i) => i.type === 'notice' && i.kind === 'permission_declined')).toBe(true);
    expect(existsSync(marker)).toBe(false);
  });
});

describe('droid_find_sessions and droid_update_session', () => {
  it('filters by text, labels, state, workspace and archive; the cursor survives new sessions', async () => {
    const ws = ctx.workspace('find');
    const sub = ctx.workspace('find/sub');
    const a = await create({ workspace: ws, title: 'Alpha refactor', labels: ['backend', 'team-x'], prompt: `a ${script({ text: 'alpha output' })}` });
    const b = await create({ workspace: sub, title: 'Beta review', labels: ['backend'], prompt: `b ${script({ text: 'beta output' })}` });
    const c = await create({ workspace: ws, title: 'Gamma', prompt: `c ${script({ text: 'gamma unique-preview-word' })}` });
    await settle(a, b, c);
    const find = (args: Record<string, unknown>) => server.ok<{ sessions: SessionView[]; nextCursor: string | null }>('droid_find_sessions', args);
    const ids = async (args: Record<string, unknown>) => (await find(args)).sessions.map((s) => s.session);

    expect(await ids({ query: 'ALPHA' })).toEqual([a]);
    expect(await ids({ query: 'unique-preview-word' })).toEqual([c]);
    expect(await ids({ labels: ['backend'] })).toEqual([b, a]);
    expect(await ids({ labels: ['backend', 'team-x'] })).toEqual([a]);
    expect(await ids({ workspace: sub })).toEqual([b]);
    expect((await ids({ workspace: ws })).slice(0, 3)).toEqual([c, b, a]);
    expect(await ids({ state: 'working', workspace: ws })).toEqual([]);

    // Keyset pagination: a session created between pages never shifts later pages.
    const page1 = await find({ workspace: ws, limit: 2 });
    expect(page1.sessions.map((s) => s.session)).toEqual([c, b]);
    const d = await create({ workspace: ws, title: 'Delta', prompt: `d ${script({ text: 'delta' })}` });
    await settle(d);
    const page2 = await find({ workspace: ws, limit: 2, cursor: page1.nextCursor });
    expect(page2.sessions.map((s) => s.session)[0]).toBe(a);
    const changed = await server.call('droid_find_sessions', { workspace: sub, cursor: page1.nextCursor });
    expect(changed.structured.error).toMatchObject({ code: 'invalid_cursor' });
    const inverted = await server.call('droid_find_sessions', { after: '2026-12-01T00:00:00Z', before: '2026-11-01T00:00:00Z' });
    expect(inverted.structured.error).toMatchObject({ code: 'invalid_arguments' });
    const badDate = await server.call('droid_find_sessions', { after: 'yesterday' });
    expect(badDate.structured.error).toMatchObject({ code: 'invalid_arguments' });

    // Archive hides; archived:true selects archived only; a new message restores.
    const archived = await server.ok<{ status: SessionView }>('droid_update_session', { session: a, archived: true });
    expect(archived.status.archived).toBe(true);
    expect(await ids({ query: 'alpha' })).toEqual([]);
    expect(await ids({ archived: true })).toEqual([a]);
    await send(a, `back ${script({ text: 'restored' })}`);
    await settle(a);
    expect(await ids({ query: 'alpha' })).toEqual([a]);
  });

  it('updates title and labels, rejects bad updates, and never touches work', async () => {
    const ws = ctx.workspace('update');
    const s = await create({ workspace: ws, prompt: `slow ${script({ text: prose(20), slowMs: 2_000 })}` });
    const busy = await server.call('droid_update_session', { session: s, archived: true });
    expect(busy.structured.error).toMatchObject({ code: 'session_busy', retryable: true });
    const empty = await server.call('droid_update_session', { session: s });
    expect(empty.structured.error).toMatchObject({ code: 'invalid_arguments' });
    const conflict = await server.call('droid_update_session', { session: s, labels: { add: ['x'], remove: ['x'] } });
    expect(conflict.structured.error).toMatchObject({ code: 'invalid_arguments' });
    const upper = await server.call('droid_update_session', { session: s, labels: { add: ['Upper'] } });
    expect(upper.structured.error).toMatchObject({ code: 'invalid_arguments' });
    const updated = await server.ok<{ status: SessionView }>('droid_update_session', { session: s, title: 'Renamed', labels: { add: ['one', 'two'] } });
    expect(updated.status).toMatchObject({ title: 'Renamed', labels: ['one', 'two'], agentState: 'working' });
    const [done] = await settle(s);
    expect(done!.latestRun.state).toBe('succeeded');
  });
});

describe('titles and labels in Factory', () => {
  it('creates the droid session with title and tags, and applies a later title after the next turn', async () => {
    const ws = ctx.workspace('factory-title');
    const s = await create({ workspace: ws, title: 'Original title', labels: ['alpha', 'beta'], prompt: `hi ${script({ text: 'ok' })}` });
    await settle(s);
    const droidId = droidSessionId(s);
    await copiedBack(droidId);
    expect(await factorySession(droidId)).toEqual({ title: 'Original title', tags: ['alpha', 'beta'] });
    await server.ok('droid_update_session', { session: s, title: 'Changed title' });
    // The update alone does not start droid.
    expect((await factorySession(droidId)).title).toBe('Original title');
    await send(s, `again ${script({ text: 'ok' })}`);
    await settle(s);
    await copiedBack(droidId);
    expect((await factorySession(droidId)).title).toBe('Changed title');
  });
});

describe('droid_get_usage', () => {
  it('sums the token counts the scripted model reported, counting each turn once', async () => {
    const ws = ctx.workspace('usage');
    const args = {
      requestKey: 'usage-create',
      replyTo: null,
      workspace: ws,
      autonomy: 'high',
      prompt: `u ${script({ tool: { name: 'Create', arguments: { file_path: join(ws, 'u.txt'), content: 'u' } }, usage: { prompt_tokens: 100, completion_tokens: 7 } })}`,
    };
    const before = ctx.bed.model.requests.length;
    const { metadata } = await server.ok<{ metadata: { session: string } }>('droid_create_session', args);
    await settle(metadata.session);
    await send(metadata.session, `v ${script({ text: 'plain', usage: { prompt_tokens: 40, completion_tokens: 3 } })}`);
    await settle(metadata.session);
    // A replay of the first request is not a second turn.
    await server.ok('droid_create_session', args);
    const calls = ctx.bed.model.requests.slice(before).length;
    expect(calls).toBe(3); // tool call + answer, then one plain answer
    const usage = await server.ok<Usage>('droid_get_usage', { session: metadata.session });
    expect(usage).toMatchObject({ turns: 2, turnsWithUsage: 2, inputTokens: 2 * 100 + 40, outputTokens: 2 * 7 + 3, factoryCredits: null });

    const noUsage = await create({ workspace: ws, prompt: `n ${script({ text: 'no usage reported' })}` });
    await settle(noUsage);
    expect(await server.ok<Usage>('droid_get_usage', { session: noUsage })).toMatchObject({ turns: 1, turnsWithUsage: 0, inputTokens: 0 });

    const all = await server.ok<Usage>('droid_get_usage', { after: '2000-01-01T00:00:00Z', before: '2100-01-01T00:00:00Z' });
    expect(all.turns).toBeGreaterThanOrEqual(3);
    const none = await server.ok<Usage>('droid_get_usage', { before: '2000-01-01T00:00:00Z' });
    expect(none.turns).toBe(0);
  });
});

describe('privacy', () => {
  it('no droid session id, fingerprint, prompt, state path or stack trace in any output; no prompt on disk', async () => {
    const marker = `secret-marker-${Date.now()}`;
    const ws = ctx.workspace('privacy');
    const s = await create({ workspace: ws, title: 'Private', prompt: `${marker} ${script({ text: 'nothing echoed' })}` });
    await settle(s);
    await server.call('droid_get_session_status', { session: s });
    await server.call('droid_read_session', { session: s });
    await server.call('droid_find_sessions', { query: 'private' });
    await server.call('droid_get_usage', { session: s });
    await server.call('droid_send_message', { requestKey: key(), session: 'no-such-session', prompt: marker });
    await server.call('droid_create_session', { requestKey: key(), replyTo: null, workspace: '/root', prompt: marker });
    await server.call('droid_read_session', { session: s, cursor: marker });

    const state = readFileSync(join(ctx.stateDir, 'state.jsonl'), 'utf8');
    const fingerprints = [...state.matchAll(/"fingerprint":"([0-9a-f]{64})"/g)].map((m) => m[1]!);
    const journal = existsSync(join(ctx.stateDir, 'journal.jsonl')) ? readFileSync(join(ctx.stateDir, 'journal.jsonl'), 'utf8') : '';
    fingerprints.push(...[...journal.matchAll(/"fingerprint":"([0-9a-f]{64})"/g)].map((m) => m[1]!));
    const droidIds = [...(state + journal).matchAll(/"droidSessionId":"([0-9a-f-]{36})"/g)].map((m) => m[1]!);
    expect(droidIds.length).toBeGreaterThan(0);
    const everything = outputs.join('\n');
    for (const secret of [marker, ctx.stateDir, ...fingerprints, ...droidIds]) expect(everything).not.toContain(secret);
    expect(everything).not.toMatch(/\n\s+at [^\n]+:\d+:\d+/);
    // The prompt appears nowhere under the state directory.
    let found = '';
    try {
      found = execFileSync('grep', ['-rl', '--', marker, ctx.stateDir], { encoding: 'utf8' });
    } catch (err) {
      if ((err as { status?: number }).status !== 1) throw err;
    }
    expect(found).toBe('');
  });
});
