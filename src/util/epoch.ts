/**
 * Wall-clock time in ms, comparable across the processes of one host
 * (controller, worker, bench): for stage timelines. The system clock, not
 * `performance.timeOrigin + performance.now()`: that one is fixed at each
 * process's start and then runs on the monotonic clock, and the two drift
 * apart while the system clock is slewed (measured here: 0.9 ms in 3 s), so
 * a worker forked long ago disagreed with the controller by tens of ms.
 */
export function epochMs(): number {
  return Date.now();
}
