/**
 * Worker process entry. A cold worker's first message is its `run`, which
 * carries the droid launch the runner computed (sandbox/turn-launch.ts):
 * this entry spawns that droid first thing, and only then loads the worker
 * proper (worker.ts, a bundle mostly made of zod), so droid's own start
 * overlaps the worker's. The worker validates the message in full, makes
 * its own launch for the turn and uses this droid only if the two are the
 * same; otherwise it kills it and starts its own (run-turn.ts turnDroid).
 * A pool worker loads everything at once: its turn comes later.
 *
 * Only Node built-ins and two small modules are imported here, by design.
 */
import { realpathSync, statSync } from 'node:fs';
import { startDroid } from '../../droid/launch.js';
import { fromWireLaunch, launchOfRun, POOL_ARG, WARM_IDLE_TITLE } from '../shared/worker-process.js';
import type { EarlyDroid } from './run-turn.js';

const pool = process.argv.includes(POOL_ARG);
// A pool worker is idle until its turn comes, and says so from its first moment.
if (pool) process.title = WARM_IDLE_TITLE;

/** Messages that come before the worker proper has loaded, in order: it gets them all. */
const held: unknown[] = [];
const hold = (raw: unknown) => void held.push(raw);
process.on('message', hold);

if (pool) load(undefined);
else process.once('message', (first: unknown) => load(startEarly(first)));

function load(early: EarlyDroid | undefined): void {
  import('./worker.js').then(
    ({ runWorker }) => {
      process.off('message', hold);
      runWorker(held, early);
    },
    (err: unknown) => {
      process.stderr.write(`worker: could not load: ${(err as Error).message}\n`);
      early?.started.child.kill('SIGKILL');
      process.exit(1);
    },
  );
}

/**
 * droid from the runner's launch, when the first message carries one and its
 * cwd is still the directory it names (the check every start makes before
 * droid runs: a path swapped for a symlink meanwhile gets no droid here);
 * otherwise none, and the worker starts droid itself as without this entry.
 */
function startEarly(first: unknown): EarlyDroid | undefined {
  const wire = launchOfRun(first);
  if (!wire) return undefined;
  try {
    if (realpathSync(wire.cwd) !== wire.cwd || !statSync(wire.cwd).isDirectory()) return undefined;
    const launch = fromWireLaunch(wire);
    return { started: startDroid(launch), launch, spawnedAt: performance.timeOrigin + performance.now() };
  } catch {
    // The worker's own checks name what is wrong.
    return undefined;
  }
}
