/**
 * The owner of a turn the queue selected: admits it (its claim is held from
 * there), launches it (commits `starting`, starts its worker), records what
 * the worker reports, records how the turn ended, and gives the claim back.
 *
 * Rules it keeps:
 * - Each admitted turn has exactly one owner (`own`, called by the queue's
 *   pump), which releases the claim in `finally`, after the worker's process
 *   group is gone, whatever happened before.
 * - A transition commits first, then changes memory (the turn's phase
 *   included); a failed commit leaves memory as it was.
 * - The worker hears its result was recorded (`Turn.end`) only once the
 *   results file and the terminal record are durable.
 * - The worker's reports that change state (started, rename, reply-back)
 *   are ordered with every other change by the serial chain.
 */
import { setImmediate, setTimeout as sleep } from 'node:timers/promises';
import { LIVE_STATES, TERMINAL_STATES, type RunRecord } from '../../shared/records.js';
import { crashPoint } from '../../util/crash-point.js';
import type { StartTimeline, WorkerHandle, WorkerOptions } from '../../worker/parent/runner.js';
import { epochMs } from '../../util/epoch.js';
import { failedResult, RENAME_SKIPPED, stoppedResult, type PowerOutcome, type RenameOutcome } from '../../worker/contract/protocol.js';
import { recordPower } from '../acceptance/session-powers.js';
import { startTimeline } from './start-timeline.js';
import { stopFields } from '../../shared/turn-stop.js';
import type { ControllerDeps, ControllerState } from '../controller-state.js';
import type { ReplyBack } from '../reply-back/reply-back.js';
import { routeOf, withReply } from '../reply-back/reply-route.js';
import { MAX_EVENTS, resultFile, terminalUpdate, type OwnedResult } from './run-outcome.js';
import type { Turn } from './turn.js';
import type { TurnRunner } from './turn-queue.js';
import { turnSpecFor, type TurnHost } from './turn-spec.js';
import { LiveUsage } from './live-usage.js';
import type { NextTurnDroids } from './next-turn-droids.js';
import { budgetAtLaunch, budgetSpec } from '../budget/turn-limit.js';
import { checkoutFailure, launchRefusal, launchSession } from './launch-refusal.js';

/** The host effects an owner uses: how turns are specified (TurnHost), started and checked before launch. */
export type OwnerDeps = TurnHost &
  Pick<
    ControllerDeps,
    'startWorker' | 'prestartWorker' | 'resolveWorkspace' | 'sandboxUnavailable' | 'offerModels' | 'ceilings' | 'liveUsageWriteMs' | 'autoCompactAt'
  >;

const TERMINAL_WRITE_ATTEMPTS = 3;
const TERMINAL_WRITE_BACKOFF_MS = 200;

export class TurnOwner implements TurnRunner {
  private readonly liveUsage: LiveUsage;
  /** The loop turn the last worker fork was given: forks due together go one per turn (`forkTurn`). */
  private lastFork: Promise<void> = Promise.resolve();

  constructor(
    private readonly state: ControllerState,
    private readonly replies: ReplyBack,
    private readonly nextDroids: NextTurnDroids,
    private readonly deps: OwnerDeps,
  ) {
    this.liveUsage = new LiveUsage(state, deps.liveUsageWriteMs);
  }

  /**
   * Admits the turn, launches it, runs it, records how it ended, and
   * releases its claim in `finally`, after the worker and its process group
   * are gone, whatever happened before.
   */
  async own(turn: Turn): Promise<void> {
    // Synchronously, before the pump selects again: the claim is held from here.
    turn.admit();
    try {
      await this.launch(turn);
    } catch (err) {
      this.state.log.error({ err, run: turn.runId }, 'turn owner failed');
    } finally {
      // Back in line (its `starting` commit failed): it keeps its place.
      if (!turn.inLine()) {
        this.state.turns.delete(turn.runId);
        turn.release();
      }
      // The droid booted for the session's next turn waits for it from here (next-turn-droids.ts).
      this.nextDroids.idle(turn.sessionId);
      this.state.changed();
    }
  }

