// Proves the test bed itself: scripted model server, BYOK droid home with the
// real CLI, the mock droid peer, and process-leak detection.
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { makeDroidBed, type DroidBed } from './droid-home.js';
import { notification, spawnPeer, type Frame, type FramePeer } from './frame-peer.js';
import { prose, script, type Script } from '../../src/testbed/scripted-model.js';
import { startModelServer, type ModelServer } from '../../src/testbed/model-server.js';
import { pidsWithEnvTag, TAG_VAR, waitForNoProcesses } from './processes.js';

const MOCK = fileURLToPath(new URL('./mock-droid.mjs', import.meta.url));
const EXEC_ARGS = ['exec', '--input-format', 'stream-jsonrpc', '--output-format', 'stream-jsonrpc'];

const temps: string[] = [];
async function tempDir(prefix: string): Promise<string> {
  const d = await mkdtemp(path.join(os.tmpdir(), prefix));
  temps.push(d);
  return d;
}
afterAll(async () => {
  await Promise.all(temps.map((d) => rm(d, { recursive: true, force: true })));
});

// ---- model server over raw HTTP -----------------------------------------

type Chunk = {
  choices: { delta: { content?: string; tool_calls?: { id?: string; function: { name?: string; arguments?: string } }[] }; finish_reason: string | null }[];
  usage?: Record<string, number>;
};

