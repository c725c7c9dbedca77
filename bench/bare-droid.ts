/**
 * What a server's turn start is compared with (latency.ts): droid driven
 * directly by the bench, with no server and no worker.
 *  - bareDroid: a cold droid spawned in the workspace → initialize_session →
 *    add_user_message → the turn's first request at the scripted model.
 *    Optionally inside the project's own bwrap line (the floor of the default
 *    path: bubblewrap's cost and nothing of ours), or with a cold Node worker
 *    starting beside it.
 *  - idleDroid: a droid spawned earlier and left idle (the floor of a warm path).
 */
import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { DroidClient } from '../src/droid/client.js';
import type { DroidLaunch } from '../src/droid/start-droid.js';
import { hostSandboxSpec, sandboxSpecFor } from '../src/sandbox/sandbox.js';
import { attachEgress, egressEntries, type TurnEgress } from '../src/sandbox/egress/turn-egress.js';
import { turnLaunch } from '../src/sandbox/turn-launch.js';
import { makeTurnTmp } from '../src/sandbox/turn-paths.js';
import { prepareSessionCopy } from '../src/sandbox/session-copy.js';
import { factoryDirOf } from '../src/shared/host-paths.js';
import { messageText, script } from '../src/testbed/scripted-model.js';
import { epochMs } from '../src/util/epoch.js';
import { forkWorker } from '../src/worker/parent/runner.js';
import { coldWorkerEnv } from '../src/worker/parent/worker-env.js';
import { killGroupAndWait } from '../src/worker/parent/process-group.js';
import { POOL_ARG } from '../src/worker/contract/worker-process.js';
import type { DroidBed } from '../test/support/droid-home.js';
import { WORKER_ENTRY } from '../test/support/paths.js';
import type { StageOffsets } from './turn-timeline.js';

/** A unique word for one turn's prompt, to find its request at the model. */
export const marker = (what: string) => `${what}-${Math.random().toString(36).slice(2)}`;

/**
 * When the model received the first request holding `marker` (unique per turn) in any message.
 * The list only grows, so each poll reads what arrived since the last: polling every 2 ms beside a
 * starting droid, a rescan of the whole run's requests was CPU taken from the turn being measured.
 */
export async function modelRequestWith(bed: DroidBed, marker: string, timeoutMs = 60_000): Promise<number> {
  const end = Date.now() + timeoutMs;
  const requests = bed.model.requests;
  for (let seen = 0; ;) {
    for (; seen < requests.length; seen++) {
      const request = requests[seen]!;
      if (request.messages.some((m) => m.role === 'user' && messageText(m).includes(marker))) return request.at;
    }
    if (Date.now() > end) throw new Error(`no model request with ${marker} within ${timeoutMs} ms`);
    await sleep(2);
  }
}

export interface BareOptions {
  /**
   * A fresh worker process is forked right after droid is spawned and loads
   * the worker's bundle as a cold worker does (a pool worker's start:
   * main.ts, with no turn to run), then is killed once droid's turn has
   * reached the model. What a worker's start costs droid when the two
   * overlap whole, as they would if droid were spawned before the worker
   * rather than by it (docs/ARCHITECTURE.md, "A cold turn's start").
   */
  besideNode?: boolean;
  /**
   * droid inside bwrap, on the line the bench's server turns get: the same
   * builder (sandbox/turn-launch.ts), a read-only workspace (they run at
   * autonomy off), a state folder hidden, private folders made as the runner
   * makes them. The line is built before the clock starts: the row measures
   * bubblewrap and droid, nothing of ours.
   */
  bwrapPath?: string;
  /**
   * With bwrapPath: the line of issue 37 (hostSandboxSpec): droid in its own
   * network namespace behind its proxy (attached as a turn's worker attaches
   * it), homes and roots covered. Absent: the line before it.
   */
  confineNetwork?: boolean;
}

