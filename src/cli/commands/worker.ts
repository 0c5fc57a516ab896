import { Command } from 'commander';
import { createLogger } from '../../logger.js';
import { installQuietRuntime, startWorkerFromEnv } from '../engine-context.js';

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
work in flight up to 30 s to finish.

Example:
  $ harvester worker`,
    )
    .action(async () => {
      const logger = createLogger({ name: 'worker' });
      // Workflows and the SDK log through the worker's logger: one line per run event (run
      // started, target finished, loaded, run ended), each with its run id, at LOG_LEVEL (info).
      installQuietRuntime(logger);
      const worker = await startWorkerFromEnv(logger);
      process.stderr.write(`worker: polling task queue "${worker.taskQueue}" for runs of ${worker.storeIdentity.location}; Ctrl-C stops it\n`);
      const stop = () => void worker.shutdown().then(() => process.exit(0));
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
      await worker.running;
    });
}
