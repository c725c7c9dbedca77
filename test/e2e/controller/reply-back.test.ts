/**
 * Reply-back end to end: the built server, the real droid CLI with the
 * scripted model, and a fake Amp MCP server (MCP SDK, 127.0.0.1) that logs
 * every call, so each test proves what reached "Amp" and what never did.
 */
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync, mkdirSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { replyHandleFor, startFakeAmp, UNKNOWN_TOOL, type FakeAmp } from '../../support/fake-amp.js';
import { messageText, prose, script, type Script } from '../../../src/testbed/scripted-model.js';
import type { RunningServer } from '../../support/mcp-server.js';
import { waitForNoProcesses } from '../../support/processes.js';
import { makeContext, type E2EContext } from '../../support/e2e-context.js';

interface SessionView {
  session: string;
  replyTo: string | null;
  agentState: string;
  needsAttention: boolean;
  notification: string;
  notificationError: { code: string; message: string } | null;
  preview: string;
  latestRun: {
    run: string;
    state: string;
    autonomy: string;
    error: { code: string; message: string } | null;
    permissionsDeclined: Array<{ tool: string; summary: string }>;
  };
}
interface Acceptance {
  metadata: { session: string; run: string };
  status: SessionView;
}
interface HistoryItem {
  type: string;
  tool?: string;
  input?: string;
  isError?: boolean;
  result?: string | null;
}

const A = 'T-aaaaaaaa-0000-4000-8000-00000000000a';
const B = 'T-bbbbbbbb-0000-4000-8000-00000000000b';
const C = 'T-cccccccc-0000-4000-8000-00000000000c';
const PUCK = 'amp-puck___puck';

let ctx: E2EContext;
let amp: FakeAmp;
let server: RunningServer | undefined;
const extraAmps: FakeAmp[] = [];
const TAG = `e2e-reply-${process.pid}-${Date.now()}`;
// Several real droid turns per test (four, and a restart, for handles): measured up to ~45 s on a loaded 2-core machine.
vi.setConfig({ testTimeout: 150_000 });

beforeAll(async () => {
  ctx = await makeContext(TAG);
  amp = await startFakeAmp();
});
afterEach(async () => {
  await server?.close();
  server = undefined;
  await waitForNoProcesses(TAG, 15_000);
  amp.setMode('ok');
});
afterAll(async () => {
  await amp?.close();
  for (const extra of extraAmps) await extra.close();
  await ctx?.cleanup();
});

let keys = 0;
const key = () => `reply-${++keys}`;
const sendTo = (conversationID: string, message: string) => ({ name: PUCK, arguments: { action: 'send', params: { conversationID, message } } });
const readReply = (replyHandle: string) => ({ name: PUCK, arguments: { action: 'read_reply', params: { replyHandle } } });
const steps = (...s: NonNullable<Script['steps']>) => script({ steps: s });
/** The handle the fake Amp will give the next send to `conversation`. */
const nextHandle = (conversation: string) => replyHandleFor(conversation, (amp.handles.get(conversation)?.length ?? 0) + 1);

function start(url = amp.url, extra: Record<string, unknown> = {}): Promise<RunningServer> {
  return ctx.start({ ampMcp: { url }, ...extra });
}

async function create(s: RunningServer, args: Record<string, unknown>): Promise<Acceptance> {
  return s.ok<Acceptance>('droid_create_session', { requestKey: key(), ...args });
}

async function follow(s: RunningServer, session: string, prompt: string, extra: Record<string, unknown> = {}): Promise<Acceptance> {
  return s.ok<Acceptance>('droid_send_message', { requestKey: key(), session, prompt, ...extra });
}

async function settle(s: RunningServer, ...sessions: string[]): Promise<SessionView[]> {
  for (;;) {
    const waited = await s.ok<{ sessions: SessionView[]; timedOut: boolean }>('droid_wait_for_sessions', { sessions, timeoutSeconds: 30 });
    if (!waited.timedOut) return waited.sessions;
  }
}

async function history(s: RunningServer, session: string): Promise<HistoryItem[]> {
  return (await s.ok<{ items: HistoryItem[] }>('droid_read_session', { session, limit: 100 })).items;
}

/** Model requests (title requests apart) whose conversation contains `marker`. */
const requestsWith = (marker: string) => ctx.bed.model.requests.filter((r) => r.messages.some((m) => messageText(m).includes(marker)));

/** Every file of the state directory, as one string: what the controller stored. */
function storedState(): string {
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) walk(path);
      else out.push(readFileSync(path, 'utf8'));
    }
  };
  walk(ctx.stateDir);
  return out.join('\n');
}

