/**
 * The session tools end to end: the built server as its own process, the MCP
 * SDK client over stdio, real workers, the real droid CLI, the scripted model.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, readlinkSync, realpathSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { messageText, prose, script } from '../../../src/testbed/scripted-model.js';
import { toolListing } from '../../../src/mcp/listing.js';
import { TOOLS } from '../../../src/mcp/tools.js';
import { startExpectingRefusal, type RunningServer } from '../../support/mcp-server.js';
import { idlePoolPids, pidsWithEnvTag, waitForNoProcesses } from '../../support/processes.js';
import { droidProcesses, liveDroids, makeContext, type E2EContext } from '../../support/e2e-context.js';
import type { Acceptance, SessionView } from '../../support/tool-views.js';

let ctx: E2EContext;
let server: RunningServer | undefined;
const TAG = `e2e-${process.pid}-${Date.now()}`;

beforeAll(async () => {
  ctx = await makeContext(TAG);
});
afterEach(async () => {
  await server?.close();
  server = undefined;
  await waitForNoProcesses(TAG, 15_000);
});
afterAll(async () => {
  await ctx?.cleanup();
});

let keys = 0;
const key = () => `key-${++keys}`;

async function create(s: RunningServer, args: Record<string, unknown>): Promise<Acceptance> {
  return s.ok<Acceptance>('droid_create_session', { requestKey: key(), replyTo: null, ...args });
}

async function settle(s: RunningServer, ...sessions: string[]): Promise<SessionView[]> {
  for (;;) {
    const waited = await s.ok<{ sessions: SessionView[]; timedOut: boolean }>('droid_wait_for_sessions', { sessions, timeoutSeconds: 30 });
    if (!waited.timedOut) return waited.sessions;
  }
}

/** grep -rl, where "no match" (exit 1) is the expected answer. */
function filesContaining(dir: string, needle: string): string[] {
  try {
    return execFileSync('grep', ['-rl', '--', needle, dir], { encoding: 'utf8' }).split('\n').filter(Boolean);
  } catch (err) {
    if ((err as { status?: number }).status === 1) return [];
    throw err;
  }
}

/**
 * One turn's processes as sampled: droid's working directory (the turn's
 * workspace) and when its worker or droid was seen alive. The worker counts:
 * it closes droid after the result, and the lock must outlast both.
 */
interface DroidLife {
  pid: number;
  cwd: string;
  first: number;
  last: number;
}

/**
 * Whether the leader of `pid`'s process group (its worker) still runs. A
 * zombie leader does not: the group of a droid booted ahead is being killed
 * (the longest idle goes when another session boots one), and its droid,
 * which may outlive the leader by a few ms, is still no turn's.
 */
function groupLeaderRunning(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const leader = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2];
    const leaderStat = readFileSync(`/proc/${leader}/stat`, 'utf8');
    const state = leaderStat.slice(leaderStat.lastIndexOf(')') + 2).split(' ')[0];
    return state !== 'Z' && state !== 'X' && readFileSync(`/proc/${leader}/cmdline`, 'utf8').length > 0;
  } catch {
    return false;
  }
}

