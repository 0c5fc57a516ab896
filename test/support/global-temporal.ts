/**
 * vitest global setup: one real Temporal dev server (the CLI that `npm run setup` installed,
 * started through @temporalio/testing) for the whole run. Tests reach it by `inject('temporalAddress')`
 * and keep apart by task queue and workflow id.
 */
import { TestWorkflowEnvironment } from '@temporalio/testing';
import pRetry from 'p-retry';
import type { TestProject } from 'vitest/node';
import { freePort } from '../../src/cli/free-port.js';
import { ephemeralServerOptions } from '../../src/temporal/dev-server.js';

declare module 'vitest' {
  export interface ProvidedContext {
    temporalAddress: string;
  }
}

export const SUGGEST_CONTINUE_AS_NEW_AFTER_EVENTS = 300;

export default async function setup(project: TestProject) {
  let port = 0;
  // @temporalio/testing gives the server a fixed 5 s to answer; on a busy 2-core machine it once
  // did not, so a start that timed out is tried again, on a new port.
  const env = await pRetry(
    async () => {
      port = await freePort();
      return TestWorkflowEnvironment.createLocal({
        // Temporal suggests continue-as-new far sooner than in production, so the suite's longer
        // harvests take that path for real (see the continue-as-new test).
        server: ephemeralServerOptions(port, ['--dynamic-config-value', `limit.historyCount.suggestContinueAsNew=${SUGGEST_CONTINUE_AS_NEW_AFTER_EVENTS}`]),
      });
    },
    { retries: 2, minTimeout: 1000, shouldRetry: ({ error }) => /did not start within/.test(error.message) },
  );
  project.provide('temporalAddress', `127.0.0.1:${port}`);
  return async () => {
    await env.teardown();
  };
}
