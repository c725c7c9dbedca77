/**
 * Issue 37's cost: a cold droid's turn start (spawn → the turn's first model
 * request) in the bwrap line before issue 37 (the host's network, `/`
 * readable) against the line after it (its own network namespace and proxy,
 * the homes and roots covered), sampled alternately in one run. Goal: at
 * most 30 ms added (median against median).
 */
import { mkdirSync, mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { bareDroid } from './bare-droid.js';
import { findBwrap } from './latency.js';
import { median, spread } from './stats.js';
import { makeDroidBed } from '../test/support/droid-home.js';

const SETTLE_MS = 300;

export async function main(runs = 8): Promise<void> {
  const bwrapPath = findBwrap();
  if (!bwrapPath) {
    console.log('no bwrap on PATH: nothing to compare');
    return;
  }
  const bed = await makeDroidBed();
  const base = realpathSync(mkdtempSync(join(tmpdir(), 'droid-mcp-bench-egress-')));
  const rows = { before: [] as number[], after: [] as number[] };
  try {
    for (let i = 0; i < runs; i++) {
      // Alternate which goes first: neither gets the quieter half of the run.
      const order = i % 2 === 0 ? (['before', 'after'] as const) : (['after', 'before'] as const);
      for (const which of order) {
        const ws = join(base, 'root', `${which}-${i}`);
        mkdirSync(ws, { recursive: true });
        rows[which].push((await bareDroid(bed, ws, { bwrapPath, confineNetwork: which === 'after' })).ms);
        await sleep(SETTLE_MS);
      }
    }
    const added = median(rows.after) - median(rows.before);
    console.log(
      `turn start, bwrap before issue 37 (host network, / readable): ${median(rows.before).toFixed(0)} ms median (${spread(rows.before)}, ${runs} runs)`,
    );
    console.log(
      `turn start, bwrap with its own network namespace, proxy and covered reads: ${median(rows.after).toFixed(0)} ms median (${spread(rows.after)}, ${runs} runs)`,
    );
    console.log(`added by issue 37: ${added.toFixed(0)} ms (goal: at most 30 ms) -> ${added <= 30 ? 'met' : 'NOT met'}`);
  } finally {
    await bed.cleanup();
    rmSync(base, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await main(Number(process.argv[2] ?? 8));
