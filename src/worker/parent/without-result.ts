/**
 * The result the runner makes for a worker that exited without reporting
 * one, from what it watched of the turn. Pure.
 */
import { failedResult, stoppedResult, type TurnResult, type TurnSpec } from '../contract/protocol.js';

/** What the runner watched of a turn that the result depends on (runner.ts TurnWatch). */
export interface WatchedExit {
  firedBackstop: 'cancel' | 'deadline' | 'after_result' | null;
  cancelRequested: boolean;
  invalidMessages: number;
  startedSession: string | null;
  powerStarted?: boolean;
  powerSession?: string;
}

/**
 * The result of a worker that exited without reporting one. A stop we forced
 * after asking for a cancel is a cancellation; after the deadline, a timeout;
 * anything else is a worker failure.
 */
export function withoutResult(how: string, watch: WatchedExit, spec: TurnSpec, stderrTail: string): TurnResult {
  const { firedBackstop: backstop, cancelRequested, invalidMessages } = watch;
  // After `started`, the prompt reached droid: the turn may have had effects. An invalid
  // message may have been that `started`, so in doubt the turn counts as submitted.
  const evidence = { submitted: watch.startedSession !== null || invalidMessages > 0, droidSessionId: watch.startedSession, stderrTail };
  // A session power under way (issue 40) may have changed files and droid's session: unknown, whoever stopped the worker.
  if (watch.powerStarted && watch.powerSession === undefined) {
    const message = `the turn's worker exited (${how}) while droid's session power (a fork, rewind or compaction) was under way; what it changed is unknown`;
    return stoppedResult({ kind: 'unconfirmed', error: { code: 'session_power_unconfirmed', message, retryable: false } }, evidence);
  }
  // Killed by our own backstop after we asked it to stop: the stop was ours.
  if (cancelRequested && backstop === 'cancel') return stoppedResult({ kind: 'interrupted', by: 'cancel', end: null, killed: how }, evidence);
  if (backstop === 'deadline') return stoppedResult({ kind: 'interrupted', by: 'deadline', end: null, timeoutMs: spec.timeoutMs, killed: how }, evidence);
  const invalid = invalidMessages ? ` (it sent ${invalidMessages} invalid IPC message(s), see diagnostics)` : '';
  return failedResult({ code: 'worker_failed', message: `the turn's worker exited (${how}) without a valid result${invalid}`, retryable: false }, evidence);
}
