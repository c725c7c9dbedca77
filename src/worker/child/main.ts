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
import { AHEAD_TITLE, POOL_ARG, WARM_IDLE_TITLE } from '../contract/worker-process.js';
import { fileURLToPath } from 'node:url';
import { startEarly, type EarlyDroid } from './early-droid.js';
import { loadWithCodeCache } from './load-worker.js';
import type { runWorker as RunWorkerFn } from './worker.js';

type RunWorker = typeof RunWorkerFn;

// stderr is a pipe to the controller. Once the controller is gone a write to it fails (EPIPE), and
// that stream error, unhandled, ended this worker before it could stop droid (orphan.ts).
process.stderr.on('error', () => undefined);

const pool = process.argv.includes(POOL_ARG);
// A pool worker is idle until its turn comes, and says so from its first moment.
if (pool) process.title = WARM_IDLE_TITLE;

// The worker proper is loaded synchronously, so no message can come in between:
// a cold worker's `run` is the one message it holds.
if (pool) load([], undefined, 0);
else
  process.once('message', (first: unknown) => {
    const receivedAt = Date.now();
    // A droid booted ahead of its turn (prestart.ts) is no turn's until the run comes: said before it exists.
    if (typeof first === 'object' && first !== null && (first as { type?: unknown }).type === 'launch') process.title = AHEAD_TITLE;
    // No droid for a controller already gone: the worker proper then stops its group at once (orphan.ts).
    load([first], process.connected ? startEarly(first) : undefined, receivedAt);
  });

/** `heldAt`: when the held message came (epoch ms). */
function load(held: unknown[], early: EarlyDroid | undefined, heldAt: number): void {
  let runWorker: RunWorker;
  try {
    const loaded = loadWithCodeCache(fileURLToPath(new URL('./worker.cjs', import.meta.url)));
    runWorker = (loaded.exports as { runWorker?: RunWorker }).runWorker!;
    if (typeof runWorker !== 'function') throw new Error('worker.cjs exports no runWorker');
    // Not an error (the bundle was compiled from source), but every turn pays for it: the runner keeps this in the stderr tail.
    if (loaded.cache !== 'accepted')
      process.stderr.write(`worker: loaded without its code cache (${loaded.cache}): rebuild with this node, and start the server without V8 flags\n`);
  } catch (err) {
    process.stderr.write(`worker: could not load: ${(err as Error).message}\n`);
    early?.started.kill('SIGKILL');
    process.exit(1);
  }
  runWorker(held, early, heldAt);
}
