/**
 * The loop every caller runs: wait until the session is idle, then send at
 * once (issue 38). The follow-up's droid was booted while the previous turn
 * ran, on the launch the follow-up gets (controller/turns/next-turn-droids.ts), and
 * the follow-up uses that droid once the claim is free and the session's
 * files are back. Default sandbox (bwrap), with the warm pool and without
 * it (a cold worker).
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { sessionFolderName } from '../../../src/sandbox/session-copy.js';
import { privateTmpRoot } from '../../../src/sandbox/turn-paths.js';
import { messageText, script } from '../../../src/testbed/scripted-model.js';
import type { RunningServer } from '../../support/mcp-server.js';
import { waitForNoProcesses } from '../../support/processes.js';
import { makeContext, type E2EContext } from '../../support/e2e-context.js';

let ctx: E2EContext;
let server: RunningServer | undefined;
const TAG = `e2e-follow-${process.pid}-${Date.now()}`;

beforeAll(async () => {
  ctx = await makeContext(TAG);
  // droid's default, on a host that cannot reach Factory: a title rename after a turn then waits on sync retries, so the
  // previous turn surely still holds the claim when the follow-up comes (which skips that rename), whatever the host's speed.
  const path = join(ctx.bed.home.dir, '.factory', 'settings.json');
  writeFileSync(path, JSON.stringify({ ...(JSON.parse(readFileSync(path, 'utf8')) as object), cloudSessionSync: true }));
});
/** The workspaces this file's sessions ran in. */
const workspaces: string[] = [];

/** Private sessions copies (this file's workspaces') still in the private temp root. */
function copiesLeft(): string[] {
  const root = privateTmpRoot();
  const ours = new Set(workspaces.map(sessionFolderName));
  return readdirSync(root).filter((name) => name.startsWith('sessions-') && readdirSync(join(root, name)).some((entry) => ours.has(entry)));
}

afterEach(async () => {
  await server?.close();
  server = undefined;
  // A droid booted for a next turn, used or not, is gone with its turn or its server, and so are its folders.
  await waitForNoProcesses(TAG, 15_000);
  expect(copiesLeft()).toEqual([]);
});
afterAll(async () => {
  await ctx?.cleanup();
});

interface Accepted {
  metadata: { session: string; run: string };
  admission?: { action: string };
}

/** The logged start of `run`: when the controller took the turn (epoch ms), and each stage in ms after that. */
function loggedStart(run: string): { at: number; ms: Record<string, number> } {
  const line = server!
    .stderr()
    .split('\n')
    .find((l) => l.includes('"msg":"turn running') && l.includes(run));
  if (!line) throw new Error(`no start logged for ${run}`);
  return (JSON.parse(line) as { start: { at: number; ms: Record<string, number> } }).start;
}

describe('a follow-up sent the moment wait returns', () => {
  for (const warmPoolSize of [1, 0]) {
    it(`runs on the droid booted while the previous turn ran, with the session's history (warm pool ${warmPoolSize})`, async () => {
      server = await ctx.start({ warmPoolSize });
      const workspace = ctx.workspace(`follow-${warmPoolSize}`);
      workspaces.push(workspace);
      // The model takes a second over its answer, as models do: the next turn's droid boots meanwhile.
      const first = `first-${warmPoolSize}-${Date.now()}`;
      const created = await server.ok<Accepted>('droid_create_session', {
        requestKey: `c-${first}`,
        replyTo: null,
        workspace,
        autonomy: 'off',
        title: `Follow ${warmPoolSize}`,
        prompt: `${first} ${script({ text: 'first done', slowMs: 1_000 })}`,
      });
      const session = created.metadata.session;
      await server.ok('droid_wait_for_sessions', { sessions: [session], timeoutSeconds: 60 });
      const second = `second-${warmPoolSize}-${Date.now()}`;
      const sentAt = Date.now();
      const sent = await server.ok<Accepted>('droid_send_message', {
        requestKey: `s-${second}`,
        session,
        prompt: `${second} ${script({ text: 'second done' })}`,
      });
      // It waited for the previous turn's claim, which was held while the title was being applied.
      expect(sent.admission?.action).toBe('queued');
      await server.ok('droid_wait_for_sessions', { sessions: [session], timeoutSeconds: 60 });
      const status = (await server.ok<{ status: { latestRun: { state: string }; preview: string } }>('droid_get_session_status', { session })).status;
      expect(status.latestRun).toMatchObject({ state: 'succeeded' });
      expect(status.preview).toBe('second done');
      // The droid it ran on was spawned before the follow-up was sent: the one booted while the first turn ran.
      const start = loggedStart(sent.metadata.run);
      expect(start.at + start.ms.droid_spawned!).toBeLessThan(sentAt);
      // That droid loaded the session as the first turn left it (its files were put in after the copy-back).
      const request = ctx.bed.model.requests.find((r) => r.messages.some((m) => m.role === 'user' && messageText(m).includes(second)));
      expect(request!.messages.some((m) => m.role === 'user' && messageText(m).includes(first))).toBe(true);
    });
  }

  it("a turn's commands can neither see nor reach the droid booted beside them for the session's next turn, nor its folders", async () => {
    server = await ctx.start({});
    const workspace = ctx.workspace('follow-hostile');
    workspaces.push(workspace);
    // Run once the next turn's droid is booting (it starts when this turn's droid has started): what of it can the turn find?
    const attack = [
      'sleep 2',
      'root="$(dirname "$TMPDIR")"',
      'ls -A "$root" | sed "s/^/ENTRY=/"',
      'for d in "$root"/sessions-* "$root"/turn-*; do [ "$d" = "$TMPDIR" ] && continue; touch "$d/planted" 2>/dev/null && echo "PLANTED=$d"; done',
      'ps -eo comm= | sed "s/^/PROC=/"',
    ].join('; ');
    const created = await server.ok<Accepted>('droid_create_session', {
      requestKey: `c-hostile-${Date.now()}`,
      replyTo: null,
      workspace,
      autonomy: 'high',
      prompt: `look around ${script({ tool: { name: 'Execute', arguments: { command: attack, riskLevel: 'low', riskLevelReason: 'test' } } })}`,
    });
    const session = created.metadata.session;
    await server.ok('droid_wait_for_sessions', { sessions: [session], timeoutSeconds: 60 });
    const seen = (await server.ok<{ status: { preview: string } }>('droid_get_session_status', { session })).status.preview;
    const sentAt = Date.now();
    const sent = await server.ok<Accepted>('droid_send_message', {
      requestKey: `s-hostile-${Date.now()}`,
      session,
      prompt: `next ${script({ text: 'next done' })}`,
    });
    await server.ok('droid_wait_for_sessions', { sessions: [session], timeoutSeconds: 60 });
    // The droid was there while the commands ran: the follow-up ran on it.
    const start = loggedStart(sent.metadata.run);
    expect(start.at + start.ms.droid_spawned!).toBeLessThan(sentAt - 1_000);
    // The private temp root shows the turn its own TMPDIR only; nothing was planted; only the turn's own droid is visible.
    expect(seen.match(/ENTRY=\S+/g)).toHaveLength(1);
    expect(seen).not.toContain(sent.metadata.run);
    expect(seen).not.toContain('PLANTED=');
    expect((seen.match(/PROC=droid/g) ?? []).length).toBeLessThanOrEqual(1);
    expect(seen).toContain('PROC=');
  });
});
