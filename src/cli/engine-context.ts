import { DefaultLogger, Runtime, type LogLevel } from '@temporalio/worker';
import { dataDirFromEnv } from '../config/environment.js';
import { DEFAULT_PRICES_FILE } from '../config/prices.js';
import type { Logger } from '../logger.js';
import { connectClient, connectWorker, temporalSettingsFromEnv } from '../temporal/connection.js';
import { pauseHarvestSchedule } from '../temporal/schedules.js';
import { createHarvestWorker } from '../temporal/worker.js';
import { clientFromEnv, taskQueueFromEnv } from './context.js';

let runtimeInstalled = false;

/** Temporal's own worker logs go to stderr at WARN and above (LOG_LEVEL=debug shows more). */
export function installQuietRuntime(): void {
  if (runtimeInstalled) return;
  runtimeInstalled = true;
  const level = (process.env.LOG_LEVEL ?? 'warn').toUpperCase() as LogLevel;
  Runtime.install({ logger: new DefaultLogger(['TRACE', 'DEBUG', 'INFO', 'WARN', 'ERROR'].includes(level) ? level : 'WARN') });
}

/** A worker wired the way every command runs one: API client, data dir and Temporal from the environment. */
export async function startWorkerFromEnv(logger: Logger) {
  installQuietRuntime();
  const settings = temporalSettingsFromEnv();
  // Inside an activity the client retries for 20 s at most: the activity's own timeout is 30 s,
  // and Temporal retries the activity after that.
  const api = clientFromEnv(logger, { maxElapsedMs: 20_000 });
  const temporal = await connectClient(settings);
  const connection = await connectWorker(settings);
  const worker = await createHarvestWorker({
    connection,
    namespace: settings.namespace,
    taskQueue: taskQueueFromEnv(),
    deps: {
      client: api,
      dataDir: dataDirFromEnv(),
      pricesFile: process.env.HARVESTER_PRICES ?? DEFAULT_PRICES_FILE,
      logger,
      pauseSchedule: async (harvest, note) => void (await pauseHarvestSchedule(temporal, harvest, note)),
    },
  });
  const running = worker.run();
  return {
    worker,
    running,
    async shutdown() {
      worker.shutdown();
      await running;
      await connection.close();
      await temporal.connection.close();
      await api.close();
    },
  };
}
