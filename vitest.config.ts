import { defineConfig } from 'vitest/config';

// Setup installs the tests' Python packages without bytecode (scripts/python-target.mjs: 102 MiB
// less in .tools), so the tests' Python processes may write it, for the modules they import only:
// where the environment forbids that (PYTHONDONTWRITEBYTECODE, set on the machine the suite was measured on), every one of
// the suite's ~25 Python processes compiled pandas, pyarrow or dbt again (2.4 s became 5.7 s each).
delete process.env.PYTHONDONTWRITEBYTECODE;

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
