/**
 * The worker proper, loaded by its entry (main.ts): receives one turn over
 * IPC, runs it, reports, waits for the controller to acknowledge the durable
 * result, and exits. Messages that came while it loaded are handed to it in
 * order, with the droid the entry may have started already (`early`).
 */
import { toErrorInfo } from '../../droid/errors.js';
import { parseParentMessage, parseWorkerMessage, runEnvelopeSchema } from '../contract/ipc.js';
import {
  failedResult,
  turnSpecSchema,
  type RenameOutcome,
  type ReplyCall,
  type PowerOutcome,
  type TurnResult,
  type WarmDroidSpec,
  type WorkerToParent,
} from '../contract/protocol.js';
import { AHEAD_TITLE, WARM_IDLE_TITLE, WORKER_TITLE } from '../contract/worker-process.js';
import { startEarly, warmSpawnPath, type EarlyDroid } from './early-droid.js';
import { stopOrphanedGroup } from './orphan.js';
import { runTurn } from './run-turn.js';
import { spawnWarmDroid, type WarmDroid } from './warm-droid.js';
import { ACK_WAIT_MS } from '../contract/timeline.js';
import { setTimeout as sleep } from 'node:timers/promises';

function send(message: WorkerToParent): Promise<void> {
  return new Promise((resolve) => {
    if (!process.connected || !process.send) return resolve();
    process.send(message, (err: Error | null) => {
      if (err) process.stderr.write(`worker: IPC send failed: ${err.message}\n`);
      resolve();
    });
  });
}

let cancel!: () => void;
const cancelled = new Promise<void>((resolve) => (cancel = resolve));
let acknowledge!: () => void;
const acknowledged = new Promise<void>((resolve) => (acknowledge = resolve));
let running = false;
/** Set by `warm` (pool workers only): prepared before the turn is known. */
let warmed = false;
let warm: WarmDroid | undefined;
/** Started by the entry from the runner's launch, before this module loaded; this worker decides whether the turn uses it. */
let early: EarlyDroid | undefined;
/** Aborted when a follow-up waits for this turn's slot: the Factory title is left for a later turn. */
const skipRename = new AbortController();

/** Puck calls waiting for the controller's reply gate, by request id. */
const gateWaits = new Map<string, (approve: boolean) => void>();
let gateIds = 0;
/** A gate that never answers denies: droid's permission request must not hang the turn. */
const GATE_WAIT_MS = 30_000;

function askGate(call: ReplyCall): Promise<boolean> {
  if (!process.connected) return Promise.resolve(false);
  const id = `g${++gateIds}`;
  return new Promise<boolean>((resolve) => {
    const timer = setTimeout(() => settle(false), GATE_WAIT_MS);
    const settle = (approve: boolean) => {
      clearTimeout(timer);
      gateWaits.delete(id);
      resolve(approve);
    };
    gateWaits.set(id, settle);
    void send({ type: 'reply_call', id, call });
  });
}

/** Reported session powers waiting for the controller to record them (issue 40), oldest first. */
const powerWaits: Array<() => void> = [];

/** Reports the power and settles once the controller recorded it: the prompt goes only after (or once the controller is gone). */
function reportPower(power: PowerOutcome): Promise<void> {
  if (!process.connected) return Promise.resolve();
  return new Promise<void>((resolve) => {
    powerWaits.push(resolve);
    void send({ type: 'power', power });
  });
}

/** When the `run` came (epoch ms): the start's `run_received` stage (a droid started before it was started early). */
let runReceivedAt = 0;

/** Takes over from the entry: the messages it held (the entry got them at `heldAt`), in order, then every later one. */
export function runWorker(held: readonly unknown[], started: EarlyDroid | undefined, heldAt: number): void {
  early = started;
  process.on('disconnect', orphaned);
  process.on('message', (raw: unknown) => onMessage(raw, Date.now()));
  for (const raw of held) onMessage(raw, heldAt);
  if (!process.connected) orphaned();
}

// The controller is gone: nobody can record this turn, so its whole group goes now, this worker with it (orphan.ts).
function orphaned(): void {
  stopOrphanedGroup();
}

