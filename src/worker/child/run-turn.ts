/**
 * Runs exactly one droid turn for a validated spec and says how it ended.
 * No IPC here: the caller supplies hooks and a cancel signal, so the same
 * code runs in the worker process and in tests.
 */
import { realpath, stat } from 'node:fs/promises';
import { DroidClient, SHUTDOWN_BUDGET } from '../../droid/client.js';
import { DroidError, toErrorInfo } from '../../droid/errors.js';
import { assertDroidExecutable } from '../../droid/process.js';
import type { ProgressEvent, TurnCollector } from '../../droid/turn-collector.js';
import { epochMs } from '../../util/epoch.js';
import {
  stoppedResult,
  type PowerOutcome,
  type StartMarks,
  type RenameOutcome,
  type ReplyCall,
  type ReplyEvent,
  type TurnOutcome,
  type TurnSpec,
  type TurnResult,
} from '../contract/protocol.js';
import { judgeStop, type Reached, type TurnStop } from '../../shared/turn-stop.js';
import { openSession } from './session/open-session.js';
import { powerSettled, touchedBy, unconfirmedStop, type SpareDroid } from './session/session-power.js';
import type { TouchedFiles } from '../../shared/records.js';
import { setTimeout as sleep } from 'node:timers/promises';
import { turnTimeline } from '../contract/timeline.js';
import { launchDifference, turnLaunch } from '../../sandbox/turn-launch.js';
import { earlyAlive, type EarlyDroid } from './early-droid.js';
import { startsAlike, warmAlive, warmFits, type WarmDroid } from './warm-droid.js';
import { beginEvidence, finishEvidence, judgeOutput, type EvidenceStart } from '../../evidence/turn-evidence.js';
import type { Launcher } from '../../evidence/git.js';
import type { TokenUsage } from '../../droid/notifications.js';
import type { RawUsage } from '../../droid/turn-usage.js';
import { watchBudget, type BudgetWatch } from './budget-stop.js';
import { applyTitle } from './apply-title.js';
import type { TurnEgress } from '../../sandbox/egress/turn-egress.js';
import { egressOf, spareDroid } from './turn-droids.js';

export interface TurnHooks {
  /** The prompt is submitted; `stages` says when each step of the start happened. */
  onStarted(droidSessionId: string, stages: StartMarks): void;
  onProgress(event: ProgressEvent): void;
  /** The turn's running usage changed (before any budget check). */
  onUsage?(usage: TokenUsage): void;
  /** The models droid's initialize_session or load_session answered with, as droid sent them (the caller validates), and when (epoch ms). */
  onCatalog?(availableModels: unknown, answeredAt: number): void;
  /** Resolves when the controller asks to stop this turn. */
  cancelled: Promise<void>;
  /** Routed turns: the controller's reply gate. Absent: every puck call is denied. */
  replyGate?(call: ReplyCall): Promise<boolean>;
  /** Routed turns: what approved puck calls returned, and Amp tools that ran unasked. */
  onReply?(event: ReplyEvent): void;
  /** droid did the session power the turn asked for (issue 40), before the prompt; the prompt waits until this settles (it is recorded). */
  onPower?(outcome: PowerOutcome): Promise<void> | void;
  /** A session power starts: until it is reported, a worker that dies leaves the outcome unknown. */
  onPowerStart?(): void;
}

/** What asks a running turn to stop: how it then ended is a TurnStop (shared/turn-stop.ts). */
type StopAsked = { kind: 'cancel' } | { kind: 'deadline' } | { kind: 'budget'; reached: Reached };

