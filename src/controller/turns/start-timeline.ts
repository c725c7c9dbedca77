import type { StartTimeline } from '../../worker/parent/runner.js';

/**
 * A turn's start as the log shows it: when the launch began (epoch ms) and
 * each later stage in ms after it, in the order they happened.
 */
export function startTimeline(stages: StartTimeline): { at: number; ms: Record<string, number> } {
  const at = stages.launch_began ?? Math.min(...Object.values(stages));
  const ms: Record<string, number> = {};
  for (const [stage, when] of Object.entries(stages).sort((a, b) => a[1] - b[1])) ms[stage] = Math.round((when - at) * 10) / 10;
  return { at, ms };
}