describe('configuration and input', () => {
  it('without ampMcp: replyBack false and routed creates refused; a malformed replyTo is refused anyway', async () => {
    server = await ctx.start();
    const listed = await server.ok<{ policy: { replyBack: boolean } }>('droid_list_workspaces');
    expect(listed.policy.replyBack).toBe(false);
    const refused = await server.call('droid_create_session', { requestKey: key(), workspace: ctx.root, prompt: 'p', replyTo: A });
    expect(refused.structured.error).toMatchObject({ code: 'reply_back_unavailable', action: expect.stringContaining('replyTo: null') });
    for (const replyTo of ['T-1', A.toUpperCase(), `${A}?threadID=x`, '']) {
      const bad = await server.call('droid_create_session', { requestKey: key(), workspace: ctx.root, prompt: 'p', replyTo });
      expect(bad.structured.error, replyTo).toMatchObject({ code: 'invalid_arguments' });
    }
    const missing = await server.call('droid_create_session', { requestKey: key(), workspace: ctx.root, prompt: 'p' });
    expect(missing.structured.error).toMatchObject({ code: 'invalid_arguments' });
  });
});

describe('reporting back', () => {
  it('a routed report is accepted: Amp sees exactly one send, to the session’s conversation, and history shows it', async () => {
    server = await start();
    const listed = await server.ok<{ policy: { replyBack: boolean } }>('droid_list_workspaces');
    expect(listed.policy.replyBack).toBe(true);
    const ws = ctx.workspace('report');
    const sendsBefore = amp.sends().length;
    const a = await create(server, { workspace: ws, replyTo: A, autonomy: 'low', prompt: `report-marker-1 ${steps(sendTo(A, 'progress: done with step 1'))}` });
    expect(a.status).toMatchObject({ replyTo: A, notification: 'pending' });
    const [done] = await settle(server, a.metadata.session);
    expect(done).toMatchObject({
      notification: 'accepted',
      notificationError: null,
      needsAttention: false,
      latestRun: { state: 'succeeded', autonomy: 'low' },
    });
    const sends = amp.sends().slice(sendsBefore);
    expect(sends).toHaveLength(1);
    expect(sends[0]!.arguments).toEqual({ action: 'send', params: { conversationID: A, message: 'progress: done with step 1' } });
    // droid_read_session shows the send as a tool item, with its result.
    const items = await history(server, a.metadata.session);
    const send = items.find((i) => i.type === 'tool_call' && i.tool === PUCK)!;
    expect(send).toMatchObject({ isError: false });
    expect(send.input).toContain(A);
    expect(send.result).toContain(replyHandleFor(A, 1));
    // The model was told whom to report to, with the controller's handles; none of that is stored.
    const told = messageText(requestsWith('report-marker-1')[0]!.messages.find((m) => messageText(m).includes('report-marker-1'))!);
    for (const part of [A, a.metadata.session, a.metadata.run, 'CHECKPOINT', 'read_reply']) expect(told).toContain(part);
    expect(storedState()).not.toContain('CHECKPOINT');
    expect(storedState()).not.toContain('report-marker-1');
  });

  it('a Spec-mode (autonomy off) routed turn can report: puck asks there too, and the gate approves it', async () => {
    server = await start();
    const ws = ctx.workspace('spec');
    const before = amp.sends().length;
    const long = `CHECKPOINT Q1: which table? ${prose(1_500, 'evidence')}`;
    const a = await create(server, { workspace: ws, replyTo: B, autonomy: 'off', prompt: `spec report ${steps(sendTo(B, long))}` });
    const [done] = await settle(server, a.metadata.session);
    expect(done).toMatchObject({ notification: 'accepted', latestRun: { state: 'succeeded', autonomy: 'off' } });
    expect(
      amp
        .sends()
        .slice(before)
        .map((c) => c.arguments.params),
    ).toEqual([{ conversationID: B, message: long }]);
    // History shows the send with its message text bounded.
    const send = (await history(server, a.metadata.session)).find((i) => i.tool === PUCK)!;
    expect(long.length).toBeGreaterThan(10_000);
    expect(send.input!.length).toBeLessThanOrEqual(4_000 + '…[+99999 chars]'.length);
    expect(send.input).toMatch(/CHECKPOINT Q1.*…\[\+\d+ chars\]$/s);
  });

  it('a misroute at caller autonomy high is denied before it reaches Amp, and never fails the run', async () => {
    server = await start();
    const ws = ctx.workspace('misroute');
    const before = amp.calls.length;
    const a = await create(server, { workspace: ws, replyTo: A, autonomy: 'high', prompt: `misroute ${steps(sendTo(B, 'psst'))}` });
    const [done] = await settle(server, a.metadata.session);
    expect(amp.calls.length).toBe(before);
    expect(done).toMatchObject({
      notification: 'failed',
      notificationError: { code: 'reply_misrouted' },
      needsAttention: true,
      latestRun: { state: 'succeeded', autonomy: 'high' },
    });
    expect(done!.latestRun.permissionsDeclined.map((p) => p.tool)).toEqual([PUCK]);
  });

  it('admin, thread and unknown Amp tools never reach Amp, even when the model calls them directly without ToolSearch', async () => {
    server = await start(amp.url, { maxConcurrentRuns: 4 });
    const before = amp.calls.length;
    const tools = ['manage_amp', 'find_thread', 'read_thread', UNKNOWN_TOOL];
    // One session per tool: droid asks before running even a disabled tool at medium, and a declined call ends the turn.
    const sessions = await Promise.all(
      tools.map((t) =>
        create(server!, {
          workspace: ctx.workspace(`admin-${t}`),
          replyTo: A,
          autonomy: 'high',
          prompt: `admin ${steps(
            { name: 'ToolSearch', arguments: { query: `select:amp-puck___${t}` } },
            { name: `amp-puck___${t}`, arguments: { command: 'list members', query: 'secret', threadID: B } },
          )}`,
        }),
      ),
    );
    const done = await settle(server, ...sessions.map((s) => s.metadata.session));
    expect(amp.calls.slice(before)).toEqual([]);
    for (const [i, t] of tools.entries()) {
      const items = await history(server, sessions[i]!.metadata.session);
      // ToolSearch (droid 0.225.2 defers MCP tools behind it; 0.215.0 has none, and records no item) does not
      // find a disabled tool. What the test names holds on both: calling the tool anyway never reaches Amp.
      const search = items.find((item) => item.tool === 'ToolSearch');
      if (search) expect(search.result, t).toContain('not found');
      expect(
        items.find((item) => item.tool === `amp-puck___${t}`),
        t,
      ).toMatchObject({ isError: true });
      expect(done[i]!.latestRun.state, t).toBe('succeeded');
    }
  });

  it('read_reply with the handle of the session’s own send runs; a foreign handle is denied before Amp', async () => {
    server = await start();
    // Another session, to conversation C, gets a real handle from Amp first.
    const other = await create(server, { workspace: ctx.workspace('foreign-owner'), replyTo: C, autonomy: 'low', prompt: `owner ${steps(sendTo(C, 'mine'))}` });
    await settle(server, other.metadata.session);
    const foreign = amp.handles.get(C)!.at(-1)!;
    const own = nextHandle(B);
    const before = amp.calls.length;
    const ws = ctx.workspace('reads');
    const a = await create(server, {
      workspace: ws,
      replyTo: B,
      autonomy: 'low',
      prompt: `reads ${steps(sendTo(B, 'CHECKPOINT Q1: proceed?'), readReply(own), readReply(foreign))}`,
    });
    const [done] = await settle(server, a.metadata.session);
    const calls = amp.calls.slice(before).map((c) => c.arguments);
    expect(calls).toEqual([
      { action: 'send', params: { conversationID: B, message: 'CHECKPOINT Q1: proceed?' } },
      { action: 'read_reply', params: { replyHandle: own } },
    ]);
    expect(done!.notification).toBe('accepted');
    expect(done!.latestRun.permissionsDeclined).toHaveLength(1);
    expect(done!.latestRun.permissionsDeclined[0]!.summary).toContain(foreign);
  });

  it('handles survive a follow-up and a controller restart, and die with a retarget', async () => {
    server = await start();
    const ws = ctx.workspace('handles');
    const before = amp.calls.length;
    const handle = nextHandle(A);
    const a = await create(server, { workspace: ws, replyTo: A, autonomy: 'low', prompt: `first ${steps(sendTo(A, 'CHECKPOINT Q7: merge?'))}` });
    await settle(server, a.metadata.session);
    const session = a.metadata.session;
    await follow(server, session, `follow-up ${steps(readReply(handle))}`);
    await settle(server, session);
    await server.close();
    server = await start();
    await follow(server, session, `after restart ${steps(readReply(handle))}`);
    const [restarted] = await settle(server, session);
    expect(restarted!.latestRun.permissionsDeclined).toEqual([]);
    const retarget = await follow(server, session, `after retarget ${steps(readReply(handle))}`, { replyTo: B });
    expect(retarget.status.replyTo).toBe(B);
    const [retargeted] = await settle(server, session);
    const reads = amp.calls.slice(before).filter((c) => c.arguments.action === 'read_reply');
    // Read in the follow-up and after the restart; not after the retarget.
    expect(reads).toHaveLength(2);
    expect(retargeted!.latestRun.permissionsDeclined.map((p) => p.tool)).toEqual([PUCK]);
  });

  it('concurrent routed sessions to different conversations never cross', async () => {
    server = await start(amp.url, { maxConcurrentRuns: 3 });
    const before = amp.calls.length;
    const pairs: Array<[string, string]> = [
      [A, B],
      [B, C],
      [C, A],
    ];
    const sessions = await Promise.all(
      pairs.map(([own, other], i) =>
        create(server!, {
          workspace: ctx.workspace(`cross-${i}`),
          replyTo: own,
          autonomy: 'high',
          prompt: `cross ${i} ${steps(sendTo(own, `from session ${i}`), sendTo(other, `from session ${i}, crossing`))}`,
        }),
      ),
    );
    const done = await settle(server, ...sessions.map((s) => s.metadata.session));
    const sends = amp.calls.slice(before).map((c) => c.arguments.params as { conversationID: string; message: string });
    expect(sends).toHaveLength(3);
    for (const [i, [own]] of pairs.entries()) {
      expect(sends.filter((s) => s.conversationID === own)).toEqual([{ conversationID: own, message: `from session ${i}` }]);
      expect(done[i]).toMatchObject({ replyTo: own, notification: 'failed', notificationError: { code: 'reply_misrouted' } });
    }
  });
});

