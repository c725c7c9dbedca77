/**
 * Parent side of one worker: forks it as the leader of its own process group,
 * relays its reports, and makes sure the whole group is gone at the end.
 * Its budgets come from the turn timeline (timeline.ts).
 */
import { mkdirSync, rmSync } from 'node:fs';
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { CatalogModel } from '../../droid/client.js';
import type { ProgressEvent } from '../../droid/turn-collector.js';
import type { TokenUsage } from '../../droid/notifications.js';
import { parseWorkerMessage } from '../contract/ipc.js';
import {
  type ParentToWorker,
  type PowerOutcome,
  type RenameOutcome,
  type ReplyCall,
  type ReplyEvent,
  type TurnResult,
  type TurnSpec,
} from '../contract/protocol.js';
import { TextTail } from '../../util/text.js';
import { epochMs } from '../../util/epoch.js';
import { killGroup, killGroupAndWait } from './process-group.js';
import { withoutResult } from './without-result.js';
import { turnTimeline } from '../contract/timeline.js';
import { factoryDirOf } from '../../shared/host-paths.js';
import { makeTurnTmp, type TurnTmp } from '../../sandbox/turn-paths.js';
import { emptySessionCopy, type SessionCopy, type SessionCopyResult } from '../../sandbox/session-copy.js';
import { turnLaunch } from '../../sandbox/turn-launch.js';
import { toWireLaunch, type WireLaunch } from '../contract/worker-process.js';
import { coldWorkerEnv } from './worker-env.js';

/** The worker every turn forks: its entry, which the build bundles into CommonJS in place (scripts/bundle.mjs). */
const WORKER_ENTRY = fileURLToPath(new URL('../child/main.cjs', import.meta.url));
/** Invalid IPC messages kept as diagnostics per turn (all are counted). */
const MAX_IPC_PROBLEMS = 10;

export interface WorkerOptions {
  /** The prompt is submitted; `stages`: when each step of the start happened (epoch ms), the worker's and the runner's. */
  onStarted?(droidSessionId: string, stages: StartTimeline): void;
  onProgress?(event: ProgressEvent): void;
  /** The turn's running usage so far (each change droid reported). */
  onUsage?(usage: TokenUsage): void;
  /** The models this turn's droid session answered with (validated, never empty), and when (ms since the epoch). */
  onCatalog?(models: CatalogModel[], answeredAt: number): void;
  /** After the result: whether the pending Factory title was applied. */
  onRename?(outcome: RenameOutcome): void;
  /** Sandboxed turns: what was copied back from the turn's private sessions folder, when anything was refused (session-copy.ts). */
  onSessionCopy?(result: SessionCopyResult): void;
  /** A member of the group survives SIGKILL: the lock stays held; say so. */
  onStuck?(members: number[], waitedMs: number): void;
  /** Routed turns: the reply gate's verdict on one puck call (absent, failing or not true: denied). */
  onReplyCall?(call: ReplyCall): Promise<boolean>;
  /** Routed turns: what approved puck calls returned, and Amp tools that ran unasked. */
  onReplyEvent?(event: ReplyEvent): void;
  /**
   * droid did the session power the turn asked for (issue 40), before the prompt: the session it made is the turn's from
   * here. The worker sends the prompt once this settles (its record is durable, or could not be made).
   */
  onPower?(power: PowerOutcome): Promise<void> | void;
  /** Environment of the worker process itself (droid gets spec.droidEnv). */
  env?: NodeJS.ProcessEnv;
  workerEntry?: string;
  /** An IPC message from the worker failed validation and was ignored (for the log). */
  onInvalidMessage?(problem: string): void;
  /**
   * A pre-forked worker from the warm pool (warm-pool.ts `take`), already leading
   * its own process group and not yet given a turn; absent: fork one now.
   * Either way the worker runs this one turn and is never reused.
   */
  worker?: ChildProcess;
  /**
   * A sandboxed turn's private folders, made when its droid was started
   * early (prestart.ts), the sessions copy still empty; absent: made now.
   * Either way this turn owns them from here.
   */
  confined?: ConfinedTurn;
}

/** Forks a worker process leading its own process group (the turn's, or a pool's spare). */
export function forkWorker(options: Pick<WorkerOptions, 'env' | 'workerEntry'> = {}, args: string[] = []): ChildProcess {
  return fork(options.workerEntry ?? WORKER_ENTRY, args, {
    detached: true,
    // Not the server's own node flags: V8 takes the worker's code cache only under the flags it was built with (none; load-worker.ts).
    execArgv: [],
    env: options.env ?? process.env,
    // stdout is never inherited: in stdio mode ours carries MCP frames.
    stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
  });
}

