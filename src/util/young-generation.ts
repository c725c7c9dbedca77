/**
 * Holds V8's young generation at its first size from the moment this module
 * is evaluated until `releaseYoungGeneration()`: the server's entry (cli.ts)
 * imports it before anything else, and releases it once it is ready.
 *
 * The young generation doubles whenever more bytes survive its collections
 * than it holds, and starting up is almost nothing but survivors: the SDK's
 * and our schemas, then the state. Its two semi-spaces reached their 16 MB
 * maximum while the modules loaded and stayed so on the idle server after
 * (V8 gives them back only under memory pressure): 20-30 MB of resident
 * memory holding nothing (bench/session-scale.ts at 100,000 runs: 167-172 MB
 * at ready, 142-151 MB held). Held, the survivors are promoted to the old
 * generation, where they belong anyway; released, V8's own growth serves
 * the traffic.
 *
 * V8 reads this flag each time it would grow the young generation, so it can
 * change while the process runs. An operator who set it on node's command
 * line keeps their value (node refuses it in NODE_OPTIONS).
 */
import { setFlagsFromString } from 'node:v8';

const FLAG = 'semi-space-growth-factor';
/** V8's own default (`node --v8-options`). */
const DEFAULT_GROWTH = 2;

const given = process.execArgv.join(' ');
let held = !given.includes(FLAG) && !given.includes(FLAG.replaceAll('-', '_'));
if (held) setFlagsFromString(`--${FLAG}=1`);

/** Lets the young generation grow as V8 decides again; later calls do nothing. */
export function releaseYoungGeneration(): void {
  if (!held) return;
  held = false;
  setFlagsFromString(`--${FLAG}=${DEFAULT_GROWTH}`);
}
