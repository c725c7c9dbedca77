/**
 * Named moments where the fault tests kill the controller with a real
 * SIGKILL, to prove what survives a crash at exactly that moment.
 *
 * Driven by the environment variable DROID_MCP_CRASH_AT, read once at load:
 * `name` (crash the first time `name` is reached) or `name:N` (the N-th
 * time). Unset, `crashPoint` is one comparison with null: no cost worth a
 * flag. A value that does not parse refuses to load, so a misspelt test
 * setting fails loudly instead of silently never crashing.
 */
import { writeSync } from 'node:fs';

export const CRASH_POINTS = [
  /** The acceptance is committed; no worker has been spawned for it yet. */
  'accepted',
  /** The worker is spawned; droid has not reported `started` yet. */
  'spawned',
  /** The `started` (running) transition is committed. */
  'started',
  /** The worker reported the session power droid did (a fork, rewind or compaction: issue 40); it is not recorded yet. */
  'power-received',
  /** The worker's terminal result has arrived; it is not persisted yet. */
  'terminal-received',
  /** The terminal result is persisted; the worker is not acknowledged yet. */
  'terminal-persisted',
] as const;

export type CrashPointName = (typeof CRASH_POINTS)[number];

const CRASH_AT_VAR = 'DROID_MCP_CRASH_AT';

export interface CrashPlan {
  name: CrashPointName;
  /** 1-based: crash on this arrival at the point. */
  hit: number;
}

/** `undefined` or empty: no plan. Anything else must be `name` or `name:N` (N ≥ 1). */
export function parseCrashAt(value: string | undefined): CrashPlan | null {
  if (value === undefined || value === '') return null;
  const match = /^([a-z-]+)(?::([1-9][0-9]{0,8}))?$/.exec(value);
  const name = match?.[1];
  if (!match || !CRASH_POINTS.includes(name as CrashPointName)) {
    throw new Error(`${CRASH_AT_VAR}=${JSON.stringify(value)} is not one of ${CRASH_POINTS.join(', ')}, optionally followed by :N (N ≥ 1)`);
  }
  return { name: name as CrashPointName, hit: match[2] === undefined ? 1 : Number(match[2]) };
}

const plan = parseCrashAt(process.env[CRASH_AT_VAR]);
let arrivals = 0;

/** Kills this process at once (SIGKILL, no cleanup) when the plan names this arrival. */
export function crashPoint(name: CrashPointName): void {
  if (plan === null || plan.name !== name) return;
  if (++arrivals !== plan.hit) return;
  // Synchronous, so the line is out before the kill; tests match it to tell this death from any other.
  writeSync(2, `${JSON.stringify({ level: 60, msg: 'crash point reached', crashPoint: name, hit: arrivals, pid: process.pid })}\n`);
  process.kill(process.pid, 'SIGKILL');
}
