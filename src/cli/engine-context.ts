import { rmSync, writeFileSync } from 'node:fs';
import { pino } from 'pino';
import { makeDirectory } from '../store/make-directory.js';
import { asyncLocalStorage as activityContext } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import type { Logger as TemporalLogger, LogMetadata } from '@temporalio/common';
import { DefaultLogger, Runtime, type LogLevel, type TelemetryOptions } from '@temporalio/worker';
import { dataDirFromEnv, EnvironmentError } from '../config/environment.js';
import { storeFromEnvironment } from '../store/store-from-environment.js';
import { DEFAULT_PRICES_FILE } from '../config/prices.js';
import type { Logger } from '../logger.js';
import { connectClient, connectWorker } from '../temporal/connection.js';
import { temporalSettingsFromEnv } from '../temporal/settings.js';
import { pauseHarvestSchedule } from '../temporal/schedules.js';
import { createHarvestWorker } from '../temporal/worker.js';
import { outageWaitMs } from '../store/outage.js';
import { writeProbeFile } from '../store/layout.js';
import { assertApiKeyAccepted } from './api-key-check.js';
import { clientFromEnv } from './context.js';
import { taskQueueFromEnv } from './run-environment.js';

let runtimeInstalled = false;
/** The deadline of the free call that learns the API's pace at a worker's start. */
const PACE_CALL_DEADLINE_MS = 10_000;

/**
 * Temporal's logger as one of ours: what the SDK, the workflows (`log` of @temporalio/workflow) and
 * activity contexts log goes through `logger`, as its lines, at its level.
 */
export function temporalLoggerOf(logger: Logger): TemporalLogger {
  const write = (level: LogLevel, message: string, meta?: LogMetadata) => {
    // An error among the fields (the SDK's `Activity failed` gives one as `error`) is written
    // whole, its type, message, stack and causes (pino's serializer): as it is, JSON would keep
    // only its own enumerable fields, `{"name":"CatalogError"}`.
    const fields = meta ? Object.fromEntries(Object.entries(meta).map(([key, value]) => [key, value instanceof Error ? pino.stdSerializers.err(value) : value])) : {};
    logger[level.toLowerCase() as 'info'](fields, message);
  };
  return {
    log: write,
    trace: (message, meta) => write('TRACE', message, meta),
    debug: (message, meta) => write('DEBUG', message, meta),
    info: (message, meta) => write('INFO', message, meta),
    warn: (message, meta) => write('WARN', message, meta),
    error: (message, meta) => write('ERROR', message, meta),
  };
}

/**
 * Temporal's own worker logs go to stderr at WARN and above (LOG_LEVEL=debug shows more); given a
 * logger (a `harvester worker`'s), they go through it instead, with the workflows' per-run lines.
 */
export function installQuietRuntime(logger?: Logger, telemetryOptions?: TelemetryOptions): void {
  if (runtimeInstalled) return;
  runtimeInstalled = true;
  const level = (process.env.LOG_LEVEL ?? 'warn').toUpperCase() as LogLevel;
  Runtime.install({
    // The SDK's metrics, when the worker serves metrics (src/cli/metrics-endpoint.ts). The SDK
    // core's own lines (Rust, written in colour by default) are forwarded to the logger, so every
    // line of a worker's log is JSON.
    // Forwarded without a logger too: the core writes its own to stdout, where `run --json` prints its summary.
    telemetryOptions: { ...telemetryOptions, logging: { forward: {}, filter: { core: 'WARN', other: 'ERROR' } } },
    logger: logger ? temporalLoggerOf(logger) : new DefaultLogger(['TRACE', 'DEBUG', 'INFO', 'WARN', 'ERROR'].includes(level) ? level : 'WARN'),
    // Each command decides what SIGINT and SIGTERM do. Temporal's default handlers shut the worker
    // down under a `harvester run` that kept waiting for its result, and Ctrl-C hung it.
    shutdownSignals: [],
  });
}

/**
 * A worker that cannot write its data directory would take tasks and fail each after buying its
 * first page: it refuses to start instead. Checked by writing, since permission bits do not tell
 * (root writes anywhere, a read-only mount refuses everyone).
 */
export function assertWritableDataDir(dataDir: string): void {
  try {
    makeDirectory(dataDir);
    const probe = writeProbeFile(dataDir, process.pid);
    writeFileSync(probe, '');
    rmSync(probe);
  } catch (error) {
    throw new EnvironmentError(`the data directory ${dataDir} (HARVESTER_DATA_DIR) cannot be written (${(error as NodeJS.ErrnoException).code ?? String(error)}): the worker does not start`);
  }
}