/** Samples live droid processes until stopped: distinct pids and the peak at once. */
function sampleDroids() {
  const seen = new Map<number, { first: number; last: number }>();
  const droids = new Map<number, { cwd: string; worker: number }>();
  const nested = new Set<number>();
  /** Seen idle, and never since in a turn's group: a droid booted ahead whose worker was killed first stays no turn's. */
  const wasIdle = new Set<number>();
  let peak = 0;
  /** What was alive at the peak's first sighting: the failure message of a test that counts too many. */
  let atPeak = '';
  let running = true;
  const loop = (async () => {
    while (running) {
      const at = Date.now();
      // Droids first, then what is idle: a worker says it holds a droid booted ahead before that droid exists.
      const tree = droidProcesses(TAG);
      // An idle warm worker (issue 12), or one holding a droid booted ahead, is no turn yet: its turn's life starts when it takes one.
      const idle = idlePoolPids(TAG);
      for (const pid of pidsWithEnvTag(TAG)) {
        if (idle.has(pid)) wasIdle.add(pid);
        else if (groupLeaderRunning(pid)) wasIdle.delete(pid);
        if (wasIdle.has(pid)) idle.add(pid);
      }
      for (const pid of pidsWithEnvTag(TAG)) {
        // Forgotten while idle: a pool worker caught between fork and exec looks like a copy
        // of the server, and that sighting must not date its later turn back to then.
        if (idle.has(pid)) {
          seen.delete(pid);
          continue;
        }
        const life = seen.get(pid);
        if (life) life.last = at;
        else seen.set(pid, { first: at, last: at });
      }
      // A nested process (bwrap's inner half, a droid fork) is reparented for a moment when the
      // process above it is killed: it was seen nested before and is never a turn of its own.
      for (const [pid, parent] of tree) if (tree.has(parent)) nested.add(pid);
      // A droid booted for a session's next turn is no turn's until that turn comes (it is idle till then). Nor is one whose
      // worker is idle: a droid booted ahead and let go, killed with its group, may end between the two reads of /proc that
      // place it in its worker's group (CI at 7cf95d0 counted one such, gone by the time it was described).
      const pids = [...tree].filter(([pid, parent]) => !nested.has(pid) && !idle.has(pid) && !wasIdle.has(pid) && !idle.has(parent)).map(([pid]) => pid);
      for (const pid of pids) {
        if (droids.has(pid)) continue;
        try {
          const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
          droids.set(pid, { cwd: readlinkSync(`/proc/${pid}/cwd`), worker: Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) });
        } catch {
          // gone while we looked
        }
      }
      if (pids.length > peak) atPeak = describeDroids(pids, tree);
      peak = Math.max(peak, pids.length);
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return { distinct: droids.size, peak };
    },
    /** The processes counted at the peak, each with its parent and its process group's leader. */
    atPeak: () => atPeak,
    /** Turns (worker + droid) in this workspace, in the order they appeared. */
    in(cwd: string): DroidLife[] {
      const lives: DroidLife[] = [];
      for (const [pid, droid] of droids) {
        if (droid.cwd !== cwd) continue;
        const own = seen.get(pid);
        // Listed by the droid scan, which runs after the tag scan, and gone before the next tag scan:
        // a process that lived under 20 ms (seen once, in one full run of the suite) ran no turn.
        if (!own) continue;
        const worker = seen.get(droid.worker) ?? own;
        lives.push({ pid, cwd, first: Math.min(own.first, worker.first), last: Math.max(own.last, worker.last) });
      }
      return lives.sort((a, b) => a.first - b.first);
    },
  };
}

/** One line per counted droid: its pid, parent and group, and the command lines (titles) of the parent and the group's leader. */
function describeDroids(pids: number[], tree: Map<number, number>): string {
  const cmd = (pid: number) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').slice(0, 160);
    } catch {
      return '(gone)';
    }
  };
  const group = (pid: number) => {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]);
    } catch {
      return -1;
    }
  };
  return pids
    .map((pid) => {
      const parent = tree.get(pid)!;
      const leader = group(pid);
      return `droid ${pid} (${cmd(pid)}) · parent ${parent} (${cmd(parent)}) · group ${leader} (${cmd(leader)})`;
    })
    .join('\n');
}

/** Whether two droid processes were ever seen alive at the same time. */
const livedTogether = (a: DroidLife, b: DroidLife) => a.first <= b.last && b.first <= a.last;