  private async launch(turn: Turn): Promise<void> {
    // The turn's start, stage by stage, logged once droid has the prompt.
    const marks: Record<string, number> = { launch_began: epochMs() };
    const refused = await launchRefusal(this.state, this.deps, turn.runId);
    if (refused) {
      // A spent budget refuses this turn alone (cancelled, not failed): later queued turns are judged on their own.
      await this.settle(
        turn,
        refused.code === 'budget_exhausted' ? stoppedResult({ kind: 'unsubmitted', by: 'budget_exhausted', error: refused }) : failedResult(refused),
      );
      return;
    }

    let run: RunRecord | null;
    try {
      run = await this.state.serialized(() => this.markStarting(turn));
    } catch (err) {
      // Not durable, so not started: back in line with memory as it was.
      const failedAt = this.state.now().getTime();
      turn.requeue(failedAt);
      this.state.log.error(
        { err, run: turn.runId, retryInMs: turn.retryAt - failedAt },
        'could not record the turn as starting; it stays queued and is retried',
      );
      return;
    }
    if (!run) return;
    marks.starting_committed = epochMs();
    // Forking the worker blocks the event loop (libuv waits for the child's exec: 3-40 ms under load): the
    // state changes queued meanwhile go first, and the answers they release, so none waits behind it (issue 38).
    await this.state.drained();
    await this.forkTurn();

    // Nothing may start once a stop was asked for; nothing was submitted.
    if (this.state.stopped || this.state.halted || turn.cancelRequested) {
      await this.settle(turn, stoppedResult({ kind: 'unsubmitted', by: turn.cancelRequested ? 'cancel' : 'controller_stopping' }));
      return;
    }

    // A checkout session's first turn makes its checkout (checkouts.ts); nothing is submitted if that fails.
    // Checked first, so a turn of any other session starts its worker without an extra wait.
    if (this.state.checkouts.pending(run.sessionId)) {
      const unprepared = await this.state.checkouts.prepare(run.sessionId).then(() => null, checkoutFailure);
      if (unprepared) {
        await this.settle(turn, failedResult(unprepared));
        return;
      }
    }
    const opened = launchSession(this.state, run, this.deps.autoCompactAt ?? null);
    if ('refused' in opened) {
      await this.settle(turn, failedResult(opened.refused));
      return;
    }
    const extras = { ...(turn.outputSchema && { outputSchema: turn.outputSchema }), ...budgetSpec(this.state, run), session: opened.start };
    const spec = turnSpecFor(run, this.state.session(run.sessionId), turn.takePrompt(), this.deps, extras);
    const reports = this.reports(turn, marks);
    const early = this.nextDroids.take(run.sessionId, run.id);
    let handle: WorkerHandle;
    try {
      handle = this.deps.startWorker(spec, reports.options, early ?? undefined);
    } catch (err) {
      void early?.dispose();
      const error = { code: 'worker_spawn_failed', message: `could not start the turn's worker: ${(err as Error).message}`, retryable: true };
      await this.settle(turn, failedResult(error));
      return;
    }
    turn.attach(handle);
    crashPoint('spawned');
    if (this.state.stopped || this.state.halted) turn.stopUnrequested();

    await this.settleRun(turn, run, handle, reports.started);
  }

