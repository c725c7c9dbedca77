/**
 * src/util/young-generation.ts in fresh Node processes (a young generation
 * that earlier work already grew would prove nothing): survivors allocated
 * once the module is loaded leave the young generation at its first size;
 * after releaseYoungGeneration() the same allocations grow it, as they do
 * when an operator set the growth flag themselves. Runs the built module
 * (npm test builds first).
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../../support/paths.js';

const MODULE = join(REPO_ROOT, 'dist/src/util/young-generation.js');

/** Young generation size (MB) after keeping ~40 MB of small objects alive. */
function youngAfterSurvivors(release: boolean, nodeArgs: string[] = []): number {
  const script = `
    import { getHeapSpaceStatistics } from 'node:v8';
    const { releaseYoungGeneration } = await import(${JSON.stringify(MODULE)});
    if (${release}) releaseYoungGeneration();
    const kept = [];
    for (let i = 0; i < 400_000; i++) kept.push({ i, text: 'run-' + i, more: [i, i + 1] });
    const young = getHeapSpaceStatistics().find((s) => s.space_name === 'new_space').space_size;
    console.log(young / 1048576, kept.length);
  `;
  const run = spawnSync(process.execPath, [...nodeArgs, '--input-type=module', '-e', script], { encoding: 'utf8' });
  expect(run.stderr).toBe('');
  return Number(run.stdout.split(' ')[0]);
}

describe('the young generation at start-up', () => {
  it('stays at its first size while survivors are allocated, and grows again once released', () => {
    const held = youngAfterSurvivors(false);
    expect(held).toBeLessThanOrEqual(2);
    expect(youngAfterSurvivors(true)).toBeGreaterThanOrEqual(4 * held);
  });

  it("leaves an operator's own growth setting alone", () => {
    expect(youngAfterSurvivors(false, ['--semi-space-growth-factor=2'])).toBeGreaterThanOrEqual(4);
  });
});