describe('what a routed turn may still do', () => {
  it('a routed high turn creates files and runs high-risk commands unasked by the caller, like a detached high turn', async () => {
    server = await start();
    const outcomes: Array<{ status: SessionView; ws: string }> = [];
    for (const replyTo of [A, null]) {
      const ws = ctx.workspace(`high-${replyTo ? 'routed' : 'detached'}`);
      mkdirSync(join(ws, 'victim'));
      writeFileSync(join(ws, 'victim', 'x'), 'x');
      const report = replyTo ? [sendTo(replyTo, 'done')] : [];
      const a = await create(server, {
        workspace: ws,
        replyTo,
        autonomy: 'high',
        prompt: `high ${steps(
          { name: 'Create', arguments: { file_path: join(ws, 'made.txt'), content: 'made\n' } },
          {
            name: 'Execute',
            arguments: { command: 'rm -rf ./victim', riskLevel: 'high', riskLevelReason: 'deletes a folder', summary: 'Remove the victim folder' },
          },
          ...report,
        )}`,
      });
      outcomes.push({ status: (await settle(server, a.metadata.session))[0]!, ws });
    }
    for (const { status, ws } of outcomes) {
      expect(status.latestRun).toMatchObject({ state: 'succeeded', autonomy: 'high', permissionsDeclined: [] });
      expect(readFileSync(join(ws, 'made.txt'), 'utf8')).toBe('made\n');
      expect(existsSync(join(ws, 'victim'))).toBe(false);
    }
    expect(outcomes.map((o) => o.status.notification)).toEqual(['accepted', 'disabled']);
  });

  it('a detached session never contacts Amp, also after detaching a routed one', async () => {
    server = await start();
    const before = amp.http.length;
    const d = await create(server, { workspace: ctx.workspace('detached'), replyTo: null, autonomy: 'low', prompt: `detached ${script({ text: 'quiet' })}` });
    const [done] = await settle(server, d.metadata.session);
    expect(done).toMatchObject({ notification: 'disabled', latestRun: { state: 'succeeded' } });
    expect(amp.http.length).toBe(before);
    // Routed once, then detached: the next turn resumes without the server and runs.
    const r = await create(server, { workspace: ctx.workspace('was-routed'), replyTo: A, autonomy: 'low', prompt: `routed ${script({ text: 'hi' })}` });
    await settle(server, r.metadata.session);
    const mark = amp.http.length;
    await follow(server, r.metadata.session, `now detached ${script({ text: 'still fine' })}`, { replyTo: null });
    const [detached] = await settle(server, r.metadata.session);
    expect(detached).toMatchObject({ replyTo: null, notification: 'disabled', preview: 'still fine', latestRun: { state: 'succeeded' } });
    expect(amp.http.length).toBe(mark);
  });

  it('droid running an Amp tool unasked (readOnlyHint puck below high) is caught: failed notification, turn interrupted', async () => {
    const hinted = await startFakeAmp({ puckReadOnlyHint: true });
    extraAmps.push(hinted);
    server = await start(hinted.url);
    const a = await create(server, {
      workspace: ctx.workspace('hinted'),
      replyTo: A,
      autonomy: 'low',
      prompt: `hinted ${script({ steps: [sendTo(A, 'unasked'), sendTo(A, 'again')], slowMs: 1_500 })}`,
    });
    // Each model answer takes 1.5 s, as a real model's does: the interrupt sent at the first unasked call lands
    // while droid waits for the next answer. With instant answers droid could start the second call first.
    const [done] = await settle(server, a.metadata.session);
    expect(done).toMatchObject({ notification: 'failed', notificationError: { code: 'reply_gate_bypassed' }, needsAttention: true });
    // The first call could not be stopped (droid never asked); the turn was stopped after it.
    expect(hinted.sends().length).toBeGreaterThanOrEqual(1);
    expect(hinted.sends().length).toBeLessThan(2);
    expect(done!.latestRun.state).toBe('interrupted');
  });
});

