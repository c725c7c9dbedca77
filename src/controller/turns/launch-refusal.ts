/**
 * What stops an admitted turn before anything is submitted: its workspace
 * moved, reply-back gone for a routed session, the sandbox unusable (or off
 * for a model-only session), the budget spent, its checkout not made, or a
 * fork point or rewind target gone since the acceptance (issue 40).
 * Read-only.
 */
import { SANDBOX_ACTION } from '../../sandbox/sandbox.js';
import { ControllerError } from '../../shared/public-error.js';
import type { ErrorInfo, RunRecord } from '../../shared/records.js';
import type { TurnSpec } from '../../worker/contract/protocol.js';
import { sessionStart } from './session-start.js';
import { resolvedWorkspace } from '../../worktree/plan.js';
import { budgetAtLaunch } from '../budget/turn-limit.js';
import { workspaceChanged, type ControllerDeps, type ControllerState } from '../controller-state.js';

type RefusalDeps = Pick<ControllerDeps, 'resolveWorkspace' | 'ampMcpUrl' | 'sandbox' | 'sandboxUnavailable' | 'ceilings'>;

/** Why an admitted turn may not start at all (nothing is submitted then), or null. */
export async function launchRefusal(state: ControllerState, deps: RefusalDeps, runId: string): Promise<ErrorInfo | null> {
  const run = state.run(runId);
  const session = state.session(run.sessionId);
  // The workspace may have changed since acceptance (a symlink swapped in).
  const workspace = resolvedWorkspace(session);
  const moved = await deps.resolveWorkspace(workspace).then(
    (resolved) => (resolved === workspace ? null : workspaceChanged().toPublic()),
    (err: unknown) => (err instanceof ControllerError ? err.toPublic() : workspaceChanged().toPublic()),
  );
  if (moved) return { code: moved.code, message: `${moved.message} Nothing was submitted.`, retryable: false };
  // A routed session never runs unrouted because the host stopped offering reply-back.
  if (session.replyTo !== null && deps.ampMcpUrl === null) {
    const message =
      'this session reports back to a conversation but reply-back is no longer configured on this host; nothing was submitted. Send with replyTo: null to detach it, or have the operator set "ampMcp" again';
    return { code: 'reply_back_unavailable', message, retryable: false };
  }
  // Never a silent fallback to an unconfined droid.
  if (deps.sandboxUnavailable !== null) {
    const message = `the configured sandbox cannot run (${deps.sandboxUnavailable}); nothing was submitted. ${SANDBOX_ACTION}`;
    return { code: 'sandbox_unavailable', message, retryable: false };
  }
  // A session that asked for the model endpoints only (issue 37) never runs with the host's whole network, on a host since set to "sandbox": "off".
  if (session.network === 'model-only' && deps.sandbox.mode !== 'bwrap') {
    const message =
      'this session reaches only the model endpoints (network "model-only"), which needs the turn sandbox, and this host now runs turns without one ("sandbox": "off"); nothing was submitted';
    return { code: 'network_unavailable', message, retryable: false };
  }
  return budgetAtLaunch(state, run, deps.ceilings).refused ?? null;
}

/** A checkout that could not be made, as the run's error. */
export function checkoutFailure(err: unknown): ErrorInfo {
  return err instanceof ControllerError
    ? { code: err.code, message: err.message, retryable: err.retryable }
    : { code: 'checkout_failed', message: String(err), retryable: false };
}

/**
 * How the turn opens droid's session (session-start.ts), judged on the
 * records as they are at launch; a fork point or rewind target that turns
 * since the acceptance took away is the run's error.
 */
export function launchSession(state: ControllerState, run: RunRecord, autoCompactAt: number | null): { start: TurnSpec['session'] } | { refused: ErrorInfo } {
  const session = state.session(run.sessionId);
  const forkOf = session.droidSessionId === null ? session.forkOf : undefined;
  const source = forkOf && { session: state.session(forkOf.sessionId), runs: state.store.runsBySession(forkOf.sessionId) };
  try {
    return { start: sessionStart({ session, run, runs: state.store.runsBySession(session.id), ...(source && { source }), autoCompactAt }) };
  } catch (err) {
    if (err instanceof ControllerError) return { refused: { code: err.code, message: `${err.message}; nothing was submitted`, retryable: err.retryable } };
    throw err;
  }
}
