import { Command, InvalidArgumentError } from 'commander';
import { connectClient } from '../../temporal/connection.js';
import { temporalSettingsFromEnv } from '../../temporal/settings.js';
import { LISTED_STATUSES, listRuns } from '../run-queries.js';
import { wholeNumber } from '../options.js';
import { textTable } from '../text-table.js';

export function runsCommand(): Command {
  return new Command('runs')
    .description('List recent runs with their status, items, credits, start, end and attempts; a retried run once, as its latest attempt')
    .option('--status <status>', `only runs whose latest attempt is so: ${LISTED_STATUSES.join(', ')}`, (value: string) => {
      if (!(LISTED_STATUSES as readonly string[]).includes(value)) throw new InvalidArgumentError(`expected one of ${LISTED_STATUSES.join(', ')}`);
      return value;
    })
    .option('--name <harvest>', 'only runs of this harvest')
    .option('--limit <n>', 'how many', wholeNumber(1, 1000), 20)
    .option('--json', 'print JSON')
    .addHelpText('after', '\nExamples:\n  $ harvester runs\n  $ harvester runs --status failed --name creators-daily')
    .action(async (options: { status?: string; name?: string; limit: number; json?: boolean }) => {
      const settings = temporalSettingsFromEnv();
      const client = await connectClient(settings);
      try {
        const runs = await listRuns(client, options);
        if (options.json) {
          process.stdout.write(`${JSON.stringify(runs, null, 2)}\n`);
          return;
        }
        if (runs.length === 0) {
          const filters = [options.status ? `status ${options.status}` : '', options.name ? `harvest ${options.name}` : ''].filter(Boolean).join(' and ');
          process.stdout.write(`no runs${filters ? ` with ${filters}` : ''} on Temporal at ${settings.address} (namespace ${settings.namespace})\n`);
          return;
        }
        const rows = runs.map((run) => [run.workflowId, run.harvest, run.status, String(run.items ?? ''), run.credits === undefined ? '' : `${run.credits}/${run.budget}`, run.startedAt.slice(0, 19), run.closedAt?.slice(0, 19) ?? '', String(run.attempts)]);
        process.stdout.write(`${textTable(['run', 'harvest', 'status', 'items', 'credits', 'started', 'ended', 'attempts'], rows, { rule: false })}\n`);
      } finally {
        await client.connection.close();
      }
    });
}
