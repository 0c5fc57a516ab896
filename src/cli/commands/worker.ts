import { Command } from 'commander';
import { createLogger } from '../../logger.js';
import { installQuietRuntime, startWorkerFromEnv } from '../engine-context.js';
import { METRICS_PORT_VARIABLE, metricsPortFrom, workerMetricsEndpoint } from '../metrics-endpoint.js';
import { wholeNumber } from '../options.js';
import { DEFAULT_HARVESTS_FILE } from '../../config/harvest-config.js';
import { watchBudgets } from '../../metrics/budget-metrics.js';
import { budgetGaugeReader } from '../budget-status.js';

export function workerCommand(): Command {
  return new Command('worker')
    .description('Run a harvest worker; several may run at once, on one machine or many')
    .addHelpText(
      'after',
      `
Connects to TEMPORAL_ADDRESS (default 127.0.0.1:7233, the dev server of \`harvester temporal\`) and
TEMPORAL_NAMESPACE, calls the API at SOCIAL_API_BASE_URL with SOCIAL_API_KEY, and lands data in
HARVESTER_DATA_DIR (default ./data). It serves only runs started for that data directory (or shared
store): it refuses the tasks of a run started for another. Ctrl-C drains and stops it, giving the
work in flight up to 30 s to finish. With --metrics-port (or HARVESTER_METRICS_PORT) it serves
Prometheus metrics, its own and the Temporal SDK's, at /metrics (docs/operations.md lists them).

Example:
  $ harvester worker
  $ harvester worker --metrics-port 9464`,
    )
    .option('--metrics-port <port>', `serve Prometheus metrics at http://<host>:<port>/metrics (or ${METRICS_PORT_VARIABLE}); 0 for any free port`, wholeNumber(0, 65_535))
    .option('--config <file>', "harvest config: its budgets across runs are in the metrics (the ledger's figures and their month-end forecasts)", DEFAULT_HARVESTS_FILE)
    .action(async (options: { metricsPort?: number; config: string }) => {
      const logger = createLogger({ name: 'worker' });
      const metricsPort = metricsPortFrom(options.metricsPort);
      const metrics = metricsPort === undefined ? undefined : await workerMetricsEndpoint(metricsPort);
      // Workflows and the SDK log through the worker's logger: one line per run event (run
      // started, target finished, loaded, run ended), each with its run id, at LOG_LEVEL (info).
      installQuietRuntime(logger, metrics?.telemetry);
      const worker = await startWorkerFromEnv(logger);
      // Before the line that says it polls: whoever waits for that line (a service manager, a test)
      // may stop the worker the moment it reads it, and a SIGTERM with no listener yet kills the
      // process outright (exit by signal, its work in flight cut) instead of draining it.
      const stop = () => void worker.shutdown().then(() => process.exit(0));
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
      if (metrics) watchBudgets(budgetGaugeReader(worker.store, options.config));
      const served = await metrics?.serve();
      // Lines of the log like every other (JSON, one per line, so a log collector takes them whole),
      // said at any LOG_LEVEL: what a service manager, and whoever started it, waits for.
      const started = logger.child({}, { level: 'info' });
      if (served) started.info({ metrics: `http://127.0.0.1:${served.port}/metrics` }, `metrics at http://127.0.0.1:${served.port}/metrics`);
      started.info({ taskQueue: worker.taskQueue, store: worker.storeIdentity.location }, `polling task queue "${worker.taskQueue}" for runs of ${worker.storeIdentity.location}; Ctrl-C stops it`);
      await worker.running;
    });
}
