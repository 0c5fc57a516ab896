import { constants, setPriority } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { Command } from 'commander';
import { DEFAULT_HARVESTS_FILE, findHarvest, loadHarvestConfig } from '../../config/harvest-config.js';
import { temporalSettingsFromEnv } from '../../temporal/settings.js';
import { startRunExecution } from '../../temporal/run-start.js';
import { quarantinedText, type HarvestStatus } from '../../harvest/progress.js';
import { DEFAULT_CONCURRENCY, MAX_CONCURRENCY } from '../../harvest/rules.js';
import type { SchemaContract } from '../../harvest/schema-contract.js';
import type { harvestWorkflow, HarvestSummary } from '../../../workflows/harvest.js';
import { HARVEST_WORKFLOW_TYPE } from '../../../workflows/definitions.js';
import type { Client } from '@temporalio/client';
import { dataDirFromEnv } from '../../config/environment.js';
import type { StoreIdentity } from '../../store/store-identity.js';
import { localWorkerTaskQueue, runApiFromEnv, runStoreFromEnv, taskQueueFromEnv } from '../run-environment.js';
import { followRetryMs } from '../follow-retry.js';
import { outageWaitMs } from '../../store/outage.js';
import { wholeNumber } from '../options.js';

/** Exit codes of `harvester run`, by the run's status. */
export const RUN_EXIT_CODES: Record<HarvestStatus, number> = {
  completed: 0,
  running: 0,
  completed_with_errors: 3,
  budget_exhausted: 4,
  paused: 5,
  failed: 6,
  skipped: 8,
};

/** Exit code of a run command that stopped following its run, Temporal not answering: the run itself goes on. */
export const RUN_NOT_FOLLOWED_EXIT_CODE = 7;

export function summaryText(summary: HarvestSummary, durationMs: number): string {
  const lines = [`run ${summary.runId} of ${summary.harvest}: ${summary.status}${summary.reason ? ` (${summary.reason})` : ''}`];
  const width = Math.max(6, ...summary.targets.map((target) => target.key.length));
  lines.push(`${'target'.padEnd(width)}  status            items  pages  credits`);
  for (const target of summary.targets) {
    lines.push(`${target.key.padEnd(width)}  ${target.status.padEnd(16)}  ${String(target.items).padStart(5)}  ${String(target.pages).padStart(5)}  ${String(target.credits).padStart(7)}`);
    // An API error's message already ends with its request id.
    if (target.error) lines.push(`${''.padEnd(width)}  ${target.error.type}: ${target.error.message}`);
    if (target.warning) lines.push(`${''.padEnd(width)}  warning: ${target.warning}`);
  }
  const enrichment = summary.enrichment;
  lines.push(`enrichment: ${enrichment.calls} calls, ${enrichment.skipped} skipped, ${enrichment.failed} failed`);
  if (summary.trackedItems) lines.push(`tracked:    ${trackedItemsText(summary.trackedItems)}`);
  lines.push(`credits: ${summary.creditsSpent} of ${summary.budget}; items: ${summary.itemsLanded}; duration: ${(durationMs / 1000).toFixed(1)} s; loaded ${summary.landingsLoaded} landings`);
  if (summary.callsLost > 0) {
    lines.push(`calls whose answers were lost: ${summary.callsLost} (a connection cut or timed out, a landing that could not be written, or a worker that died; charged or perhaps charged, and counted in the credits above)`);
  }
  lines.push(...forecastLines(summary.forecast));
  lines.push(...failedCallLines(summary.failedCalls));
  lines.push(...quarantineLines(summary, 'loads: '));
  lines.push(...lakeRepairLines(summary, 'warehouse: '));
  for (const landing of summary.landingsQuarantined ?? []) lines.push(`quarantined (not loaded): ${landing}`);
  for (const drift of summary.schemaDrift ?? []) {
    lines.push(`schema drift: ${drift.endpoint} answers carry ${drift.field} (${drift.answers} compared, ${drift.firstSeenAt} to ${drift.lastSeenAt}), beyond their schema: ${DRIFT_HANDLED[drift.contract ?? 'evolve']}`);
  }
  return lines.join('\n');
}

/** What the load did with a drifted field, by the harvest's schema contract (src/harvest/schema-contract.ts). */
const DRIFT_HANDLED: Record<SchemaContract, string> = {
  evolve: 'kept in raw_answers for a rebuild (schema contract evolve)',
  freeze: 'those answers were not loaded but set aside in quarantine/ (schema contract freeze)',
  discard: 'dropped from the answers loaded (schema contract discard)',
};