async function until(predicate: () => boolean | Promise<boolean>, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await predicate())) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('tool surface', () => {
  it('lists the session tools with strict schemas, examples and read-only hints', async () => {
    server = await ctx.start();
    const { tools } = await server.client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(
      [
        'droid_cancel_session',
        'droid_create_session',
        'droid_find_sessions',
        'droid_get_session_status',
        'droid_get_usage',
        'droid_list_workspaces',
        'droid_models',
        'droid_read_session',
        'droid_send_message',
        'droid_update_session',
        'droid_wait_for_sessions',
      ].sort(),
    );
    // The build writes the listing once (scripts/tool-listing.mjs): it is what the schemas make.
    expect(tools).toEqual(TOOLS.map(toolListing));
    for (const tool of tools) {
      expect(tool.description!.length).toBeGreaterThan(150);
      expect(tool.description).toContain('Example:');
      expect(tool.inputSchema.additionalProperties).toBe(false);
      expect(tool.outputSchema).toBeDefined();
    }
    const readOnly = tools
      .filter((t) => t.annotations?.readOnlyHint)
      .map((t) => t.name)
      .sort();
    expect(readOnly).toEqual([
      'droid_find_sessions',
      'droid_get_session_status',
      'droid_get_usage',
      'droid_list_workspaces',
      'droid_models',
      'droid_read_session',
      'droid_wait_for_sessions',
    ]);
    const unknownArg = await server.call('droid_get_session_status', { session: 'x', extra: 1 });
    expect(unknownArg.isError).toBe(true);
    expect(unknownArg.structured.error).toMatchObject({ code: 'invalid_arguments', retryable: false, action: expect.any(String) });
    const removed = await server.call('droid_start', {});
    expect(removed.structured.error).toMatchObject({ code: 'unknown_tool' });
    const missingReplyTo = await server.call('droid_create_session', { requestKey: 'k', workspace: ctx.root, prompt: 'p' });
    expect(missingReplyTo.structured.error).toMatchObject({ code: 'invalid_arguments' });
  });

  it('lists workspaces, capacity and policy, and the live models', async () => {
    server = await ctx.start({ maxConcurrentRuns: 3 });
    const ws = await server.ok<{
      workspaces: string[];
      capacity: object;
      policy: { defaultModel: string; sandbox: object; worktrees: boolean };
      droid: object;
    }>('droid_list_workspaces');
    expect(ws.workspaces).toEqual([ctx.root]);
    // No checkouts directory configured: isolation "worktree" is not offered.
    expect(ws.policy.worktrees).toBe(false);
    expect(ws.capacity).toEqual({ maximum: 3, active: 0, queued: 0, available: 3 });
    expect(ws.policy.defaultModel).toBe(ctx.bed.modelId);
    // Every end-to-end turn here runs inside the sandbox (bubblewrap, found on PATH).
    expect(ws.policy.sandbox).toEqual({ mode: 'bwrap', available: true, detail: null });
    // The CLI that runs the turns (pinned, or $DROID_MCP_TEST_DROID): the version of the npm package that installed it.
    const installed = (JSON.parse(readFileSync(join(dirname(ctx.bed.droidPath), '..', 'package.json'), 'utf8')) as { version: string }).version;
    expect(ws.droid).toEqual({ version: installed });
    // The droid path is the operator's business: the log has it, the tool output does not.
    expect(JSON.stringify(ws)).not.toContain(ctx.bed.droidPath);
    const logged = server
      .stderr()
      .split('\n')
      .filter((line) => line.includes('"msg":"droid CLI version"'))
      .map((line) => (JSON.parse(line) as { droid: { path: string; version: string } }).droid);
    expect(logged).toEqual([{ path: ctx.bed.droidPath, version: installed }]);
    const models = await server.ok<{ models: Array<{ id: string }> }>('droid_models');
    expect(models.models.map((m) => m.id)).toContain(ctx.bed.modelId);
  });
});

