/**
 * Shared pieces of the fault campaign: the public shapes the tools return,
 * waiting for a process to die, finding processes by a command-line marker,
 * and counting what reached the scripted model.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { messageText } from '../../src/testbed/scripted-model.js';
import type { RecordedRequest } from '../../src/testbed/model-server.js';
import type { RunningServer } from './mcp-server.js';
import type { SessionView } from './tool-views.js';

export type { Acceptance, RunView, SessionView } from './tool-views.js';
export interface HistoryItem {
  type: string;
  run: string;
  kind?: string;
  detail?: string;
  text?: string;
}

export async function until(predicate: () => boolean | Promise<boolean>, ms = 20_000, what = 'condition'): Promise<void> {
  const end = Date.now() + ms;
  while (!(await predicate())) {
    if (Date.now() > end) throw new Error(`${what} not met within ${ms} ms`);
    await sleep(25);
  }
}

/** Whether `pid` is a live (non-zombie) process. */
function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state !== 'Z' && state !== 'X';
  } catch {
    return false;
  }
}

export async function waitForDeath(pid: number, ms: number): Promise<void> {
  await until(() => !alive(pid), ms, `death of process ${pid}`);
}

/** Live processes whose command line contains `marker` (e.g. a `sleep 61.<nonce>` run through droid's Execute tool). */
export function pidsWithCmdline(marker: string): number[] {
  const out: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    try {
      // Arguments are NUL-separated: joined with spaces, `sleep 61.5` matches the process itself too.
      const cmdline = readFileSync(`/proc/${name}/cmdline`, 'latin1').replaceAll('\0', ' ');
      if (cmdline.includes(marker) && alive(Number(name))) out.push(Number(name));
    } catch {
      // gone while we looked
    }
  }
  return out;
}

/**
 * Model requests that open a turn carrying `marker`: a user message holds it
 * and nothing the model or a tool said follows (droid may append its own
 * user-role reminders, e.g. in spec mode). A tool round trip of the same
 * turn does not count again, nor does a later turn's history; a replayed
 * prompt would.
 */
export function turnOpenings(requests: readonly RecordedRequest[], marker: string): number {
  return requests.filter((r) => {
    let at = -1;
    r.messages.forEach((m, i) => m.role === 'user' && messageText(m).includes(marker) && (at = i));
    return at >= 0 && r.messages.slice(at + 1).every((m) => m.role !== 'assistant' && m.role !== 'tool');
  }).length;
}

/** Any request whose messages mention `marker` at all. */
export function mentions(requests: readonly RecordedRequest[], marker: string): number {
  return requests.filter((r) => JSON.stringify(r.messages).includes(marker)).length;
}

export async function status(server: RunningServer, session: string): Promise<SessionView> {
  return (await server.ok<{ status: SessionView }>('droid_get_session_status', { session })).status;
}

export async function history(server: RunningServer, session: string): Promise<HistoryItem[]> {
  const items: HistoryItem[] = [];
  let cursor: string | undefined;
  do {
    const page = await server.ok<{ items: HistoryItem[]; nextCursor: string | null }>('droid_read_session', {
      session,
      limit: 100,
      ...(cursor ? { cursor } : {}),
    });
    items.push(...page.items);
    cursor = page.nextCursor ?? undefined;
  } while (cursor);
  return items;
}

export async function settle(server: RunningServer, sessions: string[], timeoutMs = 120_000): Promise<SessionView[]> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const waited = await server.ok<{ sessions: SessionView[]; timedOut: boolean }>('droid_wait_for_sessions', { sessions, timeoutSeconds: 10 });
    if (!waited.timedOut) return waited.sessions;
    if (Date.now() > end) throw new Error(`sessions still working after ${timeoutMs} ms: ${JSON.stringify(waited.sessions.map((s) => s.latestRun))}`);
  }
}
