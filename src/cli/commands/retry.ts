import { Command } from 'commander';
import { connectClient, temporalSettingsFromEnv } from '../../temporal/connection.js';
import { RETRYABLE_STATUSES, resumableState } from '../../../workflows/checkpoint.js';
import type { HarvestInput, HarvestSummary } from '../../../workflows/harvest.js';
import { createLogger } from '../../logger.js';
import { taskQueueFromEnv } from '../context.js';
import { startWorkerFromEnv } from '../engine-context.js';
import { printableSummary, resultWithProgress } from '../run-progress.js';
import { wholeNumber } from '../options.js';
import { RUN_EXIT_CODES, summaryText } from './run.js';

export function retryCommand(): Command {
  return new Command('retry')
    .description('Re-run a failed, paused or budget-exhausted run from its last checkpoint, paying for no page twice')
    .argument('<run>', 'the run id (workflow id) to retry')
    .option('--budget <credits>', "credits this attempt may spend (default: the harvest's budget)", wholeNumber(1))
    .option('--no-local-worker', 'rely on running `harvester worker` processes')
    .option('--json', 'print the final summary as JSON')
    .addHelpText('after', '\nThe retry keeps the run id: pages it landed before are read back from disk, not bought again.\n\nExample:\n  $ harvester retry run-creators-daily-20261121T060000-ab12 --budget 2000')
    .action(async (runId: string, options: { budget?: number; localWorker: boolean; json?: boolean }) => {
      const client = await connectClient(temporalSettingsFromEnv());
      const worker = options.localWorker ? await startWorkerFromEnv(createLogger({ name: 'retry', level: process.env.LOG_LEVEL ?? 'warn' })) : undefined;
      try {
        const original = client.workflow.getHandle(runId);
        const description = await original.describe();
        if (description.status.name !== 'COMPLETED') throw new Error(`run ${runId} is ${description.status.name.toLowerCase()}; only a finished run can be retried from its checkpoint`);
        const previous = (await original.result()) as HarvestSummary;
        if (!(RETRYABLE_STATUSES as readonly string[]).includes(previous.status)) throw new Error(`run ${runId} ${previous.status}: there is nothing to retry`);
        // The harvest as the run saw it: the input of its (latest) execution, JSON-encoded by Temporal.
        const history = await original.fetchHistory();
        const payload = history.events?.[0]?.workflowExecutionStartedEventAttributes?.input?.payloads?.[0]?.data;
        if (!payload) throw new Error(`run ${runId}: its start input cannot be read`);
        const startInput = JSON.parse(Buffer.from(payload).toString('utf8')) as HarvestInput;
        const budget = options.budget ?? startInput.harvest.budget.credits;
        const retryId = `${runId}-retry-${Date.now().toString(36)}`;
        const handle = await client.workflow.start('harvestWorkflow', {
          taskQueue: taskQueueFromEnv(),
          workflowId: retryId,
          args: [{ ...startInput, resume: resumableState(previous.checkpoint, budget) }],
        });
        process.stderr.write(`retrying ${runId} as ${retryId} with ${budget} more credits\n`);
        const summary = await resultWithProgress(handle);
        process.stdout.write(options.json ? `${JSON.stringify(printableSummary(summary), null, 2)}\n` : `${summaryText(summary, Date.now() - Date.parse(summary.startedAt))}\n`);
        process.exitCode = RUN_EXIT_CODES[summary.status];
      } finally {
        await worker?.shutdown();
        await client.connection.close();
      }
    });
}