  /** The worker's result, recorded; the worker hears so only once it is durable, and the turn is over once its group is gone. */
  private async settleRun(turn: Turn, run: RunRecord, handle: WorkerHandle, started: () => Promise<void>): Promise<void> {
    const result = await handle.result;
    this.liveUsage.forget(turn);
    crashPoint('terminal-received');
    // One line per refused destination per turn: what an operator may want to allow (network.allow).
    for (const r of result.egress?.refused ?? []) {
      this.state.log.warn(
        { session: run.sessionId, run: turn.runId, host: r.host, port: r.port, count: r.count, firstAt: r.firstAt },
        `egress proxy refused ${r.host}:${r.port}: ${r.why}`,
      );
    }
    await started();
    const commits = this.state.checkouts.syncsAfter(run) ? await this.state.checkouts.afterTurn(run) : undefined;
    // Durable before the worker hears it was: then it may exit.
    const recorded = await this.recordTerminal(turn, commits === undefined ? result : { ...result, commits });
    crashPoint('terminal-persisted');
    if (recorded) turn.end();
    await handle.cleanedUp;
  }

  /**
   * The session's running turn has its model's first answer: the droid of
   * its next turn boots now (next-turn-droids.ts), on the launch that turn
   * would get with this one's settings. Not sooner: droid's boot takes
   * ≈ 0.7 s of CPU, which beside this turn's own start and request slowed a
   * create from 1.04x to 1.15-1.20x a bare droid on 2 cores (1.57x when
   * booted at launch). Not for a checkout's first turn (its checkout is
   * made at launch).
   */
  private prepareNext(turn: Turn): void {
    const { deps } = this;
    const prestartWorker = deps.prestartWorker;
    if (!prestartWorker) return;
    const ready = async () => {
      // A fork blocks the event loop: the changes queued now, and the answers they release, go first.
      await this.state.drained();
      await this.forkTurn();
      return !this.state.stopped && !this.state.halted && !turn.cancelRequested && !this.state.checkouts.pending(turn.sessionId);
    };
    const boot = (runId: string) => {
      const run = this.state.run(turn.runId);
      return prestartWorker(turnSpecFor({ ...run, id: runId }, this.state.session(run.sessionId), '', deps));
    };
    void this.nextDroids
      .prepare(turn.sessionId, ready, boot)
      // The turn ended while that droid booted: its wait for the next turn starts now.
      .then(() => (turn.holdsClaim() ? undefined : this.nextDroids.idle(turn.sessionId)))
      .catch((err: unknown) => this.state.log.warn({ err, run: turn.runId }, "could not boot a droid for the session's next turn; that turn starts its own"));
  }

  /**
   * Settles in a turn of the event loop after the one the previous fork was
   * given (a setImmediate after it), so owners whose forks fall due together
   * do not block the loop back to back: what came in meanwhile is read and
   * answered between them.
   */
  private forkTurn(): Promise<void> {
    this.lastFork = this.lastFork.then(() => setImmediate());
    return this.lastFork;
  }

  /** Null when the run may not start (ended meanwhile, or the controller is stopping). */
  private async markStarting(turn: Turn): Promise<RunRecord | null> {
    const current = this.state.run(turn.runId);
    if (current.state !== 'queued' || this.state.halted) return null;
    // Stopping: a turn not yet started stays queued (queue_lost at the next start).
    if (this.state.stopped) {
      turn.requeue();
      return null;
    }
    // The turn reports on the session's route as it is now (a retarget may have come since acceptance).
    const { limit } = budgetAtLaunch(this.state, current, this.deps.ceilings);
    const run: RunRecord = withReply(
      { ...current, state: 'starting', startedAt: this.state.now().toISOString(), ...(limit && { limit }) },
      routeOf(this.state.session(current.sessionId)),
    );
    await this.state.commit({ runs: [run] }, () => turn.start());
    return run;
  }

