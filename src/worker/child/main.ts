/**
 * Worker process entry. A cold worker's first message is its `run`, which
 * carries the droid launch the runner computed (sandbox/turn-launch.ts):
 * this entry spawns that droid first thing, and only then loads the worker
 * proper (worker.ts, a CommonJS bundle mostly made of zod, compiled from its
 * code cache: load-worker.ts), so droid's own start
 * overlaps the worker's. The worker validates the message in full, makes
 * its own launch for the turn and uses this droid only if the two are the
 * same; otherwise it kills it and starts its own (run-turn.ts turnDroid).
 * A pool worker loads everything at once: its turn comes later.
 *
 * Only Node built-ins and a few small modules are imported here, by design.
 */
import { POOL_ARG, WARM_IDLE_TITLE } from '../shared/worker-process.js';
import { dirname, join } from 'node:path';
import { startEarly, type EarlyDroid } from './early-droid.js';
import { loadWithCodeCache } from './load-worker.js';
import type { runWorker as RunWorkerFn } from './worker.js';

type RunWorker = typeof RunWorkerFn;

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
  let runWorker: RunWorker;
  try {
    // Beside this entry in dist/ (process.argv[1]: the file Node was forked with).
    ({ runWorker } = loadWithCodeCache(join(dirname(process.argv[1]!), 'worker.cjs')).exports as { runWorker: RunWorker });
  } catch (err) {
    process.stderr.write(`worker: could not load: ${(err as Error).message}\n`);
    early?.started.kill('SIGKILL');
    process.exit(1);
  }
  process.off('message', hold);
  runWorker(held, early);
}