interface TurnState {
  client?: DroidClient;
  droidSessionId: string | null;
  collector?: TurnCollector;
  submitted: boolean;
  /** The same confinement as droid's, with a read-only workspace: where git runs (evidence/git.ts). */
  gitLauncher?: Launcher | null;
  evidence?: EvidenceStart;
  /** The start, stage by stage (protocol.ts START_STAGES). */
  marks: StartMarks;
  /** The session's usage total when the turn began (zeros: new session; null: droid did not say). */
  baseline: RawUsage | null;
  budget: BudgetWatch;
  /** Diagnostics of our own (kept with the result). */
  notes: string[];
  /** droid's session answer's model list, reported once the prompt is in or the turn is over (checking it: ≈ 8 ms, off the start's path). */
  catalog?: { models: unknown; answeredAt: number };
  /** droid's proxy, when the sandbox gave it its own network; closed after droid is stopped. */
  egress?: TurnEgress;
  /** What droid did to the session before the prompt (issue 40). */
  power?: PowerOutcome;
  onPower?: (outcome: PowerOutcome) => Promise<void> | void;
  /** Starts a droid beside the turn's, for a session power. */
  spare?: () => Promise<SpareDroid>;
  /** A session power started (and `power` says whether it ended). */
  powerStarted?: boolean;
  onPowerStart?: () => void;
}

/** `error.name` of droid's notification when it has no usable login or key. */
const AUTHENTICATION_ERROR = 'AuthenticationError';

export interface FinishedTurn {
  result: TurnResult;
  /**
   * Applies a pending Factory title (best effort, own time window) and stops
   * droid. Called after the result has been reported, so neither can delay
   * the result or make a finished turn time out. When `skip` is aborted (a
   * follow-up waits for this slot) the rename is not sent, or no longer
   * waited for (the title stays pending and a later turn applies it), and
   * droid is killed as soon as close_session is answered.
   */
  release(skip?: AbortSignal): Promise<RenameOutcome | null>;
}

/** Titles are applied only after turns droid actually finished. */
const RENAMABLE: readonly TurnOutcome[] = ['succeeded', 'interrupted'];

/**
 * `warm`: a droid this worker spawned before it knew its turn. Used only when
 * it fits the turn (warm-droid.ts `warmFits`); otherwise it is killed and droid
 * starts cold, exactly as without a pool.
 */
export async function runTurn(spec: TurnSpec, hooks: TurnHooks, warm?: WarmDroid, early?: EarlyDroid): Promise<FinishedTurn> {
  const startedAt = Date.now();
  const budget = watchBudget(spec.budget, (usage) => hooks.onUsage?.(usage));
  const state: TurnState = {
    droidSessionId: null,
    submitted: false,
    marks: { spec_received: epochMs() },
    baseline: {},
    budget,
    notes: [],
    ...(hooks.onPower && { onPower: (outcome: PowerOutcome) => hooks.onPower!(outcome) }),
  };
  state.onPowerStart = () => {
    state.powerStarted = true;
    hooks.onPowerStart?.();
  };
  let deadlineTimer: NodeJS.Timeout | undefined;
  let cancelledAt: number | null = null;
  void hooks.cancelled.then(() => (cancelledAt ??= Date.now()));
  const stop = new Promise<StopAsked>((resolve) => {
    deadlineTimer = setTimeout(() => resolve({ kind: 'deadline' }), spec.timeoutMs);
    void hooks.cancelled.then(() => resolve({ kind: 'cancel' }));
    void budget.hit.then((reached) => resolve({ kind: 'budget', reached }));
  });

  let stopped: TurnStop;
  try {
    stopped = await drive(spec, hooks, state, stop, warm, early);
  } catch (err) {
    stopped = unconfirmedStop(err) ?? { kind: 'failed', error: toErrorInfo(err), end: null };
  } finally {
    clearTimeout(deadlineTimer);
    reportCatalog(hooks, state);
  }
  state.collector?.abortOpenSpans('droid stopped before the tool reported a result');
  // Evidence of submitted turns only: changes, context, and the structured-output check.
  const timeline = turnTimeline(spec.timeoutMs, spec.graceMs);
  const notAfter = Math.min(startedAt + timeline.evidenceEndsByMs, cancelledAt === null ? Infinity : cancelledAt + timeline.evidenceAfterCancelMs);
  const extra = state.submitted && state.evidence ? await finishEvidence(spec, state.evidence, state.client, state.collector, notAfter) : {};
  const touched = await touchedFiles(spec, state, notAfter);
  let structured: Pick<TurnResult, 'structuredOutput'> = {};
  if (state.submitted && spec.outputSchema) {
    const verdict = judgeStop(stopped, true);
    const judged = judgeOutput(spec.outputSchema, verdict, state.collector);
    structured = { structuredOutput: judged.structuredOutput };
    // The output check may turn a finished turn into a failed one, never the other way.
    if (judged.error !== null && judged.error.code !== verdict.error?.code) stopped = { kind: 'failed', error: judged.error, end: verdict.reason };
  }
  const result = stoppedResult(stopped, {
    ...evidence(state),
    ...extra,
    ...structured,
    ...(touched && { touched }),
    ...(state.power && { power: state.power }),
    durationMs: Date.now() - startedAt,
  });
  return {
    result,
    release: async (skip) => {
      const client = state.client;
      let rename: RenameOutcome | null = null;
      if (client && spec.renameTo && RENAMABLE.includes(result.outcome)) {
        rename = await applyTitle(client, spec.renameTo, turnTimeline(spec.timeoutMs, spec.graceMs).renameWindowMs, skip);
      }
      // A follow-up waiting for this slot does not wait out droid's voluntary exit either.
      try {
        await client?.shutdown(SHUTDOWN_BUDGET, skip);
      } finally {
        state.egress?.close();
      }
      return rename;
    },
  };
}