async function chat(ms: ModelServer, messages: unknown[], signal?: AbortSignal) {
  const res = await fetch(`${ms.baseUrl}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'scripted-model', stream: true, messages }),
    signal,
  });
  return res;
}

/** Reads a whole SSE reply into its chunks plus the reassembled text and tool call. */
async function readSse(res: Response) {
  const raw = await res.text();
  const datas = raw
    .split('\n\n')
    .filter((b) => b.startsWith('data: '))
    .map((b) => b.slice(6));
  expect(datas.at(-1)).toBe('[DONE]');
  const chunks = datas.slice(0, -1).map((d) => JSON.parse(d) as Chunk);
  const text = chunks.map((c) => c.choices[0]?.delta.content ?? '').join('');
  const calls = chunks.flatMap((c) => c.choices[0]?.delta.tool_calls ?? []);
  const finish = chunks.map((c) => c.choices[0]?.finish_reason).find((f) => f);
  const usage = chunks.find((c) => c.usage)?.usage;
  return { chunks, text, calls, finish, usage };
}

describe('model server', () => {
  let ms: ModelServer;
  beforeAll(async () => {
    ms = await startModelServer();
  });
  afterAll(async () => {
    await ms.close();
  });
  const user = (s: Script, prefix = 'please ') => ({ role: 'user', content: prefix + script(s) });

  it('streams scripted text, defaults to "ok", and records requests', async () => {
    const n0 = ms.requests.length;
    const a = await readSse(await chat(ms, [{ role: 'system', content: 'sys' }, user({ text: 'hello >> there' })]));
    expect(a.text).toBe('hello >> there');
    expect(a.finish).toBe('stop');
    // no script at all, and a script inside an array of text parts
    expect((await readSse(await chat(ms, [{ role: 'user', content: 'hi' }]))).text).toBe('ok');
    const parts = [
      {
        role: 'user',
        content: [
          { type: 'text', text: 'x' },
          { type: 'text', text: script({ text: 'parts' }) },
        ],
      },
    ];
    expect((await readSse(await chat(ms, parts))).text).toBe('parts');
    // the latest scripted user message wins
    const two = [user({ text: 'old' }), { role: 'assistant', content: 'old' }, user({ text: 'new' })];
    expect((await readSse(await chat(ms, two))).text).toBe('new');
    expect((await readSse(await chat(ms, [{ role: 'user', content: '<<script:{oops>>' }]))).text).toMatch(/unparsable/);
    expect(ms.requests.length - n0).toBe(5);
    expect(ms.requests[n0]).toMatchObject({ path: '/v1/chat/completions', messages: [{ role: 'system' }, { role: 'user' }] });
  });

  it('calls a tool once, then answers with the tool result', async () => {
    const s: Script = { tool: { name: 'Create', arguments: { file_path: '/tmp/x', content: 'y' } } };
    const first = await readSse(await chat(ms, [user(s)]));
    expect(first.finish).toBe('tool_calls');
    expect(first.calls[0]?.id).toMatch(/^call_\d+$/);
    expect(first.calls[0]?.function.name).toBe('Create');
    expect(JSON.parse(first.calls.map((c) => c.function.arguments ?? '').join(''))).toEqual({ file_path: '/tmp/x', content: 'y' });
    const second = await readSse(
      await chat(ms, [user(s), { role: 'assistant', content: null, tool_calls: [] }, { role: 'tool', tool_call_id: first.calls[0]?.id, content: 'made it' }]),
    );
    expect(second.text).toBe('tool said: made it');
    expect(second.finish).toBe('stop');
    const again = await readSse(await chat(ms, [user(s)]));
    expect(again.calls[0]?.id).not.toBe(first.calls[0]?.id);
  });

  it('spreads slow replies and stops writing when the client hangs up', async () => {
    const t0 = Date.now();
    const slow = await readSse(await chat(ms, [user({ text: 'abcdefghij', slowMs: 500 })]));
    expect(Date.now() - t0).toBeGreaterThanOrEqual(450);
    expect(slow.text).toBe('abcdefghij');
    expect(slow.chunks.filter((c) => c.choices[0]?.delta.content).length).toBeGreaterThanOrEqual(9);

    const ac = new AbortController();
    const res = await chat(ms, [user({ text: 'x'.repeat(100), slowMs: 10_000 })], ac.signal);
    const record = ms.requests.at(-1)!;
    const reader = res.body!.getReader();
    await reader.read(); // first chunk is there: streaming has started
    ac.abort();
    await expect(reader.read()).rejects.toThrow();
    await expect.poll(() => record.disconnected, { timeout: 2_000 }).toBe(true);
  });

  it('fails with scripted HTTP statuses and an OpenAI-style error body', async () => {
    for (const status of [401, 500] as const) {
      const res = await chat(ms, [user({ status })]);
      expect(res.status).toBe(status);
      const body = (await res.json()) as { error: { message: string; type: string } };
      expect(body.error.message).toMatch(/scripted/);
      expect(typeof body.error.type).toBe('string');
    }
  });

  it('reports usage in a final chunk on every response of the script', async () => {
    const usage = { prompt_tokens: 11, completion_tokens: 3 };
    const a = await readSse(await chat(ms, [user({ text: 'u', usage })]));
    expect(a.usage).toEqual({ ...usage, total_tokens: 14 });
    expect(a.chunks.at(-1)?.usage).toBeDefined();
    expect(a.chunks.at(-1)?.choices).toEqual([]);
    const t = await readSse(await chat(ms, [user({ tool: { name: 'LS', arguments: {} }, usage })]));
    expect(t.usage).toEqual({ ...usage, total_tokens: 14 });
    expect((await readSse(await chat(ms, [user({ text: 'none' })]))).usage).toBeUndefined();
  });

  it('lists a model, 404s other paths and bounds request bodies', async () => {
    const models = (await (await fetch(`${ms.baseUrl}/models`)).json()) as { data: { id: string }[] };
    expect(models.data[0]?.id).toBeTypeOf('string');
    expect((await fetch(`${ms.baseUrl}/completions`, { method: 'POST', body: '{}' })).status).toBe(404);
    expect((await fetch(`${ms.baseUrl.replace('/v1', '')}/`)).status).toBe(404);
    const big = JSON.stringify({ messages: [{ role: 'user', content: 'x'.repeat(11 * 1024 * 1024) }] });
    expect((await fetch(`${ms.baseUrl}/chat/completions`, { method: 'POST', body: big })).status).toBe(413);
  });
});

// ---- the real droid CLI with a BYOK scripted model ------------------------

function lastAssistantText(frames: Frame[], from = 0): string | undefined {
  const msgs = frames
    .slice(from)
    .map(notification)
    .filter((n) => n?.type === 'create_message')
    .map((n) => n!.message as { role: string; content: { type: string; text?: string }[] })
    .filter((m) => m.role === 'assistant');
  return msgs
    .at(-1)
    ?.content.filter((c) => c.type === 'text')
    .map((c) => c.text)
    .join('');
}

const turnDone = (turnId: string) => (f: Frame) => {
  const n = notification(f);
  return n?.type === 'agent_turn_completed' && n.turnId === turnId;
};

describe('real droid with the scripted model', () => {
  let bed: DroidBed;
  const tag = `support-${randomUUID()}`;
  beforeAll(async () => {
    bed = await makeDroidBed();
  });
  afterAll(async () => {
    await bed?.cleanup();
  });

  it('reads the BYOK model id from the catalog', () => {
    expect(bed.modelId).toMatch(/^custom:Scripted-Model-\d+$/);
    expect(existsSync(path.join(bed.home.dir, '.factory', 'settings.json'))).toBe(true);
    expect(bed.home.env.HOME).toBe(bed.home.dir);
    expect(bed.home.env.FACTORY_HOME_OVERRIDE).toBe(bed.home.dir);
  });

  it('runs a Create turn end-to-end and passes scripted usage into tokenUsage', async () => {
    const ws = await tempDir('droid-ws-');
    const peer = spawnPeer(bed.droidPath, EXEC_ARGS, { env: { ...bed.home.env, [TAG_VAR]: tag }, cwd: ws });
    try {
      const init = await peer.request('droid.initialize_session', {
        machineId: 'support-test',
        cwd: ws,
        modelId: bed.modelId,
        autonomyLevel: 'high',
        interactionMode: 'auto',
      });
      expect(init.error).toBeUndefined();
      const target = path.join(ws, 'hello.txt');
      const usage = { prompt_tokens: 100, completion_tokens: 7 };
      const prompt = `create it ${script({ tool: { name: 'Create', arguments: { file_path: target, content: 'hi there\n' } }, usage })}`;
      const ack = await peer.request('droid.add_user_message', { text: prompt, messageId: 'turn-1' });
      expect(ack.result).toEqual({});
      const done = notification(await peer.waitFor(turnDone('turn-1'), 45_000))!;

      expect(done.reason).toBe('completed');
      expect(readFileSync(target, 'utf8')).toBe('hi there\n');
      // Two model calls (tool call, then answer), each reporting the scripted usage.
      // (droid's own session-title request is recorded apart, in titleRequests.)
      const calls = bed.model.requests.filter((r) => r.path === '/v1/chat/completions');
      expect(calls).toHaveLength(2);
      const toolMsg = calls[1]!.messages.find((m) => m.role === 'tool');
      expect(lastAssistantText(peer.frames)).toBe(`tool said: ${String(toolMsg?.content)}`);
      expect(done.tokenUsage).toMatchObject({ inputTokens: 200, outputTokens: 14 });

      // What droid offers the model (0.225.2): Create {file_path, content} both required;
      // Execute {command, summary, riskLevel, riskLevelReason required; timeout, fireAndForget};
      // AskUser {questionnaire required; workstreamProposal}.
      const tools = (calls[0]!.body as { tools: { function: { name: string; parameters: { properties: object; required: string[] } } }[] }).tools;
      const schema = (name: string) => tools.find((t) => t.function.name === name)?.function.parameters;
      expect(Object.keys(schema('Create')!.properties).sort()).toEqual(['content', 'file_path']);
      expect(schema('Execute')!.required.sort()).toEqual(['command', 'riskLevel', 'riskLevelReason', 'summary']);
      expect(schema('AskUser')!.required).toEqual(['questionnaire']);
      expect((calls[0]!.body as { stream?: boolean }).stream).toBe(true);

      await peer.request('droid.close_session', {});
    } finally {
      peer.child.kill('SIGKILL');
      await peer.exited;
    }
    await waitForNoProcesses(tag, 5_000);
  });

  it('interrupting a slow scripted reply ends the turn cancelled and drops the HTTP stream', async () => {
    const ws = await tempDir('droid-ws-');
    const peer = spawnPeer(bed.droidPath, EXEC_ARGS, { env: { ...bed.home.env, [TAG_VAR]: tag }, cwd: ws });
    try {
      await peer.request('droid.initialize_session', {
        machineId: 'support-test',
        cwd: ws,
        modelId: bed.modelId,
        autonomyLevel: 'high',
        interactionMode: 'auto',
      });
      const n0 = bed.model.requests.length;
      await peer.request('droid.add_user_message', { text: script({ text: prose(100, 'tick'), slowMs: 20_000 }), messageId: 'slow-1' });
      await peer.waitFor((f) => notification(f)?.type === 'assistant_text_delta', 20_000);
      await peer.request('droid.interrupt_session', {});
      const done = notification(await peer.waitFor(turnDone('slow-1'), 10_000))!;
      expect(done.reason).toBe('cancelled');
      const turnCall = () => bed.model.requests.slice(n0)[0];
      await expect.poll(() => turnCall()?.disconnected, { timeout: 5_000 }).toBe(true);
    } finally {
      peer.child.kill('SIGKILL');
      await peer.exited;
    }
    await waitForNoProcesses(tag, 5_000);
  });
});

// ---- mock droid ----------------------------------------------------------

describe('mock droid', () => {
  const tag = `mock-${randomUUID()}`;
  const peers: FramePeer[] = [];
  afterEach(async () => {
    for (const p of peers.splice(0)) {
      p.child.kill('SIGKILL');
      await p.exited;
    }
    await waitForNoProcesses(tag, 5_000);
  });

  async function startMock(env: Record<string, string> = {}): Promise<FramePeer> {
    const cwd = await tempDir('mock-ws-');
    const peer = spawnPeer(MOCK, EXEC_ARGS, { env: { ...(process.env as Record<string, string>), [TAG_VAR]: tag, ...env }, cwd });
    peers.push(peer);
    return peer;
  }
  async function session(env: Record<string, string> = {}) {
    const peer = await startMock(env);
    const init = await peer.request('droid.initialize_session', {
      machineId: 'm',
      cwd: '/work/somewhere',
      modelId: 'mock-model',
      autonomyLevel: 'low',
      interactionMode: 'auto',
    });
    return { peer, sessionId: (init.result as { sessionId: string }).sessionId, init };
  }
  async function turn(peer: FramePeer, text: string, messageId = `m-${randomUUID()}`) {
    const from = peer.frames.length;
    await peer.request('droid.add_user_message', { text, messageId });
    return { messageId, from };
  }

  it('prints its version', async () => {
    const out = await new Promise<string>((resolve) => {
      const c = spawn(MOCK, ['--version']);
      let s = '';
      c.stdout.on('data', (d: Buffer) => (s += d.toString()));
      c.on('close', () => resolve(s.trim()));
    });
    expect(out).toBe('0.225.2-mock');
  });

  it('is as strict about framing as the real CLI', async () => {
    const peer = await startMock();
    const errorFor = async (line: Record<string, unknown> | string) => {
      const from = peer.frames.length;
      peer.send(line);
      return peer.waitFor((f) => f.type === 'response' && 'error' in f, 5_000, from);
    };
    const noType = await errorFor({ id: 'a', method: 'droid.list_models', params: {} });
    expect(noType).toMatchObject({ id: null, error: { code: -32700, message: 'Invalid JSON-RPC message' } });
    const numericId = await errorFor({ type: 'request', id: 7, method: 'droid.list_models', params: {} });
    expect(numericId).toMatchObject({ id: null, error: { code: -32700, message: 'Invalid JSON-RPC message' } });
    // The real CLI words unparsable lines differently; same code, same null id.
    expect(await errorFor('garbage{{')).toMatchObject({ id: null, error: { code: -32700, message: 'Invalid JSON' } });
    const unknown = await errorFor({ type: 'request', id: 'u1', method: 'droid.nope', params: {} });
    expect(unknown).toMatchObject({ id: 'u1', error: { code: -32601, message: 'Unknown method: droid.nope' } });
    const badParams = await peer.request('droid.initialize_session', {});
    expect(badParams.error?.code).toBe(-32602);
    for (const f of peer.frames) expect(f).toMatchObject({ jsonrpc: '2.0', factoryApiVersion: '1.0.0', factoryProtocolVersion: '1.220.0' });
    const models = await peer.request('droid.list_models', {});
    expect((models.result as { models: unknown[] }).models.length).toBeGreaterThan(0);
  });

  it('runs a normal turn like the real CLI and persists the session', async () => {
    const state = await tempDir('mock-state-');
    const { peer, sessionId, init } = await session({ MOCK_DROID_STATE_DIR: state });
    expect(init.result).toMatchObject({ session: { messages: [] }, settings: { modelId: 'mock-model', autonomyLevel: 'low', interactionMode: 'auto' } });
    const { messageId, from } = await turn(peer, 'hello mock');
    const done = notification(await peer.waitFor(turnDone(messageId), 5_000, from))!;
    expect(done).toMatchObject({
      reason: 'completed',
      tokenUsage: { inputTokens: 10, outputTokens: 5, cacheCreationTokens: 0, cacheReadTokens: 0, thinkingTokens: 0, factoryCredits: 0 },
    });
    const echo = peer.frames
      .slice(from)
      .map(notification)
      .find((n) => n?.type === 'create_message');
    expect(echo?.message).toMatchObject({ id: messageId, role: 'user', content: [{ type: 'text', text: 'hello mock' }] });
    expect(peer.frames.slice(from).some((f) => notification(f)?.type === 'assistant_text_delta')).toBe(true);
    expect(lastAssistantText(peer.frames, from)).toBe('mock: hello mock');
    expect(await peer.request('droid.update_session_settings', { autonomyLevel: 'high' })).toMatchObject({ result: {} });
    expect(await peer.request('droid.close_session', {})).toMatchObject({ result: {} });

    const other = await startMock({ MOCK_DROID_STATE_DIR: state });
    const loaded = await other.request('droid.load_session', { sessionId });
    expect(loaded.result).toMatchObject({ cwd: '/work/somewhere', settings: { autonomyLevel: 'high' } });
    expect((loaded.result as { session: { messages: unknown[] } }).session.messages).toHaveLength(2);
    const missing = await other.request('droid.load_session', { sessionId: 'nope' });
    expect(missing.error).toEqual({ code: -32004, message: 'Session not found' });
    const stateless = await startMock();
    expect((await stateless.request('droid.load_session', { sessionId })).error?.code).toBe(-32004);
  });

  it('delays initialize_session on request', async () => {
    const t0 = Date.now();
    await session({ MOCK_DROID_INIT_DELAY_MS: '400' });
    expect(Date.now() - t0).toBeGreaterThanOrEqual(400);
  });

  it('crash: progress and a tool_call, then exit 1 without completing', async () => {
    const { peer } = await session();
    const { messageId, from } = await turn(peer, 'go <<mock:crash>>');
    const exit = await peer.exited;
    expect(exit.code).toBe(1);
    const after = peer.frames.slice(from).map(notification);
    expect(after.some((n) => n?.type === 'tool_call')).toBe(true);
    expect(after.some((n) => n?.type === 'agent_turn_completed')).toBe(false);
    expect(messageId).toBeTruthy();
  });

  it('malformed: junk lines on stdout, then a normal completion', async () => {
    const { peer } = await session();
    const { messageId, from } = await turn(peer, '<<mock:malformed>>');
    await peer.waitFor(turnDone(messageId), 5_000, from);
    expect(peer.junk).toContain('garbage{{');
    expect(peer.frames.some((f) => f.type === undefined)).toBe(true);
  });

  it('wrong-turn: completes with another turn id', async () => {
    const { peer } = await session();
    const { messageId, from } = await turn(peer, '<<mock:wrong-turn>>');
    const done = notification(await peer.waitFor((f) => notification(f)?.type === 'agent_turn_completed', 5_000, from))!;
    expect(done.turnId).not.toBe(messageId);
  });

  it('silence: never completes, ignores interrupts, stays alive', async () => {
    const { peer } = await session();
    const { from } = await turn(peer, '<<mock:silence>>');
    await peer.request('droid.interrupt_session', {});
    await new Promise((r) => setTimeout(r, 300));
    expect(peer.frames.slice(from).some((f) => notification(f)?.type === 'agent_turn_completed')).toBe(false);
    peer.child.stdin.end(); // a hung CLI does not leave on EOF either
    await new Promise((r) => setTimeout(r, 300));
    expect(peer.child.exitCode).toBeNull();
    expect(pidsWithEnvTag(tag)).toContain(peer.child.pid);
  });

  it('exits 0 on EOF when idle', async () => {
    const { peer } = await session();
    peer.child.stdin.end();
    expect(await peer.exited).toEqual({ code: 0, signal: null });
  });

  async function answeredPermission(marker: string, answer: string) {
    const log = path.join(await tempDir('mock-log-'), 'log.jsonl');
    const { peer } = await session({ MOCK_DROID_LOG: log });
    const { messageId, from } = await turn(peer, marker);
    const req = await peer.waitFor((f) => f.type === 'request' && f.method === 'droid.request_permission', 5_000, from);
    peer.send({ type: 'response', id: req.id, result: { selectedOption: answer } });
    await peer.waitFor(turnDone(messageId), 5_000, from);
    const result = peer.frames
      .slice(from)
      .map(notification)
      .find((n) => n?.type === 'tool_result')!;
    const logged = readFileSync(log, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Frame);
    return { req, result, logged };
  }

  it('permission: proceed_once runs the tool, cancel declines it, and the answer is logged', async () => {
    const once = await answeredPermission('<<mock:permission>>', 'proceed_once');
    const opts = (once.req.params as { options: { value: string }[] }).options.map((o) => o.value);
    expect(opts).toEqual(['proceed_once', 'proceed_always', 'cancel']);
    expect(once.req.params).toMatchObject({ toolUses: [{ confirmationType: 'exec', toolUse: { name: 'Execute' } }] });
    expect(once.result.isError).toBe(false);
    expect(once.logged).toContainEqual(expect.objectContaining({ type: 'response', id: once.req.id, result: { selectedOption: 'proceed_once' } }));
    const no = await answeredPermission('<<mock:permission>>', 'cancel');
    expect(no.result).toMatchObject({ isError: true, content: 'Tool execution cancelled by user' });
  });

  it('permission-no-once: offers only proceed_always and cancel', async () => {
    const r = await answeredPermission('<<mock:permission-no-once>>', 'cancel');
    expect((r.req.params as { options: { value: string }[] }).options.map((o) => o.value)).toEqual(['proceed_always', 'cancel']);
    expect(r.result.isError).toBe(true);
  });

  it('ask: sends droid.ask_user and completes after a decline', async () => {
    const { peer } = await session();
    const { messageId, from } = await turn(peer, '<<mock:ask>>');
    const req = await peer.waitFor((f) => f.method === 'droid.ask_user', 5_000, from);
    expect(req.params).toMatchObject({ questions: [{ index: 1, topic: 'Deploy', options: ['yes', 'no'] }] });
    peer.send({ type: 'response', id: req.id, result: { cancelled: true } });
    const done = notification(await peer.waitFor(turnDone(messageId), 5_000, from))!;
    expect(done.reason).toBe('completed');
    expect(
      peer.frames
        .slice(from)
        .map(notification)
        .find((n) => n?.type === 'tool_result'),
    ).toMatchObject({ isError: true, content: 'Error: AskUser cancelled' });
  });

  it('unknown-request: sends a future method, logs the answer, completes', async () => {
    const log = path.join(await tempDir('mock-log-'), 'log.jsonl');
    const { peer } = await session({ MOCK_DROID_LOG: log });
    const { messageId, from } = await turn(peer, '<<mock:unknown-request>>');
    const req = await peer.waitFor((f) => f.method === 'droid.some_future_method', 5_000, from);
    peer.send({ type: 'response', id: req.id, error: { code: -32601, message: 'Unknown method: droid.some_future_method' } });
    await peer.waitFor(turnDone(messageId), 5_000, from);
    expect(readFileSync(log, 'utf8')).toContain('"Unknown method: droid.some_future_method"');
  });

  it('slow: streams deltas until interrupted, then completes cancelled', async () => {
    const { peer } = await session();
    const { messageId, from } = await turn(peer, '<<mock:slow>>');
    await peer.waitFor((f) => notification(f)?.textDelta === 'tick2 ', 5_000, from);
    await peer.request('droid.interrupt_session', {});
    const done = notification(await peer.waitFor(turnDone(messageId), 5_000, from))!;
    expect(done.reason).toBe('cancelled');
  });

  it('answers add_user_message without a session twice, like the real CLI', async () => {
    const peer = await startMock();
    peer.send({ type: 'request', id: 'nosess', method: 'droid.add_user_message', params: { text: 'x', messageId: 'y' } });
    const err = await peer.waitFor((f) => f.id === 'nosess' && 'error' in f, 5_000);
    expect(err.error?.code).toBe(-32603);
    expect(peer.frames.filter((f) => f.id === 'nosess')).toHaveLength(2);
  });
});

// ---- process leak detection ---------------------------------------------

describe('process helpers', () => {
  it('find a tagged child and see it gone after kill', async () => {
    const tag = `proc-${randomUUID()}`;
    const child = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { env: { ...process.env, [TAG_VAR]: tag }, stdio: 'ignore' });
    await new Promise((r) => child.once('spawn', r));
    expect(pidsWithEnvTag(tag)).toEqual([child.pid]);
    expect(pidsWithEnvTag(`${tag}-other`)).toEqual([]);
    await expect(waitForNoProcesses(tag, 200)).rejects.toThrow(String(child.pid));
    child.kill('SIGKILL');
    await waitForNoProcesses(tag, 5_000);
  });
});
