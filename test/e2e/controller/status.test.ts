/**
 * `droid-mcp status` against the built server running real turns (issue 23):
 * it reads the durable state without taking the owner lock, lists the live
 * and queued turns of each session and the owner process, exits 3 while a
 * live owner has a live or queued turn, and 0 once the server has stopped,
 * cleanly or not. It changes no byte of the state directory.
 */
import { readdirSync, rmSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { prose, script } from '../../../src/testbed/scripted-model.js';
import { runCli, treeFingerprint } from '../../support/cli.js';
import { privateDir, startServer, type RunningServer } from '../../support/mcp-server.js';
import type { Acceptance, SessionView } from '../../support/tool-views.js';
import { serverPerTest, type E2EContext } from '../../support/e2e-context.js';

let ctx: E2EContext;
let server: RunningServer | undefined;
const TAG = `e2e-status-${process.pid}-${Date.now()}`;

serverPerTest(
  TAG,
  (made) => (ctx = made),
  () => ({
    ctx,
    take() {
      const s = server;
      server = undefined;
      return s;
    },
  }),
);

let keys = 0;
const key = () => `status-key-${++keys}`;

async function until(check: () => Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`not reached in ${timeoutMs} ms; server log:\n${server?.stderr().slice(-4_000)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** A session whose first turn runs (slowly, for 30 s) and whose follow-up is queued behind it. */
async function busySession(s: RunningServer): Promise<{ session: string; first: string; queued: string }> {
  const a = await s.ok<Acceptance>('droid_create_session', {
    requestKey: key(),
    replyTo: null,
    workspace: ctx.workspace('status'),
    autonomy: 'off',
    prompt: `slow ${script({ text: prose(60, 'status'), slowMs: 30_000 })}`,
  });
  const session = a.metadata.session;
  await until(async () => (await s.ok<{ status: SessionView }>('droid_get_session_status', { session })).status.latestRun.state === 'running');
  const q = await s.ok<Acceptance>('droid_send_message', { requestKey: key(), session, prompt: 'queued behind it' });
  return { session, first: a.metadata.run, queued: q.metadata.run };
}

interface StatusJson {
  ok: boolean;
  owner: { pid: number; alive: boolean } | null;
  lock: string;
  live: number;
  queued: number;
  busy: boolean;
  inFlight: Array<{ id: string; turns: Array<{ run: string; seq: number; state: string }> }>;
}

describe('droid-mcp status', () => {
  it('lists a live and a queued turn with the live owner and exits 3; after a clean stop it exits 0 and changed nothing', async () => {
    const config = ctx.config();
    server = await startServer(config, ctx.env);
    const busy = await busySession(server);

    const text = await runCli(['status', '--config', config], ctx.env);
    expect(text.code, text.stderr).toBe(3);
    expect(text.stdout).toContain(`owner: pid ${server.pid} (host `);
    expect(text.stdout).toContain(': alive, holds the state directory');
    expect(text.stdout).toMatch(new RegExp(`^  session ${busy.session}  \\S+/status$`, 'm'));
    expect(text.stdout).toMatch(new RegExp(`^    turn 1  running  +since \\S+  run ${busy.first}$`, 'm'));
    expect(text.stdout).toMatch(new RegExp(`^    turn 2  queued  +accepted \\S+  run ${busy.queued}$`, 'm'));
    expect(text.stdout).toMatch(/^busy: 1 live and 1 queued turn\(s\)\. A restart now interrupts/m);

    const json = await runCli(['status', '--config', config, '--json'], ctx.env);
    expect(json.code).toBe(3);
    const report = JSON.parse(json.stdout) as StatusJson;
    expect(report).toMatchObject({ ok: true, owner: { pid: server.pid, alive: true }, lock: 'held', live: 1, queued: 1, busy: true });
    expect(report.inFlight).toEqual([
      expect.objectContaining({
        id: busy.session,
        turns: [expect.objectContaining({ run: busy.first, seq: 1, state: 'running' }), expect.objectContaining({ run: busy.queued, seq: 2, state: 'queued' })],
      }),
    ]);

    // A clean stop interrupts the live turn; the queued one stays queued until the next start marks it queue_lost.
    await server.close();
    server = undefined;
    const before = treeFingerprint(ctx.stateDir);
    const stopped = await runCli(['status', '--config', config], ctx.env);
    expect(stopped.code, stopped.stdout).toBe(0);
    expect(stopped.stdout).toMatch(/: not running \(stopped cleanly\)$/m);
    expect(stopped.stdout).not.toMatch(/turn 1/);
    expect(stopped.stdout).toMatch(new RegExp(`^    turn 2  queued  +accepted \\S+  run ${busy.queued}$`, 'm'));
    expect(stopped.stdout).toMatch(/^not running: 0 live and 1 queued turn\(s\) were left when the controller stopped; the next start marks/m);
    expect(treeFingerprint(ctx.stateDir)).toEqual(before);

    // Once a server has started and stopped again, nothing is in flight: idle.
    server = await startServer(config, ctx.env);
    await server.close();
    server = undefined;
    const idle = await runCli(['status', '--config', config], ctx.env);
    expect(idle.code, idle.stdout).toBe(0);
    expect(idle.stdout).toMatch(/^idle: nothing live or queued; a restart loses nothing\.$/m);
  });

  it('after kill -9 it names the dead owner and the turns the next start marks unknown, and exits 0', async () => {
    const config = ctx.config();
    server = await startServer(config, ctx.env);
    const busy = await busySession(server);
    process.kill(server.pid, 'SIGKILL');
    await until(async () => (await runCli(['status', '--config', config, '--json'], ctx.env)).code === 0);
    await server.close().catch(() => undefined);
    server = undefined;
    const before = treeFingerprint(ctx.stateDir);
    const after = await runCli(['status', '--config', config], ctx.env);
    expect(after.code, after.stdout).toBe(0);
    expect(after.stdout).toMatch(/: not running \(pid no longer running\); the next start takes its lock over$/m);
    expect(after.stdout).toMatch(new RegExp(`^    turn 1  running  +since \\S+  run ${busy.first}$`, 'm'));
    expect(after.stdout).toMatch(/^not running: 1 live and 1 queued turn\(s\) were left when the controller stopped/m);
    expect(treeFingerprint(ctx.stateDir)).toEqual(before);
  });

  it('a stopped (SIGSTOP) server, its lock gone stale, is alive but unresponsive: status exits 3, backup refuses', async () => {
    const config = ctx.config();
    server = await startServer(config, ctx.env);
    await server.ok('droid_list_workspaces');
    process.kill(server.pid, 'SIGSTOP');
    try {
      // A live owner refreshes its lock every 5 s; after 10 s without, start-up would take it over.
      await until(async () => (await runCli(['status', '--config', config, '--json'], ctx.env)).stdout.includes('"lock": "held_unresponsive"'), 20_000);
      const text = await runCli(['status', '--config', config], ctx.env);
      expect(text.code, text.stdout).toBe(3);
      expect(text.stdout).toContain(`owner: pid ${server.pid} (host `);
      expect(text.stdout).toMatch(
        /: alive but unresponsive \(pid running but lock not refreshed for 10 s: the owner is stopped \(SIGSTOP\) or hung\); it still holds the state directory$/m,
      );
      expect(text.stdout).toMatch(
        new RegExp(`^unresponsive: 0 live and 0 queued turn\\(s\\), and the owner, pid ${server.pid}, does not keep its lock fresh`, 'm'),
      );
      const backups = privateDir('droid-mcp-status-backups-');
      const made = await runCli(['backup', '--config', config, '--to', backups], ctx.env);
      expect(made.stderr).toContain(`the server, pid ${server.pid}, alive but unresponsive (`);
      expect(made.code).toBe(3);
      expect(readdirSync(backups)).toEqual([]);
      const doctor = await runCli(['doctor', '--config', config], ctx.env);
      expect(doctor.stdout).toMatch(
        new RegExp(`^warn +state directory +\\S+ is private and held by pid ${server.pid} \\(started \\S+\\), alive but unresponsive \\(`, 'm'),
      );
      rmSync(backups, { recursive: true, force: true });
    } finally {
      process.kill(server.pid, 'SIGCONT');
    }
  });
});