function onMessage(raw: unknown, receivedAt: number): void {
  if (!running && typeof raw === 'object' && raw !== null && (raw as { type?: unknown }).type === 'run') runReceivedAt = receivedAt;
  // A pool worker holding no droid (a sandboxed turn's) starts it from the runner's launch first, as the entry does for a cold one.
  if (warmed && !warm && !running && !early) early = startEarly(raw);
  const parsed = parseParentMessage(raw);
  if (parsed.ok) {
    const message = parsed.message;
    if (message.type === 'cancel') return cancel();
    if (message.type === 'ack') return acknowledge();
    if (message.type === 'skip_rename') return skipRename.abort();
    // An unknown id (a decision that came after the wait gave up) is ignored: that call was already denied.
    if (message.type === 'reply_decision') return gateWaits.get(message.id)?.(message.approve);
    if (message.type === 'power_recorded') return powerWaits.shift()?.();
    if (message.type === 'warm') return prepare(message.droid);
    // Started above (a pool worker holding no droid, before its run); anything else ignores it.
    if (message.type === 'launch') {
      // A droid booted ahead of its turn (prestart.ts): no turn's until the run comes.
      if (!running && early) process.title = AHEAD_TITLE;
      return;
    }
    return start(message.spec);
  }
  // A run with a bad spec still gets its named answer (turn_spec_invalid), so the controller is not left waiting.
  const run = runEnvelopeSchema.safeParse(raw);
  if (run.success) return start(run.data.spec);
  // Anything else is never acted on: not an ack, not a cancel (the controller's kill backstop still holds).
  process.stderr.write(`worker: ignored invalid IPC message from the controller (${parsed.problem})\n`);
}

/**
 * A pool worker gets ready before its turn is known. If its droid dies while
 * it waits, it says so and keeps waiting: the pool drops it (and kills its
 * group); a turn that took it meanwhile simply starts droid cold. One
 * holding no droid (a sandboxed pool's) first warms its spawn path.
 */
function prepare(droid: WarmDroidSpec | null): void {
  if (running || warmed) {
    process.stderr.write('worker: ignored a warm message after the worker was prepared or given its turn\n');
    return;
  }
  warmed = true;
  process.title = WARM_IDLE_TITLE;
  if (droid) {
    try {
      const spawned = spawnWarmDroid(droid);
      warm = spawned;
      void spawned.client.process.exited.then((exit) => {
        if (!running) void send({ type: 'warm_lost', detail: `warm droid exited (${exit.signal ? `signal ${exit.signal}` : `code ${exit.code}`})` });
      });
    } catch (err) {
      void send({ type: 'warm_lost', detail: `could not start a warm droid: ${(err as Error).message}` });
      return;
    }
  } else {
    warmSpawnPath();
  }
  void send({ type: 'warm_ready' });
}

/**
 * droid's catalog goes to the controller only in the shape the controller
 * accepts (the same schema checks it there); a list that is not is left out
 * and noted on stderr, and the turn goes on.
 */
function sendCatalog(models: unknown, answeredAt: number): void {
  const parsed = parseWorkerMessage({ type: 'catalog', models, answeredAt: new Date(answeredAt).toISOString() });
  if (parsed.ok) void send(parsed.message);
  else process.stderr.write(`worker: droid's session answer carried no usable model list, not reported (${parsed.problem})\n`);
}

function start(spec: unknown): void {
  if (running) {
    process.stderr.write('worker: ignored a second run message; a worker runs exactly one turn\n');
    return;
  }
  running = true;
  if (warmed || process.title === AHEAD_TITLE) process.title = WORKER_TITLE;
  void execute(spec);
}

async function execute(rawSpec: unknown): Promise<void> {
  const parsed = turnSpecSchema.safeParse(rawSpec);
  let result: TurnResult;
  let release = async (_skip: AbortSignal): Promise<RenameOutcome | null> => null;
  if (!parsed.success) {
    // No turn will use them.
    warm?.client.process.kill('SIGKILL');
    early?.started.kill('SIGKILL');
    const detail = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
    result = failedResult({ code: 'turn_spec_invalid', message: `invalid turn spec: ${detail}`, retryable: false });
  } else {
    try {
      ({ result, release } = await runTurn(
        parsed.data,
        {
          cancelled,
          onStarted: (droidSessionId, stages) =>
            void send({ type: 'started', droidSessionId, submittedAt: new Date().toISOString(), stages: { run_received: runReceivedAt, ...stages } }),
          onProgress: (event) => void send({ type: 'progress', event }),
          onUsage: (usage) => void send({ type: 'usage', usage }),
          onCatalog: sendCatalog,
          replyGate: askGate,
          onReply: (event) => void send({ type: 'reply_event', event }),
          onPowerStart: () => void send({ type: 'power_started' }),
          onPower: reportPower,
        },
        warm,
        early,
      ));
    } catch (err) {
      result = failedResult(toErrorInfo(err));
    }
  }
  await send({ type: 'terminal', result });
  // droid goes while the controller persists the result; the slot stays held until both are done.
  const rename = await release(skipRename.signal);
  if (rename) await send({ type: 'rename', outcome: rename });
  await Promise.race([acknowledged, sleep(ACK_WAIT_MS)]);
  process.exit(0);
}
