import { readFileSync } from 'node:fs';
import { Command } from 'commander';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils.js';
import { Worker } from '@temporalio/worker';
import { connectClient } from '../../temporal/connection.js';
import { temporalSettingsFromEnv } from '../../temporal/settings.js';
import { WORKFLOWS_PATH } from '../../temporal/worker.js';
import { installQuietRuntime } from '../engine-context.js';
import { describeRun } from '../run-queries.js';

export function replayCommand(): Command {
  return new Command('replay')
    .description("Replay a run's history against the current workflow code, to catch nondeterminism before deploying")
    .argument('[workflow-id]', 'the run to replay, fetched from Temporal')
    .option('--history <file>', 'replay a history saved as JSON (`temporal workflow show --output json`) instead')
    .addHelpText(
      'after',
      `
Exit code 0 when the history replays cleanly, 1 when the code no longer matches it.

Examples:
  $ harvester replay run-creators-daily-20261121T060000-ab12
  $ harvester replay --history test/workflows/histories/job-by-polling.json`,
    )
    .action(async (workflowId: string | undefined, options: { history?: string }) => {
      if (!workflowId === !options.history) throw new Error('give a workflow id or --history FILE (one of them)');
      installQuietRuntime();
      if (options.history) {
        const history = historyFromJSON(JSON.parse(readFileSync(options.history, 'utf8')));
        await Worker.runReplayHistory({ workflowsPath: WORKFLOWS_PATH }, history, options.history);
        process.stdout.write(`${options.history}: ${history.events?.length ?? 0} events replay cleanly against the current code\n`);
        return;
      }
      const settings = temporalSettingsFromEnv();
      const client = await connectClient(settings);
      try {
        // Described first: a run Temporal does not know is said so, not as gRPC's NOT_FOUND.
        await describeRun(client, settings, workflowId as string);
        const history = await client.workflow.getHandle(workflowId as string).fetchHistory();
        await Worker.runReplayHistory({ workflowsPath: WORKFLOWS_PATH }, history, workflowId);
        process.stdout.write(`${workflowId}: ${history.events?.length ?? 0} events replay cleanly against the current code\n`);
      } finally {
        await client.connection.close();
      }
    });
}