  /** What the worker reports while it runs; `started` settles once droid's start is recorded (or could not be). */
  private reports(turn: Turn, marks: StartTimeline): { options: WorkerOptions; started: () => Promise<void> } {
    const { state } = this;
    const log = state.log;
    let started: Promise<void> = Promise.resolve();
    let nextPrepared = false;
    const options: WorkerOptions = {
      onStarted: (droidSessionId, stages) => {
        started = state
          .serialized(() => this.onStarted(turn.runId, droidSessionId, { ...marks, ...stages }))
          .catch((err) => log.error({ err, run: turn.runId }, 'could not record that the turn started; its result will record it'));
      },
      onProgress: (event) => {
        if (turn.record(event, state.now().toISOString())) state.changed();
        // droid has sent its request and the model answers: the next turn's droid boots now, not beside this one's work.
        if (!nextPrepared) {
          nextPrepared = true;
          this.prepareNext(turn);
        }
      },
      onUsage: (usage) => this.liveUsage.report(turn, usage),
      onPower: (power) => state.serialized(() => this.onPower(turn.runId, power)).catch((err) => log.error({ err, run: turn.runId }, 'power not recorded')),
      onCatalog: (models, answeredAt) => this.deps.offerModels?.(models, answeredAt),
      onRename: (outcome) => void state.serialized(() => this.onRename(turn.runId, outcome)).catch((err) => log.error({ err }, 'rename record failed')),
      onInvalidMessage: (problem) => log.warn({ run: turn.runId, problem }, 'the worker sent an invalid message; ignored'),
      onSessionCopy: (copy) =>
        log.warn({ run: turn.runId, ...copy }, "some of droid's session files were not copied back from the turn's private sessions folder"),
      onStuck: (members, waitedMs) => log.warn({ run: turn.runId, members, waitedMs }, "the turn's processes survive SIGKILL; its workspace lock stays held"),
      onReplyCall: (call) => state.serialized(() => this.replies.onCall(turn, call)),
      onReplyEvent: (event) =>
        void state
          .serialized(() => this.replies.onEvent(turn, event))
          .catch((err) => log.error({ err, run: turn.runId }, 'could not record a reply-back result')),
    };
    return { options, started: () => started };
  }

  private async onStarted(runId: string, droidSessionId: string, stages: StartTimeline): Promise<void> {
    const run = this.state.run(runId);
    const session = this.state.session(run.sessionId);
    // droid has the prompt, under the run's id: a later fork or rewind may name it (issue 40).
    const submitted = { ...run, submittedAt: this.state.now().toISOString() };
    const next: RunRecord = run.state === 'starting' ? { ...submitted, state: 'running' } : submitted;
    const sessions = session.droidSessionId === droidSessionId ? [] : [{ ...session, droidSessionId }];
    await this.state.commit({ runs: [next], sessions });
    this.state.log.info({ session: run.sessionId, run: runId, start: startTimeline(stages) }, 'turn running: prompt submitted to droid');
    crashPoint('started');
  }

  /** droid made the session a new one before the prompt (issue 40); on a run already ended, its result recorded it (or why not). */
  private async onPower(runId: string, power: PowerOutcome): Promise<void> {
    crashPoint('power-received');
    const run = this.state.run(runId);
    if (TERMINAL_STATES.includes(run.state)) return;
    const changes = recordPower(this.state.session(run.sessionId), run, this.state.store.runsBySession(run.sessionId), power, this.state.now().toISOString());
    if (changes.sessions.length === 0 && changes.runs.length === 0) return;
    await this.state.commit(changes);
    this.state.log.info({ session: run.sessionId, run: runId, power: power.kind }, 'session power done: droid session replaced');
  }

  /** Best effort: a failed rename is logged and noted on the run, and retried next turn. */
  private async onRename(runId: string, outcome: RenameOutcome): Promise<void> {
    const run = this.state.run(runId);
    const session = this.state.session(run.sessionId);
    if (outcome.ok) {
      await this.state.commit({ sessions: [{ ...session, factoryTitle: outcome.title }] });
      return;
    }
    const log = this.state.log;
    if (outcome.error === RENAME_SKIPPED) log.info({ session: run.sessionId, run: runId }, 'Factory title left for a later turn: a follow-up was waiting');
    else log.warn({ session: run.sessionId, run: runId, error: outcome.error }, 'Factory title not applied; will retry on the next turn');
    const note = {
      at: this.state.now().toISOString(),
      kind: 'title_sync_failed',
      detail: `title not applied in Factory (retried next turn): ${outcome.error ?? 'unknown'}`,
    };
    await this.state.commit({ runs: [{ ...run, events: [...run.events, note].slice(-MAX_EVENTS) }] });
  }

