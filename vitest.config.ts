import { defineConfig } from 'vitest/config';

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
