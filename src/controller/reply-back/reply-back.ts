/**
 * Reply-back for a live routed turn: the reply gate (reply-gate.ts) asked
 * for each puck call, and what the calls it approved returned, made durable.
 * Called in the serial chain, so each answer is ordered with route changes.
 */
import { TERMINAL_STATES, type RunRecord, type RunReply } from '../../shared/records.js';
import type { ReplyCall, ReplyEvent } from '../../worker/contract/protocol.js';
import type { ControllerState } from '../controller-state.js';
import { decideReplyCall } from './reply-gate.js';
import { provenHandles } from './reply-route.js';
import type { Turn } from '../turns/turn.js';

/** Handles kept per run: a turn is told never to resend, so this is only a bound. */
const MAX_REPLY_HANDLES = 50;

export class ReplyBack {
  constructor(private readonly state: ControllerState) {}

  /**
   * The reply gate for one puck call of a live routed turn, against the
   * session's route as it is now. An approved send is remembered so that
   * only its own result can prove a handle; a misroute is recorded before
   * droid hears no.
   */
  async onCall(turn: Turn, call: ReplyCall): Promise<boolean> {
    const { state } = this;
    // A controller that stops or cannot record state approves nothing.
    if (state.halted || state.stopped) return false;
    const run = state.run(turn.runId);
    if (!run.reply || TERMINAL_STATES.includes(run.state)) return false;
    const session = state.session(run.sessionId);
    const routeId = session.replyRouteId ?? null;
    const verdict = decideReplyCall({ replyTo: session.replyTo, proven: provenHandles(state.store.runsBySession(session.id), routeId) }, call.input);
    state.log.info({ run: run.id, approve: verdict.approve, ...(verdict.approve ? { action: verdict.action } : { code: verdict.code }) }, 'reply gate');
    if (verdict.approve) {
      if (verdict.action === 'send') turn.approveSend(call.toolUseId, routeId!);
      return true;
    }
    if (verdict.code === 'reply_misrouted') {
      await this.recordFailure(run, { code: 'reply_misrouted', message: verdict.reason, retryable: false }).catch((err) =>
        state.log.error({ err, run: run.id }, 'could not record a misrouted report; it was denied'),
      );
    }
    return false;
  }

  /** What an approved send returned, or an Amp tool droid ran unasked: durable at once. */
  async onEvent(turn: Turn, event: ReplyEvent): Promise<void> {
    const run = this.state.run(turn.runId);
    if (!run.reply || TERMINAL_STATES.includes(run.state)) return;
    if (event.kind === 'bypass') {
      const message = `droid ran ${event.tool} without asking, so the reply gate could not judge it; the turn was interrupted`;
      await this.recordFailure(run, { code: 'reply_gate_bypassed', message, retryable: false });
      return;
    }
    // Only the result of a send this gate approved in this turn proves anything.
    const routeId = turn.takeApprovedSend(event.toolUseId);
    if (routeId === undefined) {
      this.state.log.warn({ run: run.id }, 'reply result for a send the gate did not approve in this turn; ignored');
      return;
    }
    if (!event.ok) {
      await this.recordFailure(run, { code: 'reply_send_failed', message: 'a report was sent but droid or Amp returned an error for it', retryable: false });
      return;
    }
    const reply = run.reply;
    const handles = event.handle !== null && reply.handles.length < MAX_REPLY_HANDLES ? [...reply.handles, { handle: event.handle, routeId }] : reply.handles;
    await this.state.commit({ runs: [{ ...run, reply: { ...reply, accepted: reply.accepted + 1, handles } }] });
  }

  /** Keeps the first failure: the one that explains the rest. */
  private async recordFailure(run: RunRecord, failure: NonNullable<RunReply['failure']>): Promise<void> {
    if (!run.reply || run.reply.failure) return;
    await this.state.commit({ runs: [{ ...run, reply: { ...run.reply, failure } }] });
  }
}