describe('lifecycle', () => {
  it("a turn's refused destinations show in its status and the server's log, one line per destination; a model-only session's too (issue 37)", async () => {
    server = await ctx.start({ network: { allow: ['allowed.invalid'] } });
    const ws = ctx.workspace('egress');
    const curl = (host: string) => `curl -s -m 10 http://${host}/ | head -c 60; echo`;
    const tool = {
      name: 'Execute',
      arguments: {
        command: [curl('refused.invalid'), curl('refused.invalid'), curl('other.invalid:8080'), curl('allowed.invalid')].join('; '),
        riskLevel: 'low',
        riskLevelReason: 'test',
      },
    };
    const a = await create(server, { workspace: ws, autonomy: 'high', prompt: `fetch ${script({ tool })}` });
    const b = await create(server, {
      workspace: ctx.workspace('egress-model-only'),
      autonomy: 'high',
      network: 'model-only',
      prompt: `fetch ${script({ tool })}`,
    });
    const [first, second] = await settle(server, a.metadata.session, b.metadata.session);
    expect(first!.latestRun.state).toBe('succeeded');
    const refused = (v: SessionView) => (v.latestRun.egress?.refused ?? []).map((r) => `${r.host}:${r.port}x${r.count}`).sort();
    // allowed.invalid is allowed but does not resolve: a 502, not a refusal.
    expect(refused(first!)).toEqual(['other.invalid:8080x1', 'refused.invalid:80x2']);
    expect(second!.network).toBe('model-only');
    expect(refused(second!)).toEqual(['allowed.invalid:80x1', 'other.invalid:8080x1', 'refused.invalid:80x2']);
    const lines = server
      .stderr()
      .split('\n')
      .filter((line) => line.includes('egress proxy refused'));
    expect(lines.filter((line) => line.includes(a.metadata.run))).toHaveLength(2);
    expect(lines.filter((line) => line.includes(b.metadata.run))).toHaveLength(3);
  });

  it('create → wait → status, with the turn really run by droid', async () => {
    server = await ctx.start();
    const ws = ctx.workspace('lifecycle');
    const file = join(ws, 'out.txt');
    const accepted = await create(server, {
      workspace: ws,
      autonomy: 'high',
      prompt: `write ${script({ tool: { name: 'Create', arguments: { file_path: file, content: 'e2e\n' } }, usage: { prompt_tokens: 50, completion_tokens: 7 } })}`,
    });
    expect(accepted.metadata.replayed).toBe(false);
    const [status] = await settle(server, accepted.metadata.session);
    expect(status).toMatchObject({ agentState: 'idle', needsAttention: false, latestRun: { state: 'succeeded', autonomy: 'high', model: ctx.bed.modelId } });
    expect(status!.latestRun.usage!.inputTokens).toBeGreaterThan(0);
    expect(status!.preview).toContain('tool said:');
    expect(readFileSync(file, 'utf8')).toBe('e2e\n');
    // The log says where the turn's start went, stage by stage, in order (bench/latency.ts reads it).
    const started = server
      .stderr()
      .split('\n')
      .filter((line) => line.includes('"msg":"turn running') && line.includes(accepted.metadata.session))
      .map((line) => (JSON.parse(line) as { start: { at: number; ms: Record<string, number> } }).start);
    expect(started).toHaveLength(1);
    const stages = Object.keys(started[0]!.ms);
    for (const stage of [
      'launch_began',
      'starting_committed',
      'worker_ready',
      'spec_received',
      'droid_spawned',
      'droid_first_byte',
      'initialized',
      'session_ready',
      'submit_sent',
      'submit_answered',
    ]) {
      expect(stages).toContain(stage);
    }
    // Listed in the order they happened: droid answered before it was asked to submit.
    const order = (a: string, b: string) => expect(stages.indexOf(a)).toBeLessThan(stages.indexOf(b));
    order('worker_ready', 'droid_spawned');
    order('droid_first_byte', 'initialized');
    order('initialized', 'submit_sent');
  });

  it('replays a request key, rejects a conflicting one, and still does across a restart', async () => {
    server = await ctx.start();
    const ws = ctx.workspace('replay');
    const args = { requestKey: 'replay-1', replyTo: null, workspace: ws, autonomy: 'off', prompt: `hello ${script({ text: 'hi' })}` };
    const first = await server.ok<Acceptance>('droid_create_session', args);
    const again = await server.ok<Acceptance>('droid_create_session', args);
    expect(again.metadata).toEqual({ ...first.metadata, replayed: true });
    const conflict = await server.call('droid_create_session', { ...args, prompt: 'something else' });
    expect(conflict.structured.error).toMatchObject({ code: 'request_key_conflict' });
    await settle(server, first.metadata.session);
    await server.close();
    // After a restart, even with a different default autonomy, the replay returns the original settings.
    server = await ctx.start({ defaultAutonomy: 'low' });
    const replayed = await server.ok<Acceptance>('droid_create_session', args);
    expect(replayed.metadata).toEqual({ ...first.metadata, replayed: true });
    expect(replayed.status.latestRun).toMatchObject({ state: 'succeeded', autonomy: 'off' });
    // The turn ran once: one model request carried its prompt, replays added none.
    const turnRequests = () => ctx.bed.model.requests.filter((r) => r.messages.some((m) => messageText(m).includes(args.prompt))).length;
    expect(turnRequests()).toBe(1);
    await new Promise((r) => setTimeout(r, 300));
    expect(turnRequests()).toBe(1);
    const conflictAfter = await server.call('droid_create_session', { ...args, autonomy: 'low' });
    expect(conflictAfter.structured.error).toMatchObject({ code: 'request_key_conflict' });
  });

  it('a queued follow-up runs after the first turn, in a second droid process, without interrupting it', async () => {
    server = await ctx.start();
    const ws = ctx.workspace('queued');
    await server.ok('droid_models'); // warm the catalog so its probe process is not counted
    const sampler = sampleDroids();
    const a = await create(server, { workspace: ws, autonomy: 'off', prompt: `slow ${script({ text: 'first done', slowMs: 2_500 })}` });
    await until(
      async () => (await server!.ok<{ status: SessionView }>('droid_get_session_status', { session: a.metadata.session })).status.latestRun.state === 'running',
    );
    const f = await server.ok<Acceptance>('droid_send_message', {
      requestKey: key(),
      session: a.metadata.session,
      prompt: `next ${script({ text: 'second done' })}`,
    });
    expect(f.status.latestRun.state).toBe('queued');
    const [done] = await settle(server, a.metadata.session);
    expect(done!.latestRun.state).toBe('succeeded');
    expect(done!.preview).toBe('second done');
    const status = await server.ok<{ status: SessionView }>('droid_get_session_status', { session: a.metadata.session });
    expect(status.status.latestRun.run).toBe(f.metadata.run);
    const runs = await sampler.stop();
    // Two droid processes, never both alive: the second started after the first ended.
    expect(runs).toEqual({ distinct: 2, peak: 1 });
    // The first turn was not interrupted: it completed and its text reached the second turn's history.
    const lastRequest = ctx.bed.model.requests.at(-1)!;
    expect(JSON.stringify(lastRequest.messages)).toContain('first done');
  });

  it('steers with interrupt:true: the running turn is interrupted and the new message runs in the same session', async () => {
    server = await ctx.start();
    const ws = ctx.workspace('steer');
    const a = await create(server, { workspace: ws, autonomy: 'off', prompt: `slow ${script({ text: prose(50, 'unfinished'), slowMs: 30_000 })}` });
    await until(
      async () => (await server!.ok<{ status: SessionView }>('droid_get_session_status', { session: a.metadata.session })).status.latestRun.state === 'running',
    );
    await new Promise((r) => setTimeout(r, 500));
    const steer = await server.ok<Acceptance>('droid_send_message', {
      requestKey: key(),
      session: a.metadata.session,
      interrupt: true,
      prompt: `change course ${script({ text: 'steered' })}`,
    });
    const [done] = await settle(server, a.metadata.session);
    expect(done!.latestRun).toMatchObject({ run: steer.metadata.run, state: 'succeeded' });
    expect(done!.needsAttention).toBe(false);
    const lastRequest = ctx.bed.model.requests.at(-1)!;
    // Same droid session: the model sees the interrupted turn's prompt in its history.
    expect(JSON.stringify(lastRequest.messages)).toContain('unfinished0 unfinished1');
  });

  it('cancel interrupts the running turn and drops queued follow-ups', async () => {
    server = await ctx.start();
    const ws = ctx.workspace('cancel');
    const a = await create(server, { workspace: ws, autonomy: 'off', prompt: `slow ${script({ text: prose(50), slowMs: 30_000 })}` });
    const q1 = await server.ok<Acceptance>('droid_send_message', { requestKey: key(), session: a.metadata.session, prompt: 'queued one' });
    await until(
      async () =>
        (await server!.ok<{ status: SessionView }>('droid_get_session_status', { session: a.metadata.session })).status.latestRun.state !== 'queued' ||
        liveDroids(TAG).length > 0,
    );
    const cancelled = await server.ok<{ status: SessionView }>('droid_cancel_session', { session: a.metadata.session });
    expect(cancelled.status.latestRun).toMatchObject({ run: q1.metadata.run, state: 'cancelled', cancelReason: 'cancelled' });
    const [done] = await settle(server, a.metadata.session);
    expect(done!.agentState).toBe('idle');
    const again = await server.ok<{ status: SessionView }>('droid_cancel_session', { session: a.metadata.session });
    expect(again.status.latestRun.state).toBe('cancelled');
    expect(ctx.bed.model.requests.some((r) => JSON.stringify(r.messages).includes('queued one'))).toBe(false);
  });
});

