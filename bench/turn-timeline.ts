/**
 * A turn's start stage by stage, as bench/latency.ts prints it: each
 * stage's offset from the call (create, or a bare droid's spawn), medians
 * over the runs, one column per variant. The server's stages come from its
 * log line "turn running: prompt submitted to droid" (controller/turns/turn-owner.ts
 * startTimeline); the bare droid's are taken by the bench itself.
 */
import { median } from './stats.js';

/** Stage → ms after the call. */
export type StageOffsets = Record<string, number>;

/** Where each stage is, in the order a turn passes them (names as the worker and the controller mark them). */
const ORDER: Array<[string, string]> = [
  ['launch_began', 'controller takes the turn (acceptance + queue)'],
  ['starting_committed', '`starting` committed (fsync)'],
  ['worker_ready', 'worker forked / taken, spec posted'],
  ['run_received', 'worker has its run message'],
  ['spec_received', 'worker has the spec'],
  ['droid_spawned', 'bwrap / droid spawned'],
  ['droid_first_byte', "droid's first output byte"],
  ['initialized', 'initialize_session answered'],
  ['session_ready', 'settings + Amp tools done'],
  ['before_snapshot', 'git "before" snapshot done'],
  ['submit_sent', 'add_user_message sent'],
  ['submit_answered', 'add_user_message answered'],
  ['model_request', 'first model request'],
];

/** The start timeline the server logged for `session`'s latest turn, as offsets from `callAt` (epoch ms). */
export function loggedStart(stderr: string, session: string, callAt: number): StageOffsets | null {
  let found: { at: number; ms: Record<string, number> } | null = null;
  for (const line of stderr.split('\n')) {
    if (!line.includes('"turn running') || !line.includes(session)) continue;
    try {
      const entry = JSON.parse(line) as { session?: string; start?: { at: number; ms: Record<string, number> } };
      if (entry.session === session && entry.start) found = entry.start;
    } catch {
      // a partial line at the tail's cut
    }
  }
  if (!found) return null;
  const offsets: StageOffsets = {};
  for (const [stage, ms] of Object.entries(found.ms)) offsets[stage] = found.at + ms - callAt;
  return offsets;
}

/** Prints one row per stage and one column per variant: the median offset (ms after the call), and the step from the row before. */
export function printTimelines(columns: Array<{ label: string; runs: StageOffsets[] }>): void {
  const width = 17;
  console.log(`  ${'stage (ms after the call; median, +step)'.padEnd(48)}${columns.map((c) => c.label.slice(0, width - 1).padStart(width)).join('')}`);
  const previous = columns.map(() => 0);
  for (const [stage, label] of ORDER) {
    const cells = columns.map((c, i) => {
      const values = c.runs.map((r) => r[stage]).filter((v): v is number => v !== undefined);
      if (values.length === 0) return '-'.padStart(width);
      const m = median(values);
      // A droid booted ahead (next-turn-droids.ts) was spawned before the call: how long before, no step.
      if (m < 0) return `${m.toFixed(0)} (before)`.padStart(width);
      const step = m - previous[i]!;
      previous[i] = m;
      return `${m.toFixed(0)} (${step >= 0 ? '+' : ''}${step.toFixed(0)})`.padStart(width);
    });
    if (cells.every((c) => c.trim() === '-')) continue;
    console.log(`  ${label.padEnd(48)}${cells.join('')}`);
  }
}
