/**
 * Wall-clock time in ms with sub-ms precision, comparable across the
 * processes of one host (controller, worker, bench): for stage timelines.
 */
export function epochMs(): number {
  return performance.timeOrigin + performance.now();
}