describe('admission', () => {
  it('6 sessions with maxConcurrentRuns 2 never exceed 2 live droid processes', async () => {
    server = await ctx.start({ maxConcurrentRuns: 2 });
    await server.ok('droid_models'); // warm the catalog so its probe process is not counted
    const sessions: string[] = [];
    const sampler = sampleDroids();
    for (let i = 0; i < 6; i++) {
      const ws = ctx.workspace(`cap-${i}`);
      sessions.push(
        (await create(server, { workspace: ws, autonomy: 'high', prompt: `n${i} ${script({ text: `done ${i}`, slowMs: 600 })}` })).metadata.session,
      );
    }
    const done = await settle(server, ...sessions);
    const { peak, distinct } = await sampler.stop();
    expect(done.every((s) => s.latestRun.state === 'succeeded')).toBe(true);
    expect(peak, sampler.atPeak()).toBe(2);
    expect(distinct).toBe(6);
    // Six slow turns, two at a time: a generous budget on a loaded 2-core host.
  }, 150_000);

  it('reader/writer locks: nested paths serialize writers both ways, readers share, siblings run in parallel', async () => {
    server = await ctx.start({ maxConcurrentRuns: 4 });
    await server.ok('droid_models');
    const parent = ctx.workspace('locks');
    const child = ctx.workspace('locks/child');
    const sibling = ctx.workspace('locks-sibling');
    const link = join(ctx.root, 'locks-link');
    if (!existsSync(link)) symlinkSync(parent, link);
    const slow = (t: string) => `${t} ${script({ text: t, slowMs: 1_200 })}`;
    const interval = (s: SessionView) => [Date.parse(s.latestRun.startedAt!), Date.parse(s.latestRun.endedAt!)] as const;
    const overlaps = (a: SessionView, b: SessionView) => interval(a)[0] < interval(b)[1] && interval(b)[0] < interval(a)[1];

    const sampler = sampleDroids();
    // Writer on the parent, then a writer on the child: one after the other.
    const w1 = await create(server, { workspace: parent, autonomy: 'high', prompt: slow('w1') });
    const w2 = await create(server, { workspace: child, autonomy: 'high', prompt: slow('w2') });
    // Writer through a symlink spelling of the parent: also serialized.
    const w3 = await create(server, { workspace: link, autonomy: 'low', prompt: slow('w3') });
    // A writer on a sibling runs in parallel with w1.
    const s1 = await create(server, { workspace: sibling, autonomy: 'high', prompt: slow('s1') });
    const [a, b, c, d] = await settle(server, w1.metadata.session, w2.metadata.session, w3.metadata.session, s1.metadata.session);
    expect(overlaps(a!, b!)).toBe(false);
    expect(overlaps(a!, c!)).toBe(false);
    expect(overlaps(b!, c!)).toBe(false);
    expect(overlaps(a!, d!)).toBe(true);
    // The same by process lifetimes: a lock is held until the droid process is gone,
    // not merely until the turn's result is recorded.
    const [p1, p3] = sampler.in(realpathSync(parent));
    const [p2] = sampler.in(realpathSync(child));
    const [p4] = sampler.in(realpathSync(sibling));
    expect([p1, p2, p3, p4].every(Boolean)).toBe(true);
    expect(livedTogether(p1!, p2!)).toBe(false);
    expect(livedTogether(p1!, p3!)).toBe(false);
    expect(livedTogether(p2!, p3!)).toBe(false);
    expect(livedTogether(p1!, p4!)).toBe(true);

    // Readers share the parent and child; a writer on the child waits for both.
    const r1 = await create(server, { workspace: parent, autonomy: 'off', prompt: slow('r1') });
    const r2 = await create(server, { workspace: child, autonomy: 'off', prompt: slow('r2') });
    const w4 = await create(server, { workspace: child, autonomy: 'medium', prompt: slow('w4') });
    const [e, f, g] = await settle(server, r1.metadata.session, r2.metadata.session, w4.metadata.session);
    expect(overlaps(e!, f!)).toBe(true);
    expect(overlaps(e!, g!)).toBe(false);
    expect(overlaps(f!, g!)).toBe(false);
    await sampler.stop();
    const readerOnParent = sampler.in(realpathSync(parent))[2]!;
    const [readerOnChild, writerOnChild] = sampler.in(realpathSync(child)).slice(1);
    const lives = JSON.stringify({ readerOnParent, readerOnChild, writerOnChild });
    expect(livedTogether(readerOnParent, readerOnChild!), lives).toBe(true);
    expect(livedTogether(readerOnParent, writerOnChild!), lives).toBe(false);
    expect(livedTogether(readerOnChild!, writerOnChild!), lives).toBe(false);
    // Seven slow turns, partly serialized by design: generous on a loaded 2-core host.
  }, 150_000);
});

