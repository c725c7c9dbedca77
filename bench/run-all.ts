/**
 * Runs every benchmark in turn and prints its figures. Each one can also be
 * run alone: node dist/bench/<name>.js
 */
import { main as latency } from './latency.js';
import { main as followUp } from './follow-up.js';
import { main as stateTransition } from './state-transition.js';
import { main as sessionScale } from './session-scale.js';
import { main as recordLoad } from './record-load.js';
import { main as startup } from './startup.js';
import { main as findSessions } from './find-sessions.js';
import { main as httpStatus } from './http-status.js';
import { main as soak } from './soak.js';
import { main as lineReader } from './line-reader.js';
import { main as evidence } from './evidence.js';
import { main as catalogPause } from './catalog-pause.js';
import { main as liveUsage } from './live-usage.js';
import { main as checkout } from './checkout.js';
import { main as egress } from './egress.js';
import { printGoals } from './goals.js';

const benches: Array<[string, () => Promise<unknown> | unknown]> = [
  ['start-up latency', latency],
  ['follow-up sent the moment wait returns, beside a bare droid', () => followUp(5)],
  ['state transition cost', stateTransition],
  ['find over 10k sessions (in process)', findSessions],
  ['stdio handshake: the floor, empty state, 100k runs', () => startup()],
  ['server at 10k sessions / 100k runs', sessionScale],
  ['loading 100k runs: the guard and interner derived from the record schemas', () => recordLoad()],
  ['status over HTTP, 16 clients', httpStatus],
  ['soak: 300 mixed turns, 8 sessions, 4 slots (mock droid)', () => soak([])],
  ['one long frame line', lineReader],
  ['changed-files evidence: added time per turn', evidence],
  ['create after a pause longer than the catalog TTL', () => catalogPause()],
  ['live usage: durable writes per turn, on vs off; a turn stopped at its ceiling', liveUsage],
  ['one session checkout of a 10,000-file repository (isolation: "worktree")', checkout],
  ['turn start: the network namespace, proxy and covered reads (issue 37) against the line before', () => egress()],
];

for (const [name, run] of benches) {
  console.log(`\n== ${name} ==`);
  await run();
}

console.log('\n== goals (issues 12, 19 and 38), as measured above ==');
printGoals();
