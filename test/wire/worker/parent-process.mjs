// A stand-in controller for one test: starts a worker for the turn spec in
// argv[2], reports `started` to its own parent, then waits to be killed.
import { startWorker } from '../../../dist/src/worker/parent/runner.js';

const spec = JSON.parse(process.argv[2]);
startWorker(spec, { onStarted: () => process.send?.({ started: true }) });
setInterval(() => {}, 1_000);