describe('sandbox', () => {
  it('a bwrap that cannot run is reported by list_workspaces, and every create and catalog read is refused sandbox_unavailable with zero model requests', async () => {
    server = await ctx.start({ bwrapPath: join(ctx.root, '..', 'no-such-bwrap') });
    const ws = await server.ok<{ policy: { sandbox: { mode: string; available: boolean; detail: string } } }>('droid_list_workspaces');
    expect(ws.policy.sandbox).toMatchObject({ mode: 'bwrap', available: false, detail: expect.stringContaining('bwrap') });
    const before = ctx.bed.model.requests.length;
    const sessionsBefore = (await server.ok<{ sessions: unknown[] }>('droid_find_sessions', { limit: 100 })).sessions.length;
    // The catalog droid runs in the sandbox too: no sandbox, no catalog, and never an unconfined fallback.
    const refused = await server.call('droid_create_session', {
      requestKey: key(),
      replyTo: null,
      workspace: ctx.workspace('sandboxless'),
      autonomy: 'high',
      prompt: `never ${script({ text: 'must not run' })}`,
    });
    expect(refused.structured.error).toMatchObject({ code: 'sandbox_unavailable', retryable: false, action: expect.stringContaining('"sandbox": "off"') });
    const models = await server.call('droid_models', {});
    expect(models.structured.error).toMatchObject({ code: 'sandbox_unavailable' });
    expect((await server.ok<{ sessions: unknown[] }>('droid_find_sessions', { limit: 100 })).sessions).toHaveLength(sessionsBefore);
    expect(ctx.bed.model.requests.length).toBe(before);
    expect(liveDroids(TAG)).toEqual([]);
  });
  it('a bwrap whose seccomp filter does not hold fails the trial run, and the catalog is never read without it', async () => {
    // A bwrap that drops `--seccomp 3`: the sandbox runs, the filter does not, so the trial run must fail.
    const fake = join(ctx.root, '..', 'bwrap-without-filter');
    const real = execFileSync('sh', ['-c', 'command -v bwrap'], { encoding: 'utf8' }).trim();
    writeFileSync(
      fake,
      `#!/bin/sh\nfor a; do shift; if [ "$skip" = 1 ]; then skip=0; continue; fi; if [ "$a" = --seccomp ]; then skip=1; continue; fi; set -- "$@" "$a"; done\nexec ${real} "$@"\n`,
      { mode: 0o755 },
    );
    server = await ctx.start({ bwrapPath: fake });
    const ws = await server.ok<{ policy: { sandbox: { available: boolean; detail: string } } }>('droid_list_workspaces');
    expect(ws.policy.sandbox).toMatchObject({ available: false, detail: expect.stringContaining('seccomp filter did not load') });
    const models = await server.call('droid_models', {});
    expect(models.structured.error).toMatchObject({ code: 'sandbox_unavailable' });
    expect(liveDroids(TAG)).toEqual([]);
  });
});

