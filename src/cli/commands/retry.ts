import { Command, Option } from 'commander';
import { WorkflowExecutionAlreadyStartedError, WorkflowFailedError, type WorkflowHandle } from '@temporalio/client';
import { connectClient } from '../../temporal/connection.js';
import { temporalSettingsFromEnv } from '../../temporal/settings.js';
import { RETRYABLE_STATUSES, resumableState } from '../../harvest/checkpoint.js';
import { harvestWorkflow } from '../../../workflows/harvest.js';
import { createLogger } from '../../logger.js';
import { localWorkerTaskQueue, taskQueueFromEnv } from '../run-environment.js';
import { startWorkerFromEnv } from '../engine-context.js';
import { printableSummary, resultWithProgress } from '../run-progress.js';
import { harvestSummary } from '../../temporal/run-summary.js';
import { describeRun, runAttempts } from '../run-queries.js';
import { wholeNumber } from '../options.js';
import { RUN_EXIT_CODES, summaryText } from './run.js';
import { SCHEMA_CONTRACTS, type SchemaContract } from '../../harvest/schema-contract.js';

export function retryCommand(): Command {
  return new Command('retry')
    .description('Re-run a failed, paused or budget-exhausted run from its last checkpoint, paying for no page twice')
    .argument('<run>', 'the run id (workflow id) to retry')
    .option('--budget <credits>', "credits this attempt may spend (default: the harvest's budget)", wholeNumber(1))
    .addOption(
      new Option('--schema-contract <contract>', "the schema contract this attempt's loads apply to all the harvest's resources (default: the harvest's, as the run started)").choices(SCHEMA_CONTRACTS),
    )
    .option('--no-local-worker', 'rely on running `harvester worker` processes')
    .option('--json', 'print the final summary as JSON')
    .addHelpText(
      'after',
      '\nThe retry is the same run, another attempt at it: `runs`, `show`, the warehouse and the report give its\noutcome under the run id, and `show` lists the attempts. Pages landed before are read back from disk,\nnot bought again. Answers a load set aside in <data>/quarantine/ are put back to be loaded by the\nfinal load of the retry; what still cannot be loaded goes back there with its reason. Answers a `schema_contract: freeze` set aside\nload on a retry with --schema-contract evolve (kept) or discard (the new fields dropped).\n\nExample:\n  $ harvester retry run-creators-daily-20261121T060000-ab12 --budget 2000',
    )
    .action(async (runId: string, options: { budget?: number; schemaContract?: SchemaContract; localWorker: boolean; json?: boolean }) => {
      const settings = temporalSettingsFromEnv();
      const client = await connectClient(settings);
      // As for `harvester run`: a local worker on a queue of its own serves this retry only. The retry
      // carries the API and store of its run, so a worker of another data directory refuses it.
      const taskQueue = options.localWorker ? localWorkerTaskQueue(runId) : taskQueueFromEnv();
      const worker = options.localWorker ? await startWorkerFromEnv(createLogger({ name: 'retry', level: process.env.LOG_LEVEL ?? 'warn' }), { taskQueue, workflowsOnMainThread: true }) : undefined;
      try {
        const original = client.workflow.getHandle<typeof harvestWorkflow>(runId);
        const description = await describeRun(client, settings, runId);
        if (description.status.name === 'RUNNING') throw new Error(`run ${runId} is running; only a finished run can be retried from its checkpoint`);
        // A harvest that ended failed is a failed execution carrying its summary: that is resumed too.
        const previous = await harvestSummary(original).catch((error: unknown) => {
          if (error instanceof WorkflowFailedError) return undefined;
          throw error;
        });
        if (!previous) throw new Error(`run ${runId} ${description.status.name.toLowerCase()} with no checkpoint to resume from; start the harvest again with \`harvester run\``);
        if (!(RETRYABLE_STATUSES as readonly string[]).includes(previous.status)) throw new Error(`run ${runId} ${previous.status}: there is nothing to retry`);
        // The harvest as the run saw it: the input of its (latest) execution, JSON-encoded by Temporal.
        const history = await original.fetchHistory();
        const payload = history.events?.[0]?.workflowExecutionStartedEventAttributes?.input?.payloads?.[0]?.data;
        if (!payload) throw new Error(`run ${runId}: its start input cannot be read`);
        const startInput = JSON.parse(Buffer.from(payload).toString('utf8')) as Parameters<typeof harvestWorkflow>[0];
        const budget = options.budget ?? startInput.harvest.budget.credits;
        const harvest = options.schemaContract ? { ...startInput.harvest, schema_contract: { default: options.schemaContract } } : startInput.harvest;
        const attempt = (await runAttempts(client, runId)).length + 1;
        // The same run: a new execution of its workflow id (Temporal allows one once the last has
        // closed), resumed from its checkpoint, so the run id stays the run's everywhere.
        const started = Date.now();
        let handle: WorkflowHandle<typeof harvestWorkflow>;
        try {
          handle = await client.workflow.start(harvestWorkflow, {
            taskQueue,
            workflowId: runId,
            workflowIdReusePolicy: 'ALLOW_DUPLICATE',
            workflowIdConflictPolicy: 'FAIL',
            staticSummary: `${startInput.harvest.name}: attempt ${attempt} (a retry), ${budget} more credits`,
            args: [{ ...startInput, harvest, resume: resumableState(previous.checkpoint, budget) }],
          });
        } catch (error) {
          if (error instanceof WorkflowExecutionAlreadyStartedError) throw new Error(`run ${runId} is being retried already (\`harvester show ${runId}\` follows it)`);
          throw error;
        }
        process.stderr.write(`retrying ${runId} (attempt ${attempt}) with ${budget} more credits\n`);
        // The run's own store, which only its workers serve (runs started before runs carried one: no line).
        if (startInput.store) process.stderr.write(`its data lands in ${startInput.store.location}\n`);
        const summary = await resultWithProgress(handle);
        process.stdout.write(options.json ? `${JSON.stringify(printableSummary(summary), null, 2)}\n` : `${summaryText(summary, Date.now() - started)}\n`);
        process.exitCode = RUN_EXIT_CODES[summary.status];
      } finally {
        await worker?.shutdown();
        await client.connection.close();
      }
    });
}