/** Stage name → epoch ms (worker/contract/protocol.ts START_STAGES, plus the runner's `worker_ready`). */
export type StartTimeline = Readonly<Record<string, number>>;

export interface WorkerHandle {
  readonly pid: number;
  /** The turn's one result; synthesized if the worker dies without one. */
  readonly result: Promise<TurnResult>;
  /** Settles when the worker has exited and no member of its process group runs. */
  readonly cleanedUp: Promise<void>;
  /** Asks for a protocol interrupt; kills the group if the worker does not report within the cancel backstop. */
  cancel(): void;
  /** Tells the worker its result is durable, so it may exit. */
  acknowledge(): void;
  /** Asks the worker to leave the Factory title for a later turn (skip or abandon the rename). */
  skipRename(): void;
}

/** Why the runner itself killed the group before a result came. */
type Backstop = 'cancel' | 'deadline' | 'after_result';

/** What the runner learns of a turn while it runs: the message relay, the backstops and the exit path share it. */
interface TurnWatch {
  gotResult: boolean;
  cancelRequested: boolean;
  /** The session the worker said droid started, and the one its result names. */
  startedSession: string | null;
  reportedSession: string | null;
  /** The session a fork, rewind or compaction made before the prompt (issue 40): the one copied back. */
  powerSession?: string;
  /** A power started; without `powerSession`, nobody knows what it did. */
  powerStarted?: boolean;
  firedBackstop: Backstop | null;
  invalidMessages: number;
  /** The first MAX_IPC_PROBLEMS invalid messages, kept as diagnostics. */
  ipcProblems: string[];
  /** When the worker was forked (or taken from the pool) and given its turn (epoch ms). */
  readyAt: number;
}

export function startWorker(turnSpec: TurnSpec, options: WorkerOptions = {}): WorkerHandle {
  const timeline = turnTimeline(turnSpec.timeoutMs, turnSpec.graceMs);
  const { resumeId, confined, spec, child, stderr } = spawnTurnWorker(turnSpec, options);
  const pid = child.pid ?? -1;

  let settle!: (result: TurnResult) => void;
  const watch: TurnWatch = {
    gotResult: false,
    cancelRequested: false,
    startedSession: null,
    reportedSession: null,
    firedBackstop: null,
    invalidMessages: 0,
    ipcProblems: [],
    readyAt: 0,
  };
  const result = new Promise<TurnResult>((resolve) => (settle = resolve));

  const backstop = backstopTimer(pid, watch);
  // For a worker that ignores its own deadline.
  backstop.arm('deadline', timeline.deadlineBackstopMs);

  const post = (message: ParentToWorker) => {
    if (child.connected) child.send(message, () => undefined);
  };
  child.on('message', (raw: unknown) =>
    relayMessage(raw, watch, options, post, (reported) => {
      // From here the worker only renames and closes droid: its own window.
      backstop.arm('after_result', timeline.afterResultMs);
      settle(reported);
    }),
  );

  const exited = new Promise<string>((resolve) => {
    child.once('exit', (code, signal) => resolve(signal ? `signal ${signal}` : `code ${code}`));
    child.once('error', (err) => resolve(`spawn error ${err.message}`));
  });

  const cleanedUp = exited.then(async (how) => {
    if (!watch.gotResult) {
      watch.gotResult = true;
      settle(withIpcProblems(withoutResult(how, watch, spec, stderr.toString()), watch));
    }
    // droid shares the worker's group; anything left in it goes now.
    try {
      await killGroupAndWait(pid, options.onStuck);
    } finally {
      backstop.clear();
    }
    if (confined) await releaseConfinedTurn(confined, sessionToKeep(watch, resumeId), options);
  });

  // The worker may spawn this droid before anything else (worker/child/early-droid.ts).
  const launch = earlyLaunch(spec);
  post({ type: 'run', spec, ...(launch && { launch }) });
  watch.readyAt = epochMs();

  return {
    pid,
    result,
    cleanedUp,
    cancel() {
      if (watch.cancelRequested) return;
      watch.cancelRequested = true;
      post({ type: 'cancel' });
      // The worker has its interrupt window to report; after that, a hard stop.
      if (!watch.gotResult) backstop.arm('cancel', timeline.cancelBackstopMs);
    },
    acknowledge() {
      post({ type: 'ack' });
    },
    skipRename() {
      post({ type: 'skip_rename' });
    },
  };
}