describe('validation', () => {
  it('enforces the autonomy ceiling and validates model and reasoning against the live catalog', async () => {
    server = await ctx.start({ maxAutonomy: 'low', defaultAutonomy: 'off' });
    const ws = ctx.workspace('validation');
    const over = await server.call('droid_create_session', { requestKey: key(), replyTo: null, workspace: ws, prompt: 'p', autonomy: 'high' });
    expect(over.structured.error).toMatchObject({ code: 'autonomy_above_ceiling', retryable: false });
    const model = await server.call('droid_create_session', { requestKey: key(), replyTo: null, workspace: ws, prompt: 'p', model: 'no-such-model' });
    expect(model.structured.error).toMatchObject({ code: 'model_unavailable' });
    const effort = await server.call('droid_create_session', { requestKey: key(), replyTo: null, workspace: ws, prompt: 'p', reasoningEffort: 'max' });
    expect(effort.structured.error).toMatchObject({ code: 'reasoning_unsupported' });
    const outside = await server.call('droid_create_session', { requestKey: key(), replyTo: null, workspace: '/etc', prompt: 'p' });
    expect(outside.structured.error).toMatchObject({ code: 'workspace_not_approved' });
    expect((outside.structured.error as { action: string }).action).toContain('approvedDirectories');
    const traversal = await server.call('droid_create_session', { requestKey: key(), replyTo: null, workspace: `${ws}/../../..`, prompt: 'p' });
    expect(traversal.structured.error).toMatchObject({ code: 'workspace_not_approved' });
    const replyTo = await server.call('droid_create_session', {
      requestKey: key(),
      replyTo: 'T-11111111-2222-4333-8444-555555555555',
      workspace: ws,
      prompt: 'p',
    });
    expect(replyTo.structured.error).toMatchObject({ code: 'reply_back_unavailable' });
    // A session may ask for less network than the host allows, never more (issue 37).
    const network = await server.call('droid_create_session', { requestKey: key(), replyTo: null, workspace: ws, prompt: 'p', network: 'open' });
    expect(network.structured.error).toMatchObject({ code: 'network_above_ceiling', retryable: false });
    const policy = await server.ok<{ policy: { network: { mode: string; alwaysAllowed: string[] } } }>('droid_list_workspaces', {});
    expect(policy.policy.network.mode).toBe('proxy');
    expect(policy.policy.network.alwaysAllowed).toEqual(expect.arrayContaining(['api.factory.ai:443', expect.stringMatching(/^127\.0\.0\.1:\d+$/)]));
    for (const r of [over, model, effort, outside, traversal, replyTo, network]) {
      expect(r.text).not.toContain(ctx.stateDir);
      expect(r.text).not.toMatch(/\n\s+at /);
    }
  });
});

