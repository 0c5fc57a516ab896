import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/support/global-temporal.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Two cores: the suites start real servers, so keep parallelism to the machine.
    maxWorkers: 2,
  },
});
