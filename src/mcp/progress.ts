/**
 * MCP progress for droid_wait_for_sessions: when the call carries a progress
 * token, `notifications/progress` goes out when the wait begins, whenever a
 * session settles, and at least every PROGRESS_INTERVAL_MS while it waits,
 * saying which sessions still work and their latest progress text.
 *
 * `progress` is the seconds waited so far (strictly increasing, as the MCP
 * spec requires) out of `total` = timeoutSeconds; the message carries the
 * sessions. Over HTTP (JSON responses, no SSE) the transport drops them.
 */
import type { SessionController } from '../controller/controller.js';
import type { SessionView } from '../controller/sessions/views.js';
import { tokensOf } from '../shared/budget.js';

const PROGRESS_INTERVAL_MS = 3_000;
const DETAIL_CHARS = 120;

export interface ProgressUpdate {
  progress: number;
  total?: number;
  message?: string;
}

/** Sends one progress notification; failures are the transport's business. */
export type ProgressSink = (update: ProgressUpdate) => void;

export type WaitingController = Pick<SessionController, 'waitForSessions' | 'status' | 'onChange' | 'liveText'>;

/**
 * One line about the sessions waited on: how many settled, and what each
 * working one is doing: the tail of the text it is streaming, else its latest
 * progress event, with its usage so far when droid reported any.
 */
export function describeWait(views: readonly SessionView[], liveText: (runId: string) => string | undefined = () => undefined): string {
  const working = views.filter((v) => v.agentState === 'working');
  const head = `${views.length - working.length} of ${views.length} settled`;
  if (working.length === 0) return head;
  const parts = working.map((v) => {
    const streaming = liveText(v.latestRun.run)?.replace(/\s+/g, ' ').trim();
    let text: string;
    if (streaming) text = streaming.length > DETAIL_CHARS ? `…${streaming.slice(-DETAIL_CHARS)}` : streaming;
    else {
      const latest = v.latestRun.events.at(-1)?.detail.replace(/\s+/g, ' ').trim() ?? '';
      text = latest.length > DETAIL_CHARS ? `${latest.slice(0, DETAIL_CHARS)}…` : latest;
    }
    const usage = v.latestRun.usage;
    const spent = usage && !usage.final ? ` (${tokensOf(usage)} tokens${usage.factoryCredits !== null ? `, ${usage.factoryCredits} credits` : ''} so far)` : '';
    return `${v.session.slice(0, 8)} ${v.latestRun.state}${spent}${text ? `: ${text}` : ''}`;
  });
  return `${head}; working: ${parts.join('; ')}`;
}

export async function waitWithProgress(
  controller: WaitingController,
  sessions: readonly string[],
  timeoutSeconds: number,
  signal: AbortSignal | undefined,
  send: ProgressSink,
  intervalMs = PROGRESS_INTERVAL_MS,
): Promise<Awaited<ReturnType<SessionController['waitForSessions']>>> {
  const ids = [...new Set(sessions)];
  const began = Date.now();
  let last = 0;
  let settledSeen: Set<string> | null = null;
  const report = (always: boolean) => {
    let views: SessionView[];
    try {
      views = ids.map((id) => controller.status(id));
    } catch {
      return; // an unknown handle: the wait itself rejects with the reason
    }
    const settled = new Set(views.filter((v) => v.agentState !== 'working').map((v) => v.session));
    const newlySettled = settledSeen === null || [...settled].some((id) => !settledSeen!.has(id));
    settledSeen = settled;
    if (!always && !newlySettled) return;
    last = Math.max((Date.now() - began) / 1000, last + 0.001);
    send({ progress: Math.round(last * 1000) / 1000, total: timeoutSeconds, message: describeWait(views, (run) => controller.liveText(run)) });
  };
  const waiting = controller.waitForSessions(ids, timeoutSeconds, signal);
  let done = false;
  void waiting.then(
    () => (done = true),
    () => (done = true),
  );
  // Only a wait that actually waits reports: a settled one answers at once.
  await Promise.resolve();
  if (done) return waiting;
  report(true);
  const unsubscribe = controller.onChange(() => report(false));
  const timer = setInterval(() => report(true), intervalMs);
  try {
    return await waiting;
  } finally {
    unsubscribe();
    clearInterval(timer);
  }
}
