/**
 * Temporal's time-skipping test environment (TestWorkflowEnvironment.createTimeSkipping()): a test
 * server whose clock jumps to the next timer whenever no workflow task or activity is running, so
 * a workflow's hour of job polling or day of backoff passes in milliseconds. The server is the Java
 * SDK's test server that `npm run setup -- --for-tests` installs from Maven Central into
 * .tools/temporal-test-server (@temporalio/testing would otherwise download one at run time). The
 * workflows are the bundle the build made (npm run build), as for every worker in the tests; the
 * activities are the test's stubs, run in this process.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { DefaultLogger, Runtime, Worker } from '@temporalio/worker';
import { TOOLS_DIR } from '../../src/project-paths.js';
import { SEARCH_ATTRIBUTES } from '../../src/temporal/dev-server.js';
import { workflowBundle } from './temporal.js';

export const TEST_SERVER = join(TOOLS_DIR, 'temporal-test-server', 'temporal-test-server');
const INDEXED_VALUE_TYPE_KEYWORD = 2;

/** A time-skipping environment with the harvest's search attributes registered. */
export async function startTimeSkipping(): Promise<TestWorkflowEnvironment> {
  if (!existsSync(TEST_SERVER)) throw new Error(`no Temporal test server at ${TEST_SERVER}: run \`npm run setup -- --for-tests\``);
  // Errors only, as for the tests' real workers: the tests assert on what the runs did.
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  const env = await startTestServer();
  const searchAttributes = Object.fromEntries(Object.keys(SEARCH_ATTRIBUTES).map((name) => [name, INDEXED_VALUE_TYPE_KEYWORD]));
  await env.connection.operatorService.addSearchAttributes({ namespace: env.namespace ?? 'default', searchAttributes });
  return env;
}

/**
 * The SDK gives the test server 5 s to answer on its port (a fixed limit in sdk-core), and a JVM
 * starting on a busy machine can take longer: a server that did not answer in time is killed by the
 * SDK, and another started, up to three in all. (The second starts faster: its jars are cached.)
 */
async function startTestServer(): Promise<TestWorkflowEnvironment> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await TestWorkflowEnvironment.createTimeSkipping({ server: { executable: { type: 'existing-path', path: TEST_SERVER } } });
    } catch (error) {
      if (attempt === 3 || !/did not start within/.test(String(error))) throw error;
    }
  }
}

/** A worker of the bundled workflows with `activities` (stubs), on its own task queue. */
export async function stubbedWorker(env: TestWorkflowEnvironment, taskQueue: string, activities: object): Promise<Worker> {
  return Worker.create({ connection: env.nativeConnection, namespace: env.namespace ?? 'default', taskQueue, workflowBundle: workflowBundle(), activities });
}
