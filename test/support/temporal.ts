import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime, type Worker } from '@temporalio/worker';
import { msToTs } from '@temporalio/common/lib/time.js';
import { inject } from 'vitest';
import type { SocialApiClient } from '../../src/api/client.js';
import { parseHarvestConfig } from '../../src/config/harvest-config.js';
import type { Harvest } from '../../src/harvest/harvest-types.js';
import { SEARCH_ATTRIBUTES } from '../../src/temporal/dev-server.js';
import { createHarvestWorker, prebuiltWorkflowBundle } from '../../src/temporal/worker.js';
import { waitFor } from './emulator.js';
import { harvestSummary } from '../../src/temporal/run-summary.js';
import type { HarvestInput, HarvestSummary } from '../../workflows/harvest.js';

let runtimeInstalled = false;

/** The workflows as the build bundled them (npm run build), the same bundle the CLI's workers load. */
export function workflowBundle(): { codePath: string } {
  return prebuiltWorkflowBundle();
}

export async function temporalClient(): Promise<Client> {
  const connection = await Connection.connect({ address: inject('temporalAddress') });
  return new Client({ connection });
}

export interface TestWorker {
  worker: Worker;
  taskQueue: string;
  dataDir: string;
  stop(): Promise<void>;
}

/** A real worker on its own task queue, with its own data directory, in this process. */
export async function startTestWorker(
  api: SocialApiClient,
  options: { dataDir?: string; taskQueue?: string; namespace?: string; pauseSchedule?: (harvest: string, note: string) => Promise<void>; loadEveryMs?: number } = {},
): Promise<TestWorker> {
  if (!runtimeInstalled) {
    // Errors only: the fault tests make targets fail on purpose, and each failure's warning (with
    // its stack) buried the test report; tests assert on the failures themselves.
    Runtime.install({ logger: new DefaultLogger('ERROR') });
    runtimeInstalled = true;
  }
  const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), 'harvest-'));
  const taskQueue = options.taskQueue ?? `test-${Math.random().toString(36).slice(2, 10)}`;
  const connection = await NativeConnection.connect({ address: inject('temporalAddress') });
  const worker = await createHarvestWorker({
    connection,
    namespace: options.namespace ?? 'default',
    taskQueue,
    deps: {
      client: api,
      dataDir,
      pricesFile: undefined,
      ...(options.pauseSchedule ? { pauseSchedule: options.pauseSchedule } : {}),
      ...(options.loadEveryMs ? { loadEveryMs: options.loadEveryMs } : {}),
    },
  });
  const running = worker.run();
  return {
    worker,
    taskQueue,
    dataDir,
    async stop() {
      worker.shutdown();
      await running;
      await connection.close();
    },
  };
}

/** The Keyword type of the API's IndexedValueType enum (@temporalio/proto is not a direct dependency). */
const INDEXED_VALUE_TYPE_KEYWORD = 2;

/**
 * A namespace of a test file's own on the shared dev server, with the search attributes runs set:
 * there its workers may poll the default task queue (`harvester`), as users' do, and take no other
 * file's runs. Resolves once the namespace answers.
 */
export async function registerTestNamespace(namespace: string): Promise<void> {
  const connection = await Connection.connect({ address: inject('temporalAddress') });
  try {
    await connection.workflowService.registerNamespace({ namespace, workflowExecutionRetentionPeriod: msToTs('1 day') });
    const searchAttributes = Object.fromEntries(Object.keys(SEARCH_ATTRIBUTES).map((name) => [name, INDEXED_VALUE_TYPE_KEYWORD]));
    await waitFor(() => connection.operatorService.addSearchAttributes({ namespace, searchAttributes }).then(() => true, () => undefined), 15_000, 'the namespace to take search attributes');
    const client = new Client({ connection, namespace });
    await waitFor(() => client.workflow.count().then(() => true, () => undefined), 15_000, 'the namespace to answer');
  } finally {
    await connection.close();
  }
}

/** A harvest written as YAML, checked by the real config loader. */
export function harvestFrom(yaml: string): Harvest {
  return parseHarvestConfig(yaml, 'test-harvest.yaml').harvests[0]!;
}

/** The price table, as the client support module loads it. */
export { prices } from './client.js';

/**
 * Runs a harvest on a task queue to its end and gives its summary: a harvest that ended `failed`
 * fails its workflow execution, and its summary is then read from the failure.
 */
export async function executeHarvest(temporal: Client, options: { taskQueue: string; workflowId: string; input: HarvestInput }): Promise<HarvestSummary> {
  return harvestSummary(await temporal.workflow.start('harvestWorkflow', { taskQueue: options.taskQueue, workflowId: options.workflowId, args: [options.input] }));
}