describe('durability', () => {
  it('kill -9 mid-turn: restart shows unknown and queue_lost; the prompt reached the model once', async () => {
    const marker = `kill-marker-${Date.now()}`;
    server = await ctx.start();
    const ws = ctx.workspace('crash');
    const a = await create(server, { workspace: ws, autonomy: 'off', prompt: `${marker} ${script({ text: prose(50), slowMs: 30_000 })}` });
    const q = await server.ok<Acceptance>('droid_send_message', { requestKey: key(), session: a.metadata.session, prompt: 'queued behind' });
    await until(
      async () =>
        (await server!.ok<{ status: SessionView }>('droid_get_session_status', { session: a.metadata.session })).status.agentState === 'working' &&
        liveDroids(TAG).length === 1,
    );
    // The turn's own model request is streaming (droid's title request is recorded apart).
    await until(() => ctx.bed.model.requests.some((r) => JSON.stringify(r.messages).includes(marker)));
    process.kill(server.pid, 'SIGKILL');
    await server.close().catch(() => undefined);
    server = undefined;
    await waitForNoProcesses(TAG, 15_000);

    server = await ctx.start();
    const status = await server.ok<{ status: SessionView }>('droid_get_session_status', { session: a.metadata.session });
    expect(status.status.agentState).toBe('unknown');
    const follow = await server.call('droid_send_message', { requestKey: key(), session: a.metadata.session, prompt: 'more' });
    expect(follow.structured.error).toMatchObject({ code: 'session_unknown_outcome' });
    expect(status.status.latestRun).toMatchObject({ run: q.metadata.run, state: 'cancelled', cancelReason: 'queue_lost' });
    // The crashed turn kept no transcript: history says so and invents nothing.
    const history = await server.ok<{ items: Array<{ type: string; kind?: string }>; historyAvailable: boolean }>('droid_read_session', {
      session: a.metadata.session,
    });
    expect(history.historyAvailable).toBe(false);
    expect(history.items.every((i) => i.type === 'notice')).toBe(true);
    const sent = ctx.bed.model.requests.filter((r) => JSON.stringify(r.messages).includes(marker)).length;
    expect(sent).toBe(1);
    // The prompt marker appears nowhere under the state directory.
    expect(filesContaining(ctx.stateDir, marker)).toEqual([]);
  }, 90_000);

  it('a graceful stop interrupts the running turn and says so; queued turns are lost, not replayed', async () => {
    server = await ctx.start();
    const ws = ctx.workspace('graceful');
    const marker = `graceful-${Date.now()}`;
    const a = await create(server, { workspace: ws, autonomy: 'off', prompt: `${marker} ${script({ text: prose(60), slowMs: 30_000 })}` });
    const q = await server.ok<Acceptance>('droid_send_message', { requestKey: key(), session: a.metadata.session, prompt: 'after the stop' });
    await until(
      async () =>
        (await server!.ok<{ status: SessionView }>('droid_get_session_status', { session: a.metadata.session })).status.agentState === 'working' &&
        liveDroids(TAG).length === 1,
    );
    await until(() => ctx.bed.model.requests.some((r) => JSON.stringify(r.messages).includes(marker)));
    // Closing stdio is how an MCP client stops a stdio server.
    await server.close();
    server = undefined;
    await waitForNoProcesses(TAG, 20_000);

    server = await ctx.start();
    const runs = await server.ok<{ status: SessionView }>('droid_get_session_status', { session: a.metadata.session });
    expect(runs.status).toMatchObject({
      agentState: 'idle',
      needsAttention: true,
      latestRun: { run: q.metadata.run, state: 'cancelled', cancelReason: 'queue_lost' },
    });
    const history = await server.ok<{ items: Array<{ type: string; kind?: string; run: string }> }>('droid_read_session', { session: a.metadata.session });
    expect(history.items, JSON.stringify(history.items)).toContainEqual(expect.objectContaining({ type: 'notice', kind: 'interrupted', run: a.metadata.run }));
    expect(ctx.bed.model.requests.some((r) => JSON.stringify(r.messages).includes('after the stop'))).toBe(false);
    // The session can continue: its outcome is known.
    await server.ok('droid_send_message', { requestKey: key(), session: a.metadata.session, prompt: `resume ${script({ text: 'back' })}` });
    const [done] = await settle(server, a.metadata.session);
    expect(done).toMatchObject({ agentState: 'idle', needsAttention: false, preview: 'back' });
  });

  it('a second server on the same state directory is refused', async () => {
    server = await ctx.start();
    const second = await startExpectingRefusal(ctx.config(), ctx.env);
    expect(second.code).not.toBe(0);
    expect(second.stderr).toContain('state_locked');
    expect((await server.ok<{ workspaces: string[] }>('droid_list_workspaces')).workspaces).toEqual([ctx.root]);
  });

  it('a state directory inside an approved root is refused before anything is opened, naming the key', async () => {
    const inside = join(ctx.root, 'state-inside');
    mkdirSync(inside, { mode: 0o700 });
    const refused = await startExpectingRefusal(ctx.config({ stateDirectory: inside }), ctx.env);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain('config_invalid');
    expect(refused.stderr).toContain('stateDirectory');
    expect(refused.stderr).toContain('approved root');
    expect(readdirSync(inside)).toEqual([]);
  });

  it('corrupt state is refused and every file is left byte-identical', async () => {
    const stateDir = join(ctx.root, '..', 'corrupt-state');
    mkdirSync(stateDir, { mode: 0o700, recursive: true });
    writeFileSync(join(stateDir, 'state.jsonl'), '{"version": 1, "seq": 0, "sessions": 1, "runs": 0}\n{"session": {', { mode: 0o600 });
    const snapshot = () =>
      readdirSync(stateDir)
        .sort()
        .map((name) => [name, readFileSync(join(stateDir, name)).toString('base64'), statSync(join(stateDir, name)).mtimeMs]);
    const before = snapshot();
    const refused = await startExpectingRefusal(ctx.config({ stateDirectory: stateDir }), ctx.env);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain('state_corrupt');
    expect(snapshot()).toEqual(before);
  });
});
