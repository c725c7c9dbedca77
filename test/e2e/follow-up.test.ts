/**
 * The loop every caller runs: wait until the session is idle, then send at
 * once (issue 38). The previous turn's droid is still closing and its group
 * still holds the claim then; the follow-up's droid starts meanwhile, on the
 * launch the follow-up gets (worker/parent/prestart.ts), and the follow-up
 * uses that droid once the claim is free and the session's files are back.
 * Default sandbox (bwrap), with the warm pool and without it (a cold worker).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { messageText, script } from '../../src/testbed/scripted-model.js';
import type { RunningServer } from '../support/mcp-server.js';
import { waitForNoProcesses } from '../support/processes.js';
import { makeContext, type E2EContext } from './context.js';

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
afterEach(async () => {
  await server?.close();
  server = undefined;
  // An early droid, used or not, is gone with its turn or its server.
  await waitForNoProcesses(TAG, 15_000);
});
afterAll(async () => {
  await ctx?.cleanup();
});

interface Accepted {
  metadata: { session: string; run: string };
  admission?: { action: string };
}

/** The logged start of `run`: each stage in ms after the controller took the turn. */
function loggedStart(run: string): Record<string, number> {
  const line = server!
    .stderr()
    .split('\n')
    .find((l) => l.includes('"msg":"turn running') && l.includes(run));
  if (!line) throw new Error(`no start logged for ${run}`);
  return (JSON.parse(line) as { start: { ms: Record<string, number> } }).start.ms;
}

describe('a follow-up sent the moment wait returns', () => {
  for (const warmPoolSize of [1, 0]) {
    it(`runs on the droid started while the previous turn's group went, with the session's history (warm pool ${warmPoolSize})`, async () => {
      server = await ctx.start({ warmPoolSize });
      const workspace = ctx.workspace(`follow-${warmPoolSize}`);
      const first = `first-${warmPoolSize}-${Date.now()}`;
      const created = await server.ok<Accepted>('droid_create_session', { requestKey: `c-${first}`, replyTo: null, workspace, autonomy: 'off', title: `Follow ${warmPoolSize}`, prompt: `${first} ${script({ text: 'first done' })}` });
      const session = created.metadata.session;
      await server.ok('droid_wait_for_sessions', { sessions: [session], timeoutSeconds: 60 });
      const second = `second-${warmPoolSize}-${Date.now()}`;
      const sent = await server.ok<Accepted>('droid_send_message', { requestKey: `s-${second}`, session, prompt: `${second} ${script({ text: 'second done' })}` });
      // It waited for the previous turn's claim, which was held while the title was being applied.
      expect(sent.admission?.action).toBe('queued');
      await server.ok('droid_wait_for_sessions', { sessions: [session], timeoutSeconds: 60 });
      const status = (await server.ok<{ status: { latestRun: { state: string }; preview: string } }>('droid_get_session_status', { session })).status;
      expect(status.latestRun).toMatchObject({ state: 'succeeded' });
      expect(status.preview).toBe('second done');
      // The droid it ran on was spawned before its worker had its run: the one started while it waited.
      const start = loggedStart(sent.metadata.run);
      expect(start.droid_spawned).toBeLessThan(start.run_received!);
      // That droid loaded the session as the first turn left it (its files were put in after the copy-back).
      const request = ctx.bed.model.requests.find((r) => r.messages.some((m) => m.role === 'user' && messageText(m).includes(second)));
      expect(request!.messages.some((m) => m.role === 'user' && messageText(m).includes(first))).toBe(true);
    });
  }
});