/**
 * A writer turn that reached droid: the files droid's tools changed, as it
 * left them (what a later rewind checks), read within the evidence window.
 */
async function touchedFiles(spec: TurnSpec, state: TurnState, notAfter: number): Promise<TouchedFiles | null> {
  const client = state.client;
  if (!state.submitted || spec.autonomy === 'off' || !client || !state.droidSessionId || client.process.connection.closed) return null;
  const window = notAfter - Date.now();
  if (window <= 0) return null;
  return Promise.race([touchedBy(client, state.droidSessionId, spec.runId, spec.workspace), sleep(window, null)]);
}

/** Everything observed so far, whatever the outcome. */
function evidence(state: TurnState) {
  const client = state.client;
  const collector = state.collector;
  return {
    submitted: state.submitted,
    droidSessionId: state.droidSessionId,
    finalText: collector?.finalText ?? '',
    partialText: collector?.partialText ?? '',
    usage: collector?.usage ?? null,
    permissionsDeclined: client?.decisions.permissionsDeclined ?? [],
    permissionsApproved: client?.decisions.permissionsApproved ?? [],
    questions: client?.decisions.questions ?? [],
    transcript: collector?.transcript ?? [],
    diagnostics: [
      ...state.notes,
      ...(client?.process.connection.diagnostics.map((d) => `${d.kind}: ${d.detail}`) ?? []),
      ...(client?.decisions.unknownRequests.map((m) => `unknown droid request answered -32601: ${m}`) ?? []),
    ],
    stderrTail: client?.process.stderr.toString() ?? '',
    ...(state.egress && { egress: state.egress.report() }),
  };
}

