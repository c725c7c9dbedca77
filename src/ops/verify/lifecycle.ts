/**
 * `droid-mcp smoke` and `droid-mcp verify-live`: the session lifecycle both
 * prove through MCP over stdio, against the caller's droid login, with
 * disposable private state: two exact results in one session (create, then a
 * follow-up that resumes the same droid session) and, for verify-live, the
 * cancellation of a third turn under a hard --timeout, then process cleanup.
 * verify-live only ever uses (and removes) a state directory it created.
 * Output is assertions and versions only.
 */
import { randomUUID } from 'node:crypto';
import { command } from '../command.js';
import {
  droidSessionIdsIn,
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

async function lifecycle(title: string, options: VerifyOptions, cancelThird: boolean): Promise<number> {
  const report = new Report(title);
  const checks = { stopped: 'no process of this run is left running', removed: 'the disposable state directory this run created is removed' };
  return onDisposableInstance(report, options, 'stdio', checks, async (instance) => {
    const { mcp } = instance;
    report.check(true, 'server started over stdio with a disposable private state directory');
    const models = await mcp.ok<{ models: Array<{ id: string }> }>('droid_models');
    if (
      !report.check(
        models.models.some((m) => m.id === options.model),
        `model ${options.model} is in the live catalog`,
        'pick one from droid_models',
      )
    )
      return;

    const first = exactPrompt('FIRST');
    const created = await mcp.ok<{ metadata: { session: string } }>('droid_create_session', {
      requestKey: `verify-${randomUUID()}`,
      workspace: options.workspace,
      prompt: first.prompt,
      replyTo: null,
      autonomy: options.autonomy,
    });
    const session = created.metadata.session;
    const one = await settle(mcp, session);
    report.check(
      one.state === 'succeeded' && exact(one.preview, first.expected),
      'turn 1 (droid_create_session) succeeded with the exact reply',
      `run ${one.state}${one.errorCode ? ` ${one.errorCode}` : ''}${one.state === 'succeeded' ? ', reply differs' : ''}`,
    );

    const second = exactPrompt('SECOND');
    await mcp.ok('droid_send_message', { requestKey: `verify-${randomUUID()}`, session, prompt: second.prompt });
    const two = await settle(mcp, session);
    report.check(
      two.state === 'succeeded' && exact(two.preview, second.expected),
      'turn 2 (droid_send_message, same session) succeeded with the exact reply',
      `run ${two.state}${two.errorCode ? ` ${two.errorCode}` : ''}${two.state === 'succeeded' ? ', reply differs' : ''}`,
    );
    const ids = droidSessionIdsIn(instance.stateDir);
    report.check(ids.size === 1, "turn 2 resumed turn 1's droid session (one droid session id recorded, not shown)", `${ids.size} droid session ids recorded`);

    if (!cancelThird) return;
    await mcp.ok('droid_send_message', { requestKey: `verify-${randomUUID()}`, session, prompt: SLOW_PROMPT });
    const reached = await untilRunning(mcp, session);
    const cancelled = await mcp.ok<{ status: { latestRun: { state: string } } }>('droid_cancel_session', { session });
    const three = await settle(mcp, session);
    report.check(
      reached === 'running' &&
        ['cancelling', 'interrupted', 'cancelled'].includes(cancelled.status.latestRun.state) &&
        (three.state === 'interrupted' || three.state === 'cancelled'),
      'turn 3 reached droid and droid_cancel_session stopped it (interrupted)',
      `reached ${reached}, cancel answered ${cancelled.status.latestRun.state}, ended ${three.state}`,
    );
  });
}

export const smokeCommand = command({
  usage: ['--droid /abs/droid --model ID --workspace /abs/approved/dir', '[--reasoning low] [--autonomy low] [--no-sandbox] [--timeout 300]'],
  summary: ['a two-turn session lifecycle through MCP against your', 'droid login, with disposable private state'],
  options: SHARED_ARGS,
  run: (values) => lifecycle('smoke', verifyOptions(values), false),
});

export const verifyLiveCommand = command({
  usage: [
    '--droid /abs/droid --model ID --workspace /abs/approved/dir',
    '[--reasoning low] [--autonomy low] [--state /abs/new/dir]',
    '[--no-sandbox] [--timeout 300]',
  ],
  summary: ['smoke, then a cancelled third turn and process cleanup,', 'under a hard --timeout'],
  options: SHARED_ARGS,
  run: (values) => lifecycle('verify-live', verifyOptions(values), true),
});
