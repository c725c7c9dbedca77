/**
 * `droid-mcp acceptance`: starts a second instance of the built server over HTTP
 * (its own free port, new token and disposable state directory: never a
 * production one), drives it through every tool the way a remote agent
 * would, and prints `N passed, M failed`. Output is assertions and versions
 * only. Exit status 1 when any check failed.
 */
import { randomUUID } from 'node:crypto';
import { dirname } from 'node:path';
import type { PublicError } from '../../shared/public-error.js';
import type { McpDriver, ToolOutcome } from '../../testbed/mcp-driver.js';
import { command } from '../command.js';
import {
  exact,
  exactPrompt,
  onDisposableInstance,
  Report,
  settle,
  SHARED_ARGS,
  SLOW_PROMPT,
  untilRunning,
  verifyOptions,
  type VerifyOptions,
} from './verify.js';

const TOOLS = [
  'droid_create_session',
  'droid_send_message',
  'droid_get_session_status',
  'droid_wait_for_sessions',
  'droid_read_session',
  'droid_find_sessions',
  'droid_update_session',
  'droid_get_usage',
  'droid_cancel_session',
  'droid_list_workspaces',
  'droid_models',
];

function isRejection(outcome: ToolOutcome, code: string): boolean {
  const error = outcome.isError ? (outcome.structured.error as PublicError | undefined) : undefined;
  return error?.code === code && typeof error.message === 'string' && typeof error.retryable === 'boolean' && error.action.length > 0;
}

async function acceptance(options: VerifyOptions): Promise<number> {
  const report = new Report('acceptance');
  const checks = { stopped: 'the second instance stopped and no process of it is left', removed: 'its disposable state directory and token are removed' };
  return onDisposableInstance(report, options, 'http', checks, async (instance) => {
    report.check(true, 'a second instance is serving HTTP on its own port with its own token and state directory');

    const mcp: McpDriver = instance.mcp;
    await checkDoor(report, options, instance.url!, mcp);
    const session = await checkFirstTurn(report, options, mcp);
    await checkLaterTurns(report, mcp, session);
  });
}

/** Nothing without the right token reaches a tool; the tools, workspaces and models are as configured; outside the root is refused. */
async function checkDoor(report: Report, options: VerifyOptions, url: string, mcp: McpDriver): Promise<void> {
  const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} });
  const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
  const anonymous = await fetch(url, { method: 'POST', headers, body });
  const wrong = await fetch(url, { method: 'POST', headers: { ...headers, authorization: `Bearer ${'x'.repeat(43)}` }, body });
  report.check(
    anonymous.status === 401 && wrong.status === 401,
    'requests without the token, or with a wrong one, get HTTP 401',
    `${anonymous.status}, ${wrong.status}`,
  );

  const tools = await mcp.listTools();
  report.check(
    tools.length === TOOLS.length && TOOLS.every((t) => tools.includes(t)),
    `tools/list offers exactly the ${TOOLS.length} session tools`,
    tools.join(', '),
  );

  const ws = await mcp.ok<{ workspaces: string[]; capacity: { maximum: number }; policy: { defaultModel: string | null } }>('droid_list_workspaces');
  report.check(
    ws.workspaces.includes(options.workspace) && ws.capacity.maximum >= 1 && ws.policy.defaultModel === options.model,
    'droid_list_workspaces shows the approved root, capacity and default model',
  );
  const models = await mcp.ok<{ models: Array<{ id: string }> }>('droid_models');
  report.check(
    models.models.some((m) => m.id === options.model),
    `droid_models lists ${options.model}`,
  );

  // The approved root's parent exists and lies outside it (the instance approves the workspace only).
  const outside = await mcp.call('droid_create_session', {
    requestKey: `acc-${randomUUID()}`,
    workspace: dirname(options.workspace),
    prompt: 'never runs',
    replyTo: null,
  });
  report.check(isRejection(outside, 'workspace_not_approved'), 'a workspace outside the approved root is refused (workspace_not_approved, with an action)');
}

