/**
 * The soak, small: the built server over stdio with the mock droid, 8
 * sessions, ~100 mixed turns (plain, queued follow-ups, steering, cancels,
 * deadlines) at maxConcurrentRuns 4. Every accepted turn must end in exactly
 * one terminal state, nothing may leak, and the server's RSS and descriptors
 * must come back to where they started. `node dist/bench/soak.js` is the
 * full-size run.
 */
import { expect, it } from 'vitest';
import { formatReport, soak, violations } from '../../bench/soak.js';

it('100 mixed turns over 8 sessions end in exactly one terminal state each, with nothing leaked', async () => {
  const report = await soak({ turns: 100, sessions: 8, slots: 4, droid: 'mock', seed: Number(process.env.SOAK_SEED ?? 7) });
  console.log(formatReport(report));
  expect(violations(report)).toEqual([]);
  expect(report.accepted).toBeGreaterThanOrEqual(100);
  // The mix really happened: each kind of round, and each kind of ending.
  for (const kind of ['normal', 'queued', 'steer', 'cancel', 'timeout'] as const) expect(report.rounds[kind]).toBeGreaterThan(0);
  for (const state of ['succeeded', 'interrupted', 'cancelled', 'timed_out']) expect(report.byState[state]).toBeGreaterThan(0);
  expect(report.queuedAtAcceptance).toBeGreaterThan(0);
}, 300_000);
