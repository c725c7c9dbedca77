/**
 * Parent side of one worker: forks it as the leader of its own process group,
 * relays its reports, and makes sure the whole group is gone at the end.
 */
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { ProgressEvent } from '../droid/turn-collector.js';
import { parseWorkerMessage } from './ipc.js';
import { emptyFailure, type ParentToWorker, type RenameOutcome, type TurnResult, type TurnSpec } from './protocol.js';
import { TextTail } from '../util/text.js';
import { setTimeout as sleep } from 'node:timers/promises';

export const WORKER_ENTRY = fileURLToPath(new URL('./main.js', import.meta.url));
const GROUP_POLL_MS = 25;
const GROUP_GONE_TIMEOUT_MS = 10_000;
/** Invalid IPC messages kept as diagnostics per turn (all are counted). */
const MAX_IPC_PROBLEMS = 10;

export interface WorkerOptions {
  onStarted?(droidSessionId: string): void;
  onProgress?(event: ProgressEvent): void;
  /** After the result: whether the pending Factory title was applied. */
  onRename?(outcome: RenameOutcome): void;
  /** Environment of the worker process itself (droid gets spec.droidEnv). */
  env?: NodeJS.ProcessEnv;
  workerEntry?: string;
  /** An IPC message from the worker failed validation and was ignored (for the log). */
  onInvalidMessage?(problem: string): void;
}

export interface WorkerHandle {
  readonly pid: number;
  /** The turn's one result; synthesized as `failed` if the worker dies without one. */
  readonly result: Promise<TurnResult>;
  /** Settles when the worker has exited and its process group is gone. */
  readonly cleanedUp: Promise<void>;
  /** Asks for a protocol interrupt; kills the group if the turn does not end within the grace period. */
  cancel(): void;
  /** Tells the worker its result is durable, so it may exit. */
  acknowledge(): void;
}

export function startWorker(spec: TurnSpec, options: WorkerOptions = {}): WorkerHandle {
  const stderr = new TextTail(16_000);
  const child = fork(options.workerEntry ?? WORKER_ENTRY, [], {
    detached: true,
    env: options.env ?? process.env,
    // stdout is never inherited: in stdio mode ours carries MCP frames.
    stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
  });
  child.stderr?.setEncoding('utf8');
  child.stderr?.on('data', (chunk: string) => stderr.push(chunk));
  const pid = child.pid ?? -1;

  let settle!: (result: TurnResult) => void;
  let gotResult = false;
  let startedSession: string | null = null;
  const result = new Promise<TurnResult>((resolve) => (settle = resolve));
  let killTimer: NodeJS.Timeout | undefined;
  const killGroupLater = (ms: number) => {
    if (killTimer) return;
    killTimer = setTimeout(() => killGroup(pid, 'SIGKILL'), ms);
  };

  // Backstop for a worker that ignores its own deadline.
  killGroupLater(spec.timeoutMs + spec.graceMs * 3);

  // Messages cross a process boundary: each is validated, and an invalid one is
  // counted and kept as a diagnostic, never acted on. An invalid `terminal` is
  // not the result: the turn then ends as worker_failed when the worker exits.
  let invalidMessages = 0;
  const ipcProblems: string[] = [];
  const withIpcProblems = (r: TurnResult): TurnResult =>
    ipcProblems.length ? { ...r, diagnostics: [...r.diagnostics, ...ipcProblems] } : r;
  child.on('message', (raw: unknown) => {
    const parsed = parseWorkerMessage(raw);
    if (!parsed.ok) {
      const problem = `ipc_invalid_message #${++invalidMessages} from the worker, ignored: ${parsed.problem}`;
      if (ipcProblems.length < MAX_IPC_PROBLEMS) ipcProblems.push(problem);
      options.onInvalidMessage?.(problem);
      return;
    }
    const message = parsed.message;
    if (message.type === 'started') {
      startedSession = message.droidSessionId;
      options.onStarted?.(message.droidSessionId);
    }
    else if (message.type === 'progress') options.onProgress?.(message.event);
    else if (message.type === 'rename') options.onRename?.(message.outcome);
    else if (message.type === 'terminal' && !gotResult) {
      gotResult = true;
      settle(withIpcProblems(message.result));
    }
  });

  const exited = new Promise<string>((resolve) => {
    child.once('exit', (code, signal) => resolve(signal ? `signal ${signal}` : `code ${code}`));
    child.once('error', (err) => resolve(`spawn error ${err.message}`));
  });

  const cleanedUp = exited.then(async (how) => {
    if (!gotResult) {
      gotResult = true;
      const invalid = invalidMessages ? ` (it sent ${invalidMessages} invalid IPC message(s), see diagnostics)` : '';
      const error = { code: 'worker_failed', message: `the turn's worker exited (${how}) without a valid result${invalid}`, retryable: false };
      // After `started`, the prompt reached droid: the turn may have had effects. An invalid
      // message may have been that `started`, so in doubt the turn counts as submitted.
      const submitted = startedSession !== null || invalidMessages > 0;
      settle(withIpcProblems(emptyFailure(error, { submitted, droidSessionId: startedSession, stderrTail: stderr.toString() })));
    }
    // droid shares the worker's group; anything left in it goes now.
    killGroup(pid, 'SIGKILL');
    await waitForGroupGone(pid);
    clearTimeout(killTimer);
  });

  const post = (message: ParentToWorker) => {
    if (child.connected) child.send(message, () => undefined);
  };
  post({ type: 'run', spec });

  return {
    pid,
    result,
    cleanedUp,
    cancel() {
      post({ type: 'cancel' });
      clearTimeout(killTimer);
      killTimer = undefined;
      // The worker itself waits graceMs for droid; this is the hard stop after it.
      killGroupLater(spec.graceMs * 2);
    },
    acknowledge() {
      post({ type: 'ack' });
    },
  };
}

function killGroup(pid: number, signal: NodeJS.Signals): void {
  if (pid <= 0) return;
  try {
    process.kill(-pid, signal);
  } catch {
    // ESRCH: the group is already gone.
  }
}

function groupAlive(pid: number): boolean {
  try {
    process.kill(-pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

async function waitForGroupGone(pid: number): Promise<void> {
  const giveUpAt = Date.now() + GROUP_GONE_TIMEOUT_MS;
  while (pid > 0 && groupAlive(pid) && Date.now() < giveUpAt) {
    await sleep(GROUP_POLL_MS);
  }
}