/** The turn's folders, then its worker (the one given, else a cold one), its stderr kept; a failure leaves neither. */
function spawnTurnWorker(turnSpec: TurnSpec, options: WorkerOptions): ReturnType<typeof confineTurn> & { child: ChildProcess; stderr: TextTail } {
  // Made first: a failure here throws before any process starts.
  const confinement = confineTurn(turnSpec, options.confined);
  const stderr = new TextTail(16_000);
  let child: ChildProcess;
  try {
    child = options.worker ?? forkWorker({ ...options, env: coldWorkerEnv(options.env ?? process.env, confinement.spec.replyBack !== undefined) });
  } catch (err) {
    void confinement.confined?.dispose();
    throw err;
  }
  child.stderr?.setEncoding('utf8');
  child.stderr?.on('data', (chunk: string) => stderr.push(chunk));
  return { ...confinement, child, stderr };
}

/**
 * The launch a worker may start before it has validated its turn (worker/child/early-droid.ts);
 * none when it cannot be made here: the worker then fails with the reason itself.
 */
export function earlyLaunch(spec: TurnSpec): WireLaunch | undefined {
  try {
    return toWireLaunch(turnLaunch(spec).droid);
  } catch {
    return undefined;
  }
}

/** The runner's own kill timer: one backstop armed at a time; the one that fires is noted in `watch`. */
function backstopTimer(pid: number, watch: TurnWatch): { arm(kind: Backstop, ms: number): void; clear(): void } {
  let timer: NodeJS.Timeout | undefined;
  return {
    arm(kind, ms) {
      clearTimeout(timer);
      timer = setTimeout(() => {
        watch.firedBackstop = kind;
        killGroup(pid, 'SIGKILL');
      }, ms);
    },
    clear: () => clearTimeout(timer),
  };
}

/**
 * Acts on one IPC message from the worker. Messages cross a process
 * boundary: each is validated, and an invalid one is counted and kept as a
 * diagnostic, never acted on. An invalid `terminal` is not the result: the
 * turn then ends as worker_failed when the worker exits.
 */
function relayMessage(
  raw: unknown,
  watch: TurnWatch,
  options: WorkerOptions,
  post: (message: ParentToWorker) => void,
  onResult: (result: TurnResult) => void,
): void {
  const parsed = parseWorkerMessage(raw);
  if (!parsed.ok) {
    const problem = `ipc_invalid_message #${++watch.invalidMessages} from the worker, ignored: ${parsed.problem}`;
    if (watch.ipcProblems.length < MAX_IPC_PROBLEMS) watch.ipcProblems.push(problem);
    options.onInvalidMessage?.(problem);
    return;
  }
  const message = parsed.message;
  if (message.type === 'power_started') watch.powerStarted = true;
  else if (message.type === 'power') {
    watch.powerSession = message.power.droidSessionId;
    void Promise.resolve(options.onPower?.(message.power))
      .catch(() => undefined)
      .then(() => post({ type: 'power_recorded' }));
  } else if (message.type === 'started') {
    watch.startedSession = message.droidSessionId;
    options.onStarted?.(message.droidSessionId, { worker_ready: watch.readyAt, ...message.stages });
  } else if (message.type === 'progress') options.onProgress?.(message.event);
  else if (message.type === 'usage') options.onUsage?.(message.usage);
  else if (message.type === 'catalog') options.onCatalog?.(message.models, Date.parse(message.answeredAt));
  else if (message.type === 'rename') options.onRename?.(message.outcome);
  else if (message.type === 'reply_call') {
    const id = message.id;
    const verdict = options.onReplyCall ? options.onReplyCall(message.call).catch(() => false) : Promise.resolve(false);
    void verdict.then((approve) => post({ type: 'reply_decision', id, approve: approve === true }));
  } else if (message.type === 'reply_event') options.onReplyEvent?.(message.event);
  else if (message.type === 'terminal' && !watch.gotResult) {
    watch.gotResult = true;
    watch.reportedSession = message.result.droidSessionId;
    if (message.result.power) watch.powerSession ??= message.result.power.droidSessionId;
    onResult(withIpcProblems(message.result, watch));
  }
}

function withIpcProblems(r: TurnResult, watch: TurnWatch): TurnResult {
  return watch.ipcProblems.length ? { ...r, diagnostics: [...r.diagnostics, ...watch.ipcProblems] } : r;
}

/**
 * The droid session a sandboxed turn's copy gives back: the one a fork, rewind or compaction made (issue 40), which
 * never replaces files droid's folder has; else a resumed one's id, or a new session's (droid's answer to initialize).
 */