/** A create runs to the exact reply, replays under its key, and reads back without its prompt; returns the session. */
async function checkFirstTurn(report: Report, options: VerifyOptions, mcp: McpDriver): Promise<string> {
  const first = exactPrompt('ACCEPT');
  const key = `acc-${randomUUID()}`;
  const args = {
    requestKey: key,
    workspace: options.workspace,
    prompt: first.prompt,
    replyTo: null,
    autonomy: options.autonomy,
    title: 'Acceptance run',
    labels: ['acceptance'],
  };
  const created = await mcp.ok<{ metadata: { session: string; replayed: boolean }; admission: { action: string } }>('droid_create_session', args);
  const session = created.metadata.session;
  report.check(
    ['started', 'queued'].includes(created.admission.action) && !created.metadata.replayed,
    `droid_create_session accepted the turn (${created.admission.action})`,
  );
  const replay = await mcp.ok<{ metadata: { session: string; replayed: boolean } }>('droid_create_session', args);
  const conflict = await mcp.call('droid_create_session', { ...args, prompt: `${first.prompt} (changed)` });
  report.check(
    replay.metadata.replayed && replay.metadata.session === session && isRejection(conflict, 'request_key_conflict'),
    'the same requestKey replays; a different request under it is request_key_conflict',
  );

  const one = await settle(mcp, session);
  report.check(
    one.state === 'succeeded' && exact(one.preview, first.expected),
    'droid_wait_for_sessions: the turn succeeded with the exact reply',
    `${one.state}${one.errorCode ? ` ${one.errorCode}` : ''}`,
  );
  const status = await mcp.ok<{ status: { agentState: string; title: string | null; labels: string[]; latestRun: { state: string } } }>(
    'droid_get_session_status',
    { session },
  );
  report.check(
    status.status.agentState === 'idle' && status.status.latestRun.state === 'succeeded' && status.status.title === 'Acceptance run',
    'droid_get_session_status: idle, succeeded, titled',
  );
  const history = await mcp.ok<{ items: Array<{ type: string; text?: string }> }>('droid_read_session', { session });
  report.check(
    history.items.some((i) => i.type === 'assistant_text' && exact(i.text ?? '', first.expected)),
    'droid_read_session returns the reply in the history',
  );
  report.check(!JSON.stringify(history).includes(first.prompt), 'the history holds no prompt');
  return session;
}

/** A follow-up, find and update, a cancel mid-turn, and the usage of all three turns. */
async function checkLaterTurns(report: Report, mcp: McpDriver, session: string): Promise<void> {
  const second = exactPrompt('FOLLOW');
  const sent = await mcp.ok<{ admission: { action: string } }>('droid_send_message', { requestKey: `acc-${randomUUID()}`, session, prompt: second.prompt });
  const two = await settle(mcp, session);
  report.check(
    two.state === 'succeeded' && exact(two.preview, second.expected),
    `droid_send_message: the follow-up (${sent.admission.action}) succeeded with the exact reply`,
    `${two.state}${two.errorCode ? ` ${two.errorCode}` : ''}`,
  );

  const found = await mcp.ok<{ sessions: Array<{ session: string }> }>('droid_find_sessions', { query: 'acceptance run', labels: ['acceptance'] });
  report.check(
    found.sessions.some((s) => s.session === session),
    'droid_find_sessions finds it by title and label',
  );
  const updated = await mcp.ok<{ status: { title: string | null; labels: string[] } }>('droid_update_session', {
    session,
    title: 'Acceptance run, renamed',
    labels: { add: ['checked'] },
  });
  report.check(
    updated.status.title === 'Acceptance run, renamed' && updated.status.labels.includes('checked'),
    'droid_update_session changes title and labels',
  );

  await mcp.ok('droid_send_message', { requestKey: `acc-${randomUUID()}`, session, prompt: SLOW_PROMPT });
  const reached = await untilRunning(mcp, session);
  await mcp.ok('droid_cancel_session', { session });
  const three = await settle(mcp, session);
  report.check(
    reached === 'running' && (three.state === 'interrupted' || three.state === 'cancelled'),
    'droid_cancel_session stops a running turn',
    `reached ${reached}, ended ${three.state}`,
  );

  const usage = await mcp.ok<{ turns: number }>('droid_get_usage', { session });
  report.check(usage.turns === 3, 'droid_get_usage counts the three turns of the session', `${usage.turns} turns`);
  const unknown = await mcp.call('droid_get_session_status', { session: randomUUID() });
  report.check(isRejection(unknown, 'session_not_found'), 'an unknown session handle is session_not_found, with an action');
}

export const acceptanceCommand = command({
  usage: [
    '--droid /abs/droid --model ID --workspace /abs/approved/dir',
    '[--reasoning low] [--autonomy low] [--state /abs/new/dir]',
    '[--no-sandbox] [--timeout 600]',
  ],
  summary: ['a second instance over HTTP (its own port, token and', 'state), driven through every tool: N passed, M failed'],
  options: SHARED_ARGS,
  run: (values) => acceptance(verifyOptions(values, 600)),
});
