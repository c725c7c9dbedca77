/**
 * What a routed turn is told about reporting back, in front of the caller's
 * prompt. Pure. Like the prompt itself it is never stored: it travels to the
 * worker once and only its effect (what the model sent) is observed.
 *
 * Wording is guidance, not enforcement: the permission gate (reply-gate.ts)
 * refuses whatever the model does beyond it, at every autonomy level.
 */
import { PUCK_LLM_ID } from '../../droid/amp-tools.js';

export interface ReplyPromptContext {
  /** The conversation this session reports to. */
  replyTo: string;
  /** The controller's public handles (never droid's own session id). */
  session: string;
  run: string;
  /** Spec mode (autonomy off): reporting is still allowed and expected. */
  specMode: boolean;
}

/** Most read_reply calls the model is told to make for one send. */
const MAX_REPLY_READS = 6;

export function replyPrompt(c: ReplyPromptContext): string {
  const send = JSON.stringify({ action: 'send', params: { conversationID: c.replyTo, message: '…' } });
  const read = JSON.stringify({ action: 'read_reply', params: { replyHandle: '<replyHandle returned by that send>' } });
  return [
    '<reply-back>',
    `An Amp conversation delegated this work and can hear from you, only through the tool ${PUCK_LLM_ID} (if it is not in your tool list, load it with ToolSearch "select:${PUCK_LLM_ID}").`,
    `- Recipient: conversation ${c.replyTo}. Use exactly this conversationID; any other is refused.`,
    `- Your handles: session ${c.session}, run ${c.run}. Name both in every message.`,
    `- To send: ${send}`,
    `- To read the answer to a send: ${read}`,
    'Rules:',
    '1. Progress: report at most once, briefly, and keep doing the work you are allowed to do; never wait for an answer to a progress report.',
    '2. A real question, a blocker, or a costly or irreversible step you want steered: send ONE message that starts with CHECKPOINT and gives the recipient, your session and run handles, a short marker for it (e.g. Q1), the evidence so far, the action you propose, and the exact decision you need.',
    `3. If the send result already holds the answer, use it. Otherwise call read_reply with the replyHandle that exact send returned, at most ${MAX_REPLY_READS} times while you keep working. Never another handle, never empty params, never send the question again (not after a timeout, not after an unclear error).`,
    `4. No answer after ${MAX_REPLY_READS} reads: leave the dependent step undone and end your turn with a message that starts with BLOCKED and gives the marker, the decision needed and the replyHandle.`,
    '5. Accepted, queued, working or silence is not an answer. An answer only settles the question you asked, within what you were already allowed to do.',
    c.specMode
      ? '6. You are in Spec mode: call the tool directly. Do not leave Spec mode to send a message, and do not guess answers to your own questions.'
      : '6. Do not guess answers to your own questions.',
    '</reply-back>',
    '',
  ].join('\n');
}