describe('preflight failures submit nothing', () => {
  async function failsWith(url: string, code: string, extra: Record<string, unknown> = {}, state = 'failed'): Promise<SessionView> {
    server = await start(url, extra);
    const marker = `preflight-${code}-${key()}`;
    const requests = ctx.bed.model.requests.length;
    const titles = ctx.bed.model.titleRequests.length;
    const a = await create(server, {
      workspace: ctx.workspace(marker),
      replyTo: A,
      autonomy: 'high',
      prompt: `${marker} ${script({ text: 'should never run' })}`,
    });
    const [done] = await settle(server, a.metadata.session);
    expect(done!.latestRun.state).toBe(state);
    expect(done!.latestRun.error?.code).toBe(code);
    expect(done!.needsAttention).toBe(true);
    // Zero prompt requests at the model.
    expect(ctx.bed.model.requests.length).toBe(requests);
    expect(ctx.bed.model.titleRequests.length).toBe(titles);
    expect(requestsWith(marker)).toEqual([]);
    await server.close();
    server = undefined;
    return done!;
  }

  it('server down: amp_mcp_unreachable', async () => {
    const closed = createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', () => r()));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((r) => closed.close(r));
    const done = await failsWith(`http://127.0.0.1:${port}/mcp`, 'amp_mcp_unreachable');
    expect(done.latestRun.error!.message).toMatch(/nothing was submitted/);
  });

  it('HTTP 401: amp_mcp_auth_required, with the sign-in to do', async () => {
    amp.setMode('unauthorized');
    const calls = amp.calls.length;
    const done = await failsWith(amp.url, 'amp_mcp_auth_required');
    expect(done.latestRun.error!.message).toMatch(/OAuth/);
    expect(amp.calls.length).toBe(calls);
  });

  it('an endpoint that answers HTTP but is no MCP server: amp_mcp_not_started', async () => {
    const plain = createServer((_req, res) => res.writeHead(404).end('no such thing'));
    await new Promise<void>((r) => plain.listen(0, '127.0.0.1', () => r()));
    try {
      await failsWith(`http://127.0.0.1:${(plain.address() as AddressInfo).port}/mcp`, 'amp_mcp_not_started');
    } finally {
      plain.closeAllConnections();
      plain.close();
    }
  });

  it('no puck tool: amp_mcp_tool_missing', async () => {
    amp.setMode('no_puck');
    await failsWith(amp.url, 'amp_mcp_tool_missing');
  });

  it('a tool droid cannot disable without disabling puck (named "puck "): amp_mcp_admin_tool_exposed', async () => {
    const odd = await startFakeAmp({ extraTools: [{ name: 'puck ', description: 'looks like puck', inputSchema: { type: 'object' } }] });
    extraAmps.push(odd);
    const done = await failsWith(odd.url, 'amp_mcp_admin_tool_exposed');
    expect(done.latestRun.error!.message).toContain('mcp_amp-puck_puck ');
    expect(odd.calls).toEqual([]);
  });

  it('a server that never answers costs droid ~10 s at initialize: the run deadline covers it', async () => {
    const silent = await startFakeAmp({ mode: 'hang' });
    extraAmps.push(silent);
    await failsWith(silent.url, 'run_timed_out', { runTimeoutMs: 4_000 }, 'timed_out');
  });
});
