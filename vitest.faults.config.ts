import { defineConfig } from 'vitest/config';

// The fault campaign and soak (`npm run test:faults`): the built server is
// killed, restarted and driven through hangs, so tests are long; they spawn
// real droid processes, so at most two files run at once (2-core machines).
export default defineConfig({
  test: {
    include: ['test/faults/**/*.test.ts'],
    testTimeout: 180_000,
    hookTimeout: 60_000,
    maxWorkers: 2,
    fileParallelism: true,
  },
});