/** The run's answers in quarantine/, as its summary and `show` say them, unless its status's reason says it already. */
export function quarantineLines(progress: Pick<HarvestSummary, 'answersQuarantined' | 'reason'>, label: string): string[] {
  if (!progress.answersQuarantined) return [];
  const text = quarantinedText(progress.answersQuarantined);
  return progress.reason === text ? [] : [`${label}${text}`];
}

/** What the run's start and loads repaired of a damaged lake, as its summary and `show` say it: a line each. */
export function lakeRepairLines(progress: Pick<HarvestSummary, 'lakeRepairs'>, label: string): string[] {
  return (progress.lakeRepairs ?? []).map((line) => `${label}${line}`);
}

/** What the run was expected to spend, and each part that spent outside its range: by how much, and its lines. */
export function forecastLines(forecast: HarvestSummary['forecast']): string[] {
  if (!forecast) return [];
  const source = forecast.fromHistory > 0 ? `${forecast.fromHistory} lines from the lake's history, the rest from the price table` : 'from the price table';
  const lines = [`forecast: ${forecast.expectedCredits} credits (range ${forecast.low} to ${forecast.high}; ${source}); spent ${forecast.spent}`];
  for (const miss of forecast.misses) {
    const edge = miss.by > 0 ? `${miss.by} above its high of ${miss.high}` : `${-miss.by} below its low of ${miss.low}`;
    lines.push(`  outside the forecast: ${miss.part} spent ${miss.spent}, ${edge} (expected ${miss.expected}: ${miss.lines})`);
  }
  return lines;
}

/** Tracked items as the run's summary and `show` say them. */
export function trackedItemsText(tracked: NonNullable<HarvestSummary['trackedItems']>): string {
  return `${tracked.observed} of ${tracked.due} due items observed again`;
}

/** The enrichment calls that failed for good, one line each with why and the request id. */
export function failedCallLines(failed: HarvestSummary['failedCalls'], indent = ''): string[] {
  if (!failed || failed.total === 0) return [];
  const lines = [`${indent}failed calls (${failed.total}; \`harvester retry\` makes them again):`];
  for (const call of failed.first) lines.push(`${indent}  ${call.endpoint} ${call.subject}: ${call.reason}${call.request_id && !call.reason.includes(call.request_id) ? ` (request ${call.request_id})` : ''}`);
  if (failed.total > failed.first.length) lines.push(`${indent}  … and ${failed.total - failed.first.length} more`);
  return lines;
}

/** How long an interrupted run waits for its local worker to hand back what it was doing. */
const SHUTDOWN_GRACE_MS = 5_000;

/**
 * SIGINT (Ctrl-C) and SIGTERM stop `harvester run` alike: `stop` says what happens to the run and
 * stops the local worker, then the process exits 128 + the signal's number, as shells report it.
 * The run itself is not cancelled: its landed pages and checkpoint stay, and a worker finishes it.
 * A second signal exits at once.
 */