export interface WorkerStartOptions {
  /** The command's own Temporal client, when it has one, for pausing schedules. */
  temporal?: Promise<Client>;
  /** The task queue to poll; HARVESTER_TASK_QUEUE (or `harvester`) unless given. */
  taskQueue?: string;
  /** The worker serves its command's one run: its workflows run on the main thread (src/temporal/worker.ts). */
  workflowsOnMainThread?: boolean;
}

/**
 * How long a stopping worker lets the activities in flight on it finish before it cancels them
 * (they then resume on another worker, from what they landed). Half a minute covers a page and
 * the calls of its items; a longer listing is cut, as a killed worker's would be.
 */
export const WORKER_SHUTDOWN_GRACE_MS = 30_000;

/**
 * A worker wired the way every command runs one: API client, store and Temporal from the
 * environment. Any failure throws before the worker polls; the CLI then exits, closing what was
 * opened. `storeIdentity` is the store it serves: runs started for another are refused.
 */
export async function startWorkerFromEnv(logger: Logger, options: WorkerStartOptions = {}) {
  const { temporal } = options;
  const taskQueue = options.taskQueue ?? taskQueueFromEnv();
  installQuietRuntime();
  const settings = temporalSettingsFromEnv();
  const dataDir = dataDirFromEnv();
  assertWritableDataDir(dataDir);
  // Inside an activity the client retries for 20 s at most: the activity's own timeout is 30 s,
  // and Temporal retries the activity after that. Each call is made for the run whose activity
  // makes it, so the runs this worker serves take turns at the API's rate limit.
  const api = clientFromEnv(logger, { maxElapsedMs: 20_000 }, () => activityContext.getStore()?.info.workflowExecution?.workflowId);
  const client = temporal ?? connectClient(settings);
  // Network round trips, asked at once: the first to fail ends the start. The API key's answer is
  // not waited for before the worker is made (its workflows loaded, its load process started), only
  // before it polls: at 250 ms a call, the two one after the other were a third of `harvester run`'s start.
  const keyAccepted = assertApiKeyAccepted(logger, dataDir);
  // Awaited below; a refusal that comes while the worker is made is no unhandled rejection meanwhile.
  keyAccepted.catch(() => undefined);
  // The API's pace, learnt with a free call while the worker is made: a key accepted earlier that
  // day is not asked about, and a cold rate gate lets one call go at a time until the first answer
  // (rate-gate.ts): every target's first page but one waited a round trip. Nothing waits for it;
  // while it is out, the first call waits at most its deadline. (After a key check that asked, it
  // is one free call more, once a day.)
  keyAccepted
    .then(() => api.serverTime({ deadlineMs: PACE_CALL_DEADLINE_MS }))
    .catch((error: unknown) => logger.debug({ err: error }, 'the API\'s pace was not learnt at the start; the first calls learn it'));
  const ready = Promise.all([connectWorker(settings), client, storeFromEnvironment(dataDir)]);
  const [connection, , store] = await Promise.race([ready, keyAccepted.then(() => ready)]);
  // Made before the worker polls (a new data directory's is written here), so the first task does not wait for it.
  const storeIdentity = await store.identity();
  logger.info({ store: store.description, storeId: storeIdentity.id }, 'worker store');
  const worker = await createHarvestWorker({
    connection,
    namespace: settings.namespace,
    taskQueue,
    shutdownGraceMs: WORKER_SHUTDOWN_GRACE_MS,
    workflowsOnMainThread: options.workflowsOnMainThread ?? false,
    deps: {
      client: api,
      dataDir,
      store,
      pricesFile: process.env.HARVESTER_PRICES ?? DEFAULT_PRICES_FILE,
      logger,
      outageWaitMs: outageWaitMs(),
      pauseSchedule: async (harvest, note) => void (await pauseHarvestSchedule(await client, harvest, note)),
    },
  });
  // A refused key ends the start here, before the worker takes any task: the command exits with its one line.
  await keyAccepted;
  const running = worker.run();
  return {
    worker,
    running,
    taskQueue,
    storeIdentity,
    /** The worker's store: its ledger of the budgets across runs is in the worker's metrics. */
    store,
    async shutdown() {
      worker.shutdown();
      await running;
      await connection.close();
      if (!temporal) await (await client).connection.close();
      await api.close();
      await store.close();
    },
  };
}