  /** A turn that ends with no worker to tell: recorded, then ended. */
  private async settle(turn: Turn, result: OwnedResult): Promise<void> {
    if (await this.recordTerminal(turn, result)) turn.end();
  }

  /**
   * Makes the result durable. A failing disk gets a few tries; if it still
   * fails, the controller halts (see `ControllerState.halt`) rather than
   * release the session across a turn it could not record. True when recorded.
   */
  private async recordTerminal(turn: Turn, result: OwnedResult): Promise<boolean> {
    for (let attempt = 1; !this.state.halted; attempt++) {
      try {
        // A live run is ended by its owner alone, so its results file is written before the chain:
        // its fsyncs hold up no other transition (issue 38). A run still queued may be dropped meanwhile.
        const early = LIVE_STATES.includes(this.state.run(turn.runId).state);
        if (early) await this.state.store.writeResult(resultFile(turn.runId, result));
        await this.state.serialized(() => this.onTerminal(turn, result, !early));
        return true;
      } catch (err) {
        if (attempt >= TERMINAL_WRITE_ATTEMPTS) {
          this.state.log.error({ err, run: turn.runId, outcome: result.outcome }, 'could not record the turn result');
          this.state.halt(err);
          return false;
        }
        this.state.log.warn({ err, run: turn.runId, attempt }, 'recording the turn result failed; retrying');
        await sleep(TERMINAL_WRITE_BACKOFF_MS * attempt);
      }
    }
    return false;
  }

  /** `writeFile`: the results file is not written yet (durable before the record, either way). */
  private async onTerminal(turn: Turn, result: OwnedResult, writeFile: boolean): Promise<void> {
    const { state } = this;
    const run = state.run(turn.runId);
    // Already ended (cancelled while it waited): that record stands.
    if (TERMINAL_STATES.includes(run.state)) return;
    const session = state.session(run.sessionId);
    const at = state.now().toISOString();
    if (writeFile) await state.store.writeResult(resultFile(run.id, result));
    // A power the `power` report did not get recorded (its message lost): recorded with the result.
    const powered = result.power ? recordPower(session, run, state.store.runsBySession(run.sessionId), result.power, at) : { sessions: [], runs: [] };
    const base = powered.runs.find((r) => r.id === run.id) ?? run;
    const finished = terminalUpdate(base, result, { cancelRequested: turn.cancelRequested, events: turn.events, at, running: turn.usage });
    const changedRuns: RunRecord[] = [finished, ...powered.runs.filter((r) => r.id !== run.id)];
    // The queue never resumes work across a failure: later turns are dropped (the commit takes them out of the line).
    if (finished.state === 'failed' || finished.state === 'timed_out') {
      const predecessorFailure = { runId: run.id, state: finished.state, error: finished.error };
      const ended = stopFields({ kind: 'unsubmitted', by: 'predecessor_failed' }, false);
      for (const next of state.store.runsBySession(run.sessionId).filter((r) => r.state === 'queued' && r.id !== run.id)) {
        changedRuns.push({ ...next, ...ended, endedAt: at, predecessorFailure });
      }
    }
    const current = powered.sessions[0] ?? session;
    const sessions =
      result.droidSessionId && current.droidSessionId !== result.droidSessionId
        ? [{ ...current, droidSessionId: result.droidSessionId, updatedAt: at }]
        : [{ ...current, updatedAt: at }];
    await state.commit({ runs: changedRuns, sessions });
    state.log.info({ session: run.sessionId, run: run.id, state: finished.state, code: finished.error?.code }, 'turn ended');
  }
}