function sessionToKeep(watch: TurnWatch, resumeId: string | null): { id: string | null; fresh: boolean } {
  if (watch.powerSession) return { id: watch.powerSession, fresh: true };
  return { id: resumeId ?? watch.reportedSession ?? watch.startedSession, fresh: false };
}

/** A sandboxed turn's private folders; `dispose` removes them, off the event loop, and settles once they are gone (never rejects). */
export interface ConfinedTurn {
  sessions: SessionCopy;
  tmp: TurnTmp;
  dispose(): Promise<void>;
}

/**
 * Sandboxed turns see a private copy of their own session's droid files; it
 * is copied back once the group is gone (releaseConfinedTurn), whatever ended
 * the turn. Returns the spec the worker gets, naming the turn's folders.
 */
function confineTurn(turnSpec: TurnSpec, prepared?: ConfinedTurn): { resumeId: string | null; confined: ConfinedTurn | null; spec: TurnSpec } {
  const resumeId = turnSpec.session.mode === 'resume' ? turnSpec.session.droidSessionId : null;
  // A fork's first turn reads its source's session (issue 40).
  const fillId = turnSpec.session.mode === 'fork' ? turnSpec.session.sourceDroidSessionId : resumeId;
  let confined: ConfinedTurn | null = null;
  if (turnSpec.sandbox.mode === 'bwrap') {
    confined = prepared ?? emptyConfinedTurn(turnSpec);
    try {
      // Now, not when the folders were made: the session's previous turn has been copied back since.
      confined.sessions.fill(fillId, turnSpec.session.mode === 'fork' ? turnSpec.session.sourceWorkspace : undefined);
    } catch (err) {
      void confined.dispose();
      throw err;
    }
  }
  return { resumeId, confined, spec: withFolders(turnSpec, confined) };
}

/** The spec naming the turn's private folders (what a sandboxed launch binds). */
export function withFolders(spec: TurnSpec, confined: ConfinedTurn | null): TurnSpec {
  return confined && spec.sandbox.mode === 'bwrap'
    ? { ...spec, sandbox: { ...spec.sandbox, sessionsCopy: confined.sessions.dir, turnTmp: confined.tmp.turnTmp } }
    : spec;
}

/** A sandboxed turn's private folders, named after its run (so a restart finds what a dead controller left); the sessions copy empty until filled. */
export function emptyConfinedTurn(spec: TurnSpec): ConfinedTurn {
  // The session's snapshots folder outlives the turn (a later rewind reads it): made once, never removed here.
  if (spec.sandbox.mode === 'bwrap' && spec.sandbox.snapshotsDir) mkdirSync(spec.sandbox.snapshotsDir, { recursive: true, mode: 0o700 });
  const sessions = emptySessionCopy(factoryDirOf(spec.droidEnv), spec.workspace, spec.runId);
  let tmp: TurnTmp;
  try {
    tmp = makeTurnTmp(spec.runId);
  } catch (err) {
    // Gone before this returns: a droid booted ahead loses its marker at once (ahead-marks.ts bootMarked), and a kill must find nothing.
    rmSync(sessions.dir, { recursive: true, force: true });
    throw err;
  }
  return { sessions, tmp, dispose: () => Promise.all([sessions.dispose(), tmp.dispose()]).then(() => undefined) };
}

/**
 * Once the group is gone: copies this session's files back, then removes the
 * turn's folders, off the event loop (a turn can make them slow to remove:
 * that holds only its own slot). Never rejects; what is left is reported. A
 * controller that dies before this leaves the copy for the next start
 * (session-copy.ts recoverSessionCopies).
 */
async function releaseConfinedTurn(confined: ConfinedTurn, session: { id: string | null; fresh: boolean }, options: WorkerOptions): Promise<void> {
  await commitSessions(confined.sessions, session, options);
  const [copyLeft, tmpLeft] = await Promise.all([confined.sessions.dispose(), confined.tmp.dispose()]);
  const left = [copyLeft && `the private sessions copy was not removed: ${copyLeft}`, tmpLeft && `the turn's TMPDIR was not removed: ${tmpLeft}`].filter(
    (x): x is string => !!x,
  );
  if (left.length) options.onSessionCopy?.({ copied: [], refused: left });
}

/** Copies this session's files back once the group is gone. Never rejects; refusals are reported. */
async function commitSessions(sessions: SessionCopy, session: { id: string | null; fresh: boolean }, options: WorkerOptions): Promise<void> {
  try {
    const result = await sessions.commit(session.id, session.fresh);
    if (result.refused.length) options.onSessionCopy?.(result);
  } catch (err) {
    options.onSessionCopy?.({ copied: [], refused: [`copy-back failed: ${(err as Error).message}`] });
  }
}