async function drive(spec: TurnSpec, hooks: TurnHooks, state: TurnState, stop: Promise<StopAsked>, warm?: WarmDroid, early?: EarlyDroid): Promise<TurnStop> {
  const useWarm = warm !== undefined && warmFits(warm.spec, warmAlive(warm), spec) && (await startsAlike(warm, spec.workspace));
  // A warm droid the turn cannot use goes before anything else starts.
  if (warm && !useWarm) warm.client.process.kill('SIGKILL');
  // Owned by the turn from here: `release` stops it whatever happens next.
  if (useWarm) state.client = warm.client;
  const client = await turnDroid(spec, state, useWarm ? warm : undefined, early);
  state.client = client;
  state.egress = egressOf(spec, client);
  state.spare = () => spareDroid(spec);
  // droid writes nothing before the prompt is submitted: the "before" snapshot runs during setup.
  state.evidence = beginEvidence(spec, state.gitLauncher ?? null);
  void state.evidence.before.then(
    () => (state.marks.before_snapshot = epochMs()),
    () => undefined,
  );
  if (spec.replyBack) {
    client.routeReplies({
      caller: spec.autonomy,
      gate: (call) => hooks.replyGate?.(call) ?? Promise.resolve(false),
      observe: (event) => {
        hooks.onReply?.(event);
        // droid ran an Amp tool without asking: the gate is not in control, so stop the turn.
        if (event.kind === 'bypass') client.interrupt().catch(() => undefined);
      },
    });
  }
  const exited = client.process.exited.then(() => client.process.connection.closed ?? new DroidError('droid_exited', 'droid exited'));

  // Setup: nothing is submitted if a stop or an exit comes first.
  // No request of ours before droid's proxy listens: the model, Factory and a routed turn's Amp endpoint must find it.
  const setup = Promise.resolve(state.egress?.ready)
    .then(() => openSession(spec, client, state))
    .then((id) => {
      state.droidSessionId = id;
      state.marks.session_ready = epochMs();
      return null;
    });
  const exitDuringSetup = exited.then((e) => Promise.reject(e));
  // Whichever loses the race must not surface later as an unhandled rejection.
  setup.catch(() => undefined);
  exitDuringSetup.catch(() => undefined);
  let stoppedEarly: StopAsked | null;
  try {
    stoppedEarly = await Promise.race([setup, stop, exitDuringSetup]);
  } catch (err) {
    const unconfirmed = await powerSettled(state, setup);
    if (unconfirmed) return unconfirmed;
    throw err;
  }
  // Nothing was submitted: a stop before the prompt ends the turn here, once a session power under way has ended.
  if (stoppedEarly) return (await powerSettled(state, setup)) ?? { kind: 'unsubmitted', by: stoppedEarly.kind === 'deadline' ? 'deadline' : 'cancel' };

  await state.evidence.before;
  state.marks.submit_sent = epochMs();
  // The run's id is droid's id for the message, so a later rewind or fork can name it (issue 40).
  const collector = await client.submit(spec.prompt, hooks.onProgress, { baseline: state.baseline, onUsage: state.budget.onUsage }, spec.runId);
  state.marks.submit_answered = epochMs();
  state.collector = collector;
  state.submitted = true;
  const firstByte = client.process.firstOutputAt;
  hooks.onStarted(state.droidSessionId!, firstByte === null ? state.marks : { ...state.marks, droid_first_byte: firstByte });
  reportCatalog(hooks, state);

  const first = await Promise.race([collector.ended, stop, exited]);
  if (first instanceof Error) return { kind: 'failed', error: toErrorInfo(first, 'droid_exited'), end: null };
  if ('reason' in first) return droidStop(first.reason, collector);

  // Cancel or deadline: interrupt through the protocol and wait for the end,
  // both within one interrupt window (timeline.ts).
  const window = turnTimeline(spec.timeoutMs, spec.graceMs).interruptWindowMs;
  client.interrupt(window).catch(() => undefined);
  const after = await Promise.race([collector.ended, exited, sleep(window, undefined)]);
  const end = after && !(after instanceof Error) ? after.reason : null;
  return interruptStop(first, end, spec.timeoutMs, collector);
}

/** How our interrupt ended, given droid's end reason once it confirmed (null: it never did). */
function interruptStop(stop: StopAsked, end: string | null, timeoutMs: number, collector: Pick<TurnCollector, 'droidErrors'>): TurnStop {
  if (stop.kind === 'deadline') return { kind: 'interrupted', by: 'deadline', end, timeoutMs };
  // After the budget interrupt droid's `completed` stands (the work was done before the interrupt landed).
  if (stop.kind === 'budget') return { kind: 'interrupted', by: 'budget', end, reached: stop.reached };
  // A cancel droid answered with a failure of its own is that failure.
  if (end === null || end === 'completed' || end === 'cancelled') return { kind: 'interrupted', by: 'cancel', end };
  return droidStop(end, collector);
}