export async function bareDroid(bed: DroidBed, ws: string, options: BareOptions = {}): Promise<{ ms: number; stages: StageOffsets }> {
  const m = marker('bare');
  const confined = options.bwrapPath === undefined ? undefined : confinedLaunch(bed, ws, options.bwrapPath, options.confineNetwork ?? false);
  let client: DroidClient | undefined;
  let worker: ChildProcess | undefined;
  let egress: TurnEgress | undefined;
  try {
    const t0 = epochMs();
    client = DroidClient.spawn(confined?.launch ?? { droidPath: bed.droidPath, env: bed.home.env, cwd: ws });
    const stages: StageOffsets = { droid_spawned: epochMs() - t0 };
    const listener = client.process.egressListener;
    // As run-turn.ts does: the proxy on the listener droid's sandbox hands out, awaited before droid's first request.
    egress = listener ? attachEgress(listener, egressEntries({ allow: [] }, factoryDirOf(bed.home.env))) : undefined;
    if (options.besideNode) worker = forkWorker({ env: coldWorkerEnv(process.env, false), workerEntry: WORKER_ENTRY }, [POOL_ARG]);
    await egress?.ready;
    await client.initializeSession({ machineId: 'bench', cwd: ws, modelId: bed.modelId, autonomyLevel: 'off', interactionMode: 'spec' });
    stages.initialized = epochMs() - t0;
    stages.submit_sent = stages.initialized;
    const collector = await client.submit(`${m} ${script({ text: 'ok' })}`, () => undefined);
    stages.submit_answered = epochMs() - t0;
    const at = await modelRequestWith(bed, m);
    stages.model_request = at - t0;
    if (client.process.firstOutputAt !== null) stages.droid_first_byte = client.process.firstOutputAt - t0;
    await collector.ended;
    return { ms: at - t0, stages };
  } finally {
    // Every sample, failed or not, stops its droid (shutdown kills one that does not exit) before its private folders go.
    await client?.shutdown();
    egress?.close();
    if (worker?.pid !== undefined) await killGroupAndWait(worker.pid);
    await confined?.dispose();
  }
}

/** The bwrap line of the bench's server turns for `ws`, and its private folders (removed by `dispose`, which says what it could not remove). */
function confinedLaunch(bed: DroidBed, ws: string, bwrapPath: string, confineNetwork: boolean): { launch: DroidLaunch; dispose(): Promise<void> } {
  const runId = `bench-${randomUUID()}`;
  // Beside the workspace, as a server's state directory is beside its approved root.
  const state = mkdtempSync(join(dirname(ws), 'floor-state-'));
  const sessions = prepareSessionCopy(factoryDirOf(bed.home.env), ws, null, runId);
  const tmp = makeTurnTmp(runId);
  const dispose = async () => {
    const left = await Promise.all([sessions.dispose(), tmp.dispose()]);
    rmSync(state, { recursive: true, force: true });
    for (const what of left) if (what) console.error(`bench: a private folder of the bwrap floor was not removed: ${what}`);
  };
  try {
    const host = confineNetwork
      ? hostSandboxSpec(
          bwrapPath,
          { stateDirectory: state, approvedDirectories: [dirname(ws)], network: { mode: 'proxy', allow: [] }, sandboxReadable: [] },
          bed.home.env,
        )
      : sandboxSpecFor(bwrapPath, state, null);
    const sandbox = { ...host, sessionsCopy: sessions.dir, turnTmp: tmp.turnTmp };
    return { launch: turnLaunch({ droidPath: bed.droidPath, droidEnv: bed.home.env, workspace: ws, autonomy: 'off', sandbox }).droid, dispose };
  } catch (err) {
    void dispose();
    throw err;
  }
}

/**
 * The floor of any warm path: a droid spawned earlier in a neutral folder and
 * left idle, driven directly (no server, no worker): initialize_session in the
 * workspace → the turn's first model request. What droid itself does after a
 * submit (≈ 200-350 ms here) is in every path, warm or cold.
 */
export async function idleDroid(bed: DroidBed, ws: string, idleDir: string, settleMs: number): Promise<number> {
  const m = marker('idle');
  const client = DroidClient.spawn({ droidPath: bed.droidPath, env: bed.home.env, cwd: idleDir });
  try {
    await sleep(settleMs);
    const t0 = Date.now();
    await client.initializeSession({ machineId: 'bench', cwd: ws, modelId: bed.modelId, autonomyLevel: 'off', interactionMode: 'spec' });
    const collector = await client.submit(`${m} ${script({ text: 'ok' })}`, () => undefined);
    const at = await modelRequestWith(bed, m);
    await collector.ended;
    return at - t0;
  } finally {
    await client.shutdown();
  }
}
