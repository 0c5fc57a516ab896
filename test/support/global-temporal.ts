/**
 * vitest global setup: one real Temporal dev server (the CLI that `npm run setup` installed,
 * started through @temporalio/testing) for the whole run. Tests reach it by `inject('temporalAddress')`
 * (and its HTTP API by `inject('temporalHttpAddress')`)
 * and keep apart by task queue and workflow id.
 *
 * And one temporary folder for the whole run, removed at its end: TMPDIR points into it before
 * the test workers start, so every `os.tmpdir()` of the tests, of the CLIs, workers and browsers
 * they start, and of the dev server, is inside it. The tests make about two hundred temporary
 * folders; this removes them all, including those of a test that failed before its own cleanup.
 */
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import pRetry from 'p-retry';
import type { TestProject } from 'vitest/node';
import { freePort } from '../../src/cli/free-port.js';
import { ephemeralServerOptions } from '../../src/temporal/dev-server.js';

declare module 'vitest' {
  export interface ProvidedContext {
    temporalAddress: string;
    /** Its HTTP API, `host:port` (TEMPORAL_HTTP_ADDRESS). */
    temporalHttpAddress: string;
  }
}

export const SUGGEST_CONTINUE_AS_NEW_AFTER_EVENTS = 300;

/** The prefix of a test run's temporary folder in the system's (what is left of a run killed mid-way is found by it). */
export const TEST_RUN_TEMP_PREFIX = 'social-harvester-tests-';

export default async function setup(project: TestProject) {
  const runTemp = mkdtempSync(join(tmpdir(), TEST_RUN_TEMP_PREFIX));
  // Searchable by others, as the system's temporary folder is: PostgreSQL runs as its own user
  // (test/store/shared-store.test.ts) and must reach its data directory inside.
  chmodSync(runTemp, 0o755);
  const systemTemp = process.env.TMPDIR;
  process.env.TMPDIR = runTemp;
  const removeRunTemp = () => {
    if (systemTemp === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = systemTemp;
    // Retries: a browser or server process of the last test may still be letting go of its files.
    rmSync(runTemp, { recursive: true, force: true, maxRetries: 5, retryDelay: 200 });
  };
  let port = 0;
  let httpPort = 0;
  let env: TestWorkflowEnvironment;
  try {
    // @temporalio/testing gives the server a fixed 5 s to answer; on a busy 2-core machine it once
    // did not, so a start that timed out is tried again, on a new port.
    env = await pRetry(
      async () => {
        [port, httpPort] = await Promise.all([freePort(), freePort()]);
        return TestWorkflowEnvironment.createLocal({
          // Temporal suggests continue-as-new far sooner than in production, so the suite's longer
          // harvests take that path for real (see the continue-as-new test).
          server: ephemeralServerOptions(port, ['--dynamic-config-value', `limit.historyCount.suggestContinueAsNew=${SUGGEST_CONTINUE_AS_NEW_AFTER_EVENTS}`], httpPort),
        });
      },
      { retries: 2, minTimeout: 1000, shouldRetry: ({ error }) => /did not start within/.test(error.message) },
    );
  } catch (error) {
    removeRunTemp();
    throw error;
  }
  project.provide('temporalAddress', `127.0.0.1:${port}`);
  project.provide('temporalHttpAddress', `127.0.0.1:${httpPort}`);
  return async () => {
    try {
      await env.teardown();
    } finally {
      removeRunTemp();
    }
  };
}