function stopOnSignals(stop: (signal: NodeJS.Signals) => Promise<void>): void {
  let stopping = false;
  const onSignal = (signal: NodeJS.Signals) => {
    const code = 128 + constants.signals[signal];
    if (stopping) process.exit(code);
    stopping = true;
    // A worker that fails to stop is no reason to stay: its tasks time out and move on anyway.
    void stop(signal)
      .catch(() => undefined)
      .then(() => process.exit(code));
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
}

/**
 * Where the run's data lands, said as it starts: its store, which only a worker of that store
 * serves; or, for a run handed to workers from an environment that names no store, a warning that
 * it lands wherever the worker that takes it keeps its data.
 */
export function whereDataLands(store: StoreIdentity | undefined, localWorker: boolean): string {
  if (!store) {
    return (
      `warning: this command names no data directory (HARVESTER_DATA_DIR is not set, and ${dataDirFromEnv()} holds none), ` +
      "so the run's data lands wherever the worker that takes it keeps its data"
    );
  }
  return `its data lands in ${store.location}${localWorker ? '' : ': a worker that keeps its data elsewhere refuses the run'}`;
}

/** What `harvester run` is given. */
interface RunOptions {
  config: string;
  budget?: number;
  targets?: number;
  calls?: number;
  localWorker: boolean;
  json?: boolean;
}

const RUN_HELP = `
Exit codes: 0 completed, 3 completed with errors, 4 budget exhausted, 5 paused (credits), 6 failed,
1 bad config or arguments, 2 API error, 7 Temporal did not answer for HARVESTER_OUTAGE_WAIT_SECONDS
(10 minutes by default): the run goes on, and \`harvester show <run>\` follows it.

The run lands in HARVESTER_DATA_DIR (default ./data), or the shared store of HARVESTER_STORAGE: a
worker that keeps its data elsewhere refuses it. Its own worker polls a task queue of its own
(harvester-<run id>) unless HARVESTER_TASK_QUEUE names one to share; with --no-local-worker the run
goes to HARVESTER_TASK_QUEUE (default harvester).

Examples:
  $ harvester run creators-daily
  $ harvester run creators-daily --budget 500 --json`;

export function runCommand(): Command {
  return new Command('run')
    .description('Run one harvest now and wait for it; prints a summary and exits with its status')
    .argument('<name>', 'harvest name from the config')
    .option('--config <file>', 'harvest config', DEFAULT_HARVESTS_FILE)
    .option('--budget <credits>', "this run's credit cap, instead of the harvest's", wholeNumber(1))
    .option('--targets <n>', `targets listed at once (the harvest's concurrency.targets, default ${DEFAULT_CONCURRENCY.targets})`, wholeNumber(1, MAX_CONCURRENCY))
    .option('--calls <n>', `enrichment calls in flight (the harvest's concurrency.calls, default ${DEFAULT_CONCURRENCY.calls})`, wholeNumber(1, MAX_CONCURRENCY))
    .option('--no-local-worker', 'rely on running `harvester worker` processes instead of one in this process')
    .option('--json', 'print the final summary as JSON')
    .addHelpText('after', RUN_HELP)
    .action(runHarvest);
}

/** Starts a run of the harvest `name`, with a worker in this process unless told not to, and follows it to its end. */
async function runHarvest(name: string, options: RunOptions): Promise<void> {
  const harvest = findHarvest(loadHarvestConfig(options.config), name);
  // The run carries the API it is for: a worker set up for another one refuses its tasks.
  const api = runApiFromEnv();
  // How this command follows its run while Temporal does not answer: read (and checked) before the run starts.
  const [followMs, retryMs] = [outageWaitMs(), followRetryMs()];
  const workflowId = `run-${name}-${new Date().toISOString().replace(/[-:.]/g, '').slice(0, 15)}-${Math.random().toString(36).slice(2, 6)}`;
  // A local worker polls a task queue of its own, and serves this run only, unless
  // HARVESTER_TASK_QUEUE names one to share; without one, the run goes to the workers' queue.
  const taskQueue = options.localWorker ? localWorkerTaskQueue(workflowId) : taskQueueFromEnv();
  const ownQueue = options.localWorker && taskQueue !== taskQueueFromEnv();
  const temporal = temporalSettingsFromEnv();
  // Temporal's client, and what follows a run with it, loaded only when needed: a run handed to
  // the workers starts over Temporal's HTTP API without them (src/temporal/run-start.ts), and loads
  // them while it goes. With a local worker, the client connects while the worker starts.
  let connecting: Promise<Client> | undefined;
  const connect = () => {
    if (!connecting) {
      connecting = import('../../temporal/connection.js').then(({ connectClient }) => connectClient(temporal));
      // Handled where it is awaited (the worker's start may await it only later): not an unhandled rejection meanwhile.
      connecting.catch(() => undefined);
    }
    return connecting;
  };
  const starting = options.localWorker ? startLocalWorker(connect(), taskQueue) : undefined;
  // The run carries the store it is for, too: its local worker's, or the one this environment
  // names for the workers elsewhere. A worker that keeps its data elsewhere refuses its tasks.
  const naming = options.localWorker ? undefined : runStoreFromEnv();
  let runStarted: string | undefined;
  stopOnSignals(async (signal) => {
    process.stderr.write(`harvester: ${signal}: ${runStarted ? `stopped waiting; run ${runStarted} stays open in Temporal and ${whoGoesOn(options.localWorker, ownQueue, taskQueue)}` : 'stopped before the run started'}\n`);
    await Promise.race([starting?.then((worker) => worker.shutdown()), sleep(SHUTDOWN_GRACE_MS)]);
  });
  let worker: Awaited<typeof starting>;
  try {
    const [started, named] = await Promise.all([starting, naming]);
    worker = started;
    const store = worker?.storeIdentity ?? named;
    const startedAt = Date.now();
    const run = await startRunExecution(
      temporal,
      {
        workflowId,
        workflowType: HARVEST_WORKFLOW_TYPE,
        taskQueue,
        summary: `${name}: budget ${options.budget ?? harvest.budget.credits} credits`,
        args: [
          {
            harvest,
            ...api,
            ...(store ? { store } : {}),
            ...(options.budget ? { budgetCredits: options.budget } : {}),
            concurrency: { ...(options.targets ? { targets: options.targets } : {}), ...(options.calls ? { calls: options.calls } : {}) },
          },
        ],
      },
      connect,
      (line) => process.stderr.write(`${line}\n`),
    );
    runStarted = workflowId;
    process.stderr.write(`started ${workflowId}\n${whereDataLands(store, options.localWorker)}\n`);
    if (!options.localWorker) followAtLowPriority();
    const [client, { printableSummary, resultWithProgress }] = await Promise.all([connect(), import('../run-progress.js')]);
    const handle = client.workflow.getHandle<typeof harvestWorkflow>(workflowId, run.runId);
    const summary = await resultWithProgress(handle, process.stderr, followMs, retryMs);
    if (options.json) process.stdout.write(`${JSON.stringify(printableSummary(summary), null, 2)}\n`);
    else process.stdout.write(`${summaryText(summary, Date.now() - startedAt)}\n`);
    process.exitCode = RUN_EXIT_CODES[summary.status];
  } catch (error) {
    await notFollowedOrThrow(error, workflowId, options.localWorker, taskQueue);
  } finally {
    await worker?.shutdown();
    const client = await connecting?.catch(() => undefined);
    await client?.connection.close();
  }
}

/**
 * From here this process only follows a run that workers elsewhere do: loading Temporal's client
 * (about 0.3 s of CPU) and reading the progress each second. On the machine of a standing worker
 * (two cores in the peer benchmark), that load ran beside the run's first workflow task and first
 * pages, and took the time it saved at the start back from them on the 32-channel workload. So it
 * yields the CPU (nice 10, which an unprivileged process may set itself): what it does waits for
 * an idle core, and the worker's does not wait for it. A system that refuses is no reason to stop.
 */
function followAtLowPriority(): void {
  try {
    setPriority(constants.priority.PRIORITY_BELOW_NORMAL);
  } catch {
    // Not allowed here (a container's seccomp policy, say): the command follows at its priority.
  }
}

/**
 * The worker of this process, polling `taskQueue`. It and what only it needs (Temporal's worker,
 * the activities, the API client, DuckDB, the logger) are loaded only when one runs here: without,
 * this process only starts the run and watches it, and stays small.
 */
function startLocalWorker(temporal: Promise<Client>, taskQueue: string) {
  return Promise.all([import('../engine-context.js'), import('../../logger.js')]).then(([engine, { createLogger }]) =>
    engine.startWorkerFromEnv(createLogger({ name: 'run', level: process.env.LOG_LEVEL ?? 'warn' }), { temporal, taskQueue, workflowsOnMainThread: true }),
  );
}

/** Who goes on with a run this command stopped waiting for (a signal). */
function whoGoesOn(localWorker: boolean, ownQueue: boolean, taskQueue: string): string {
  if (!localWorker) return 'the running workers go on with it';
  return ownQueue
    ? `a \`harvester worker\` of its data directory on its task queue, \`HARVESTER_TASK_QUEUE=${taskQueue} harvester worker\`, goes on with it`
    : `a \`harvester worker\` on task queue "${taskQueue}" goes on with it`;
}

/**
 * A run that Temporal stopped answering about is said, with how to follow it, and exits
 * RUN_NOT_FOLLOWED_EXIT_CODE: it goes on. A failed run, or any other error, is thrown.
 */
async function notFollowedOrThrow(error: unknown, workflowId: string, localWorker: boolean, taskQueue: string): Promise<void> {
  // Loaded already by a run that got this far: a failed run or an unanswered follow comes from following it.
  const [{ WorkflowFailedError }, { RunNotFollowedError }] = await Promise.all([import('@temporalio/client'), import('../run-progress.js')]);
  if (error instanceof WorkflowFailedError) throw new Error(`run ${workflowId} failed: ${error.cause?.message ?? error.message}`);
  if (!(error instanceof RunNotFollowedError)) throw error;
  const goesOn = localWorker ? `a \`harvester worker\` on task queue "${taskQueue}" goes on with it once Temporal is back` : 'the running workers go on with it once Temporal is back';
  process.stderr.write(`harvester: ${error.message}: stopped following run ${workflowId}; ${goesOn}. Follow it with \`harvester show ${workflowId}\`.\n`);
  process.exitCode = RUN_NOT_FOLLOWED_EXIT_CODE;
}
