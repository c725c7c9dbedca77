/**
 * A turn's droid booted before the turn launches (controller/turns/next-turn-droids.ts:
 * a session's next turn, while its current one runs). droid's own start
 * (≈ 0.45 s bare here, more in bwrap) then is off the path of the caller
 * who sends the moment the session is idle.
 *
 * Only for a sandboxed turn, in a ready pool worker (a sandboxed pool's
 * holds no droid of its own) or else a cold one. The droid gets the turn's
 * own launch: its private folders (the sessions copy still empty: filled at
 * launch, after the previous turn's copy-back, runner.ts) and binds. Until
 * the turn launches it has no prompt and no session, so it runs nothing in
 * the workspace; the claim is still taken only by admission. The run's
 * launch decides whether it is used (run-turn.ts turnDroid): a different
 * launch, or a droid that died meanwhile, is killed and droid starts anew.
 */
import { rmSync } from 'node:fs';
import type { TurnSpec } from '../contract/protocol.js';
import { killGroupAndWait } from './process-group.js';
import { earlyLaunch, emptyConfinedTurn, forkWorker, withFolders, type ConfinedTurn, type WorkerOptions } from './runner.js';
import { coldWorkerEnv } from './worker-env.js';
import type { TakenWorker, WarmPool } from './warm-pool.js';

export interface Prestart {
  /** The worker (a pool's, or a cold one) running the turn's droid; the turn's from here. */
  readonly worker: TakenWorker;
  /** The turn's private folders that droid was started with. */
  readonly confined: ConfinedTurn;
  /** For a turn that will not launch: kills the worker's group, then removes the folders; settles once the group is gone. Idempotent. */
  dispose(): Promise<void>;
}

/** Starts `spec`'s droid in a ready worker of a sandboxed pool, else in a cold worker; null when the launch cannot be made now. */
export function prestartWorker(pool: WarmPool | null, spec: TurnSpec, cold: Pick<WorkerOptions, 'env' | 'workerEntry'> = {}): Prestart | null {
  if (spec.sandbox.mode !== 'bwrap') return null;
  let worker: TakenWorker;
  try {
    worker = pool?.take() ?? coldWorker(spec, cold);
  } catch {
    return null;
  }
  let confined: ConfinedTurn | null = null;
  let disposed: Promise<void> | null = null;
  const dispose = () =>
    (disposed ??= (() => {
      worker.startOver();
      // Settles once the folders are gone too: a shutdown waits for it before the process exits.
      return killGroupAndWait(worker.child.pid ?? -1).finally(async () => {
        worker.dispose();
        await confined?.dispose();
      });
    })());
  try {
    confined = emptyConfinedTurn(spec);
    const launch = earlyLaunch(withFolders(spec, confined));
    if (!launch) throw new Error('no launch');
    worker.child.send({ type: 'launch', launch }, () => undefined);
    // A pool's worker: the pool refills soon, for a turn no droid was booted for (a new session's).
    worker.startOver();
  } catch {
    // The turn starts as it would have without: its own folders (the same names, so these go now) and droid at launch.
    if (confined) for (const dir of [confined.sessions.dir, confined.tmp.turnTmp]) rmSync(dir, { recursive: true, force: true });
    confined = null;
    void dispose();
    return null;
  }
  return { worker, confined, dispose };
}

/** A cold worker as a taken one: its entry spawns the droid of its first message, the `launch` (main.ts). */
function coldWorker(spec: TurnSpec, cold: Pick<WorkerOptions, 'env' | 'workerEntry'>): TakenWorker {
  const child = forkWorker({ ...cold, env: coldWorkerEnv(cold.env ?? process.env, spec.replyBack !== undefined) });
  return { child, dispose: () => undefined, startOver: () => undefined };
}