/** Reports the session answer's model list once, with the time droid answered. */
function reportCatalog(hooks: Pick<TurnHooks, 'onCatalog'>, state: Pick<TurnState, 'catalog'>): void {
  const catalog = state.catalog;
  state.catalog = undefined;
  if (catalog) hooks.onCatalog?.(catalog.models, catalog.answeredAt);
}

/**
 * The turn's droid, after the checks every start makes: the warm one; else
 * the one the entry started early (main.ts), if it is exactly the launch
 * this worker makes for the turn (the runner computed that one); else a new
 * one. An early droid not used is killed before anything else happens.
 */
async function turnDroid(spec: TurnSpec, state: TurnState, warm: WarmDroid | undefined, early: EarlyDroid | undefined): Promise<DroidClient> {
  let adopted = false;
  try {
    assertDroidExecutable(spec.droidPath);
    await assertWorkspaceUnchanged(spec.workspace);
    if (warm) return warm.client;
    const launch = turnLaunch(spec);
    state.gitLauncher = launch.git;
    // One started before its run (a queued turn's, worker.ts) may have died while it waited: then start anew.
    const unfit = early && (launchDifference(early.launch, launch.droid) ?? (earlyAlive(early) ? null : 'it exited'));
    if (early && !unfit) {
      adopted = true;
      state.marks.droid_spawned = early.spawnedAt;
      return DroidClient.adopt(early.started);
    }
    if (unfit) state.notes.push(`the droid started early was not used (${unfit}); droid started anew`);
    const client = DroidClient.spawn(launch.droid);
    state.marks.droid_spawned = epochMs();
    return client;
  } finally {
    if (early && !adopted) early.started.kill('SIGKILL');
  }
}

/**
 * The controller resolved the workspace to this canonical path when it
 * admitted the turn; droid starts only if it still is one (a symlink swapped
 * into the path since then would move the turn outside its lock).
 */
async function assertWorkspaceUnchanged(workspace: string): Promise<void> {
  const changed = new DroidError(
    'workspace_changed',
    "the session's workspace no longer resolves to the directory that was approved for this turn; nothing was submitted",
  );
  const resolved = await realpath(workspace).catch(() => null);
  if (resolved !== workspace) throw changed;
  if (
    !(await stat(resolved).then(
      (s) => s.isDirectory(),
      () => false,
    ))
  )
    throw changed;
}

/**
 * How droid's `agent_turn_completed.reason` ends the turn. A missing
 * Factory login ends `model_authentication_failed` on droid 0.225.x but `error`
 * on 0.215.0; both send an `AuthenticationError` notification first, which is
 * what marks a generic `error` as an authentication failure.
 */
export function droidStop(reason: string, collector: Pick<TurnCollector, 'droidErrors'>): TurnStop {
  if (reason === 'completed' || reason === 'cancelled') return { kind: 'ended', end: reason };
  const authError = collector.droidErrors.some((e) => e.name === AUTHENTICATION_ERROR);
  if (reason === 'model_authentication_failed' || (reason === 'error' && authError)) {
    const message = 'droid could not authenticate with the model provider; log the service user in to Factory (droid /login) or set FACTORY_API_KEY';
    return { kind: 'failed', end: reason, error: { code: 'droid_auth_failed', message, retryable: false } };
  }
  const detail = collector.droidErrors.at(-1)?.text;
  const message = `droid ended the turn with reason ${reason}${detail ? ` (${detail})` : ''}`;
  return { kind: 'failed', end: reason, error: { code: 'droid_turn_failed', message, retryable: false } };
}
