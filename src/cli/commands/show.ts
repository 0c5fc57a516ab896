import { Command } from 'commander';
import { WorkflowFailedError } from '@temporalio/client';
import { connectClient } from '../../temporal/connection.js';
import { temporalSettingsFromEnv } from '../../temporal/settings.js';
import type { HarvestProgress } from '../../harvest/progress.js';
import { RETRYABLE_STATUSES } from '../../harvest/checkpoint.js';
import { progressQuery } from '../../../workflows/definitions.js';
import type { harvestWorkflow, HarvestSummary } from '../../../workflows/harvest.js';
import { printableSummary } from '../run-progress.js';
import { harvestSummary } from '../../temporal/run-summary.js';
import { describeRun, runAttempts, type RunAttempt } from '../run-queries.js';
import { failedCallLines, lakeRepairLines, quarantineLines, trackedItemsText } from './run.js';
import { dataDirFromEnv } from '../../config/environment.js';
import { queryWarehouse } from '../../warehouse/query.js';
import { sqlString } from '../../warehouse/duckdb.js';

/**
 * A run's credits as the lake has them once late charges (charges that arrived after the run ended,
 * issue 39) corrected them: undefined when there were none, or the lake cannot be read here.
 */
async function lateCorrection(runId: string): Promise<{ creditsLate: number; creditsSpent: number } | undefined> {
  try {
    const { rows } = await queryWarehouse(dataDirFromEnv(), `SELECT credits_late::BIGINT AS late, credits_spent::BIGINT AS spent FROM harvest_runs WHERE run_id = ${sqlString(runId)} AND credits_late IS NOT NULL`);
    return rows[0] ? { creditsLate: Number(rows[0].late), creditsSpent: Number(rows[0].spent) } : undefined;
  } catch {
    return undefined;
  }
}

/** The run's attempts, oldest first: when each started and ended, how it ended, and its Temporal run ids. */
function attemptLines(attempts: RunAttempt[]): string[] {
  const lines = ['attempts:'];
  for (const attempt of attempts) {
    const credits = attempt.credits === undefined ? '' : `, ${attempt.credits} of ${attempt.budget} credits`;
    const ended = attempt.closedAt ? `, ended ${attempt.closedAt}` : '';
    const ids = attempt.temporalRunIds.length > 1 ? `Temporal run ${attempt.temporalRunIds[0]} and ${attempt.temporalRunIds.length - 1} continued as new` : `Temporal run ${attempt.temporalRunIds[0]}`;
    lines.push(`  ${attempt.attempt}. ${attempt.status}: started ${attempt.startedAt}${ended}${credits} (${ids})`);
  }
  return lines;
}

function describeProgress(progress: HarvestProgress & Pick<HarvestSummary, 'failedCalls'>, attempts: RunAttempt[]): string {
  const lines = [
    `run:      ${progress.runId}`,
    `harvest:  ${progress.harvest}`,
    `status:   ${progress.status}${progress.reason ? ` (${progress.reason})` : ''}`,
    `started:  ${progress.startedAt}`,
    `credits:  ${progress.creditsSpent} spent, ${progress.creditsReserved} reserved, budget ${progress.budget}`,
    `items:    ${progress.itemsLanded} in ${progress.pagesLanded} pages`,
    `enrich:   ${progress.enrichment.calls} calls, ${progress.enrichment.skipped} skipped, ${progress.enrichment.failed} failed, ${progress.enrichment.pending} items pending`,
    ...(progress.trackedItems ? [`tracked:  ${trackedItemsText(progress.trackedItems)}`] : []),
    ...quarantineLines(progress, 'loads:    '),
    ...lakeRepairLines(progress, 'lake:     '),
    'targets:',
  ];
  for (const target of progress.targets) {
    lines.push(`  ${target.key}`);
    lines.push(`    ${target.status}: ${target.items}/${target.wanted} items, ${target.pages} pages, ${target.credits} credits; checkpoint: ${target.cursor ? `cursor after page ${target.pages}` : target.pages > 0 ? `page ${target.pages}, listing finished` : 'not started'}`);
    // An API error's message already ends with its request id.
    if (target.error) lines.push(`    error: ${target.error.type}: ${target.error.message}`);
    if (target.warning) lines.push(`    warning: ${target.warning}`);
  }
  lines.push(...failedCallLines(progress.failedCalls));
  lines.push(...attemptLines(attempts));
  const next = retryHint(progress);
  if (next) lines.push(`next:     ${next}`);
  return lines.join('\n');
}

/** What to do about a run that stopped short: retry it from its checkpoint, with more credits when they ran out. */
function retryHint(progress: HarvestProgress): string | undefined {
  if (!(RETRYABLE_STATUSES as readonly string[]).includes(progress.status)) return undefined;
  const command = `harvester retry ${progress.runId}`;
  switch (progress.status) {
    case 'budget_exhausted':
      return `\`${command} --budget <credits>\` goes on from the checkpoint with that many more credits (pages landed are not bought again)`;
    case 'paused':
      return `\`${command}\` goes on from the checkpoint once the account has credits again (\`--budget <credits>\` sets this attempt's budget)`;
    default:
      return `\`${command}\` makes what failed again from the checkpoint (\`--budget <credits>\` sets this attempt's budget)`;
  }
}

export function showCommand(): Command {
  return new Command('show')
    .description('Show one run in detail: targets, checkpoints, errors with their request ids, and its attempts (the first, and each retry)')
    .argument('<run>', 'the run id (its workflow id), as `harvester runs` lists it')
    .option('--json', 'print JSON')
    .addHelpText('after', '\nExample:\n  $ harvester show run-creators-daily-20261121T060000-ab12')
    .action(async (runId: string, options: { json?: boolean }) => {
      const settings = temporalSettingsFromEnv();
      const client = await connectClient(settings);
      try {
        // The run's latest attempt: a retried run shows its retry's outcome.
        const handle = client.workflow.getHandle<typeof harvestWorkflow>(runId);
        const [description, attempts] = await Promise.all([describeRun(client, settings, runId), runAttempts(client, runId)]);
        let progress: HarvestProgress & Pick<HarvestSummary, 'failedCalls'>;
        if (description.status.name === 'RUNNING') {
          progress = await handle.query(progressQuery);
        } else {
          try {
            progress = printableSummary(await harvestSummary(handle));
          } catch (error) {
            if (!(error instanceof WorkflowFailedError)) throw error;
            throw new Error(`run ${runId} ${description.status.name.toLowerCase()}: ${error.cause?.message ?? error.message}`);
          }
        }
        const late = description.status.name === 'RUNNING' ? undefined : await lateCorrection(runId);
        const lateLine = late ? `\nlate:     ${late.creditsLate >= 0 ? '+' : ''}${late.creditsLate} credits settled after the run ended (a frozen worker's calls that were on the wire): ${late.creditsSpent} spent in all, as the lake's harvest_runs has it` : '';
        process.stdout.write(options.json ? `${JSON.stringify({ ...progress, ...(late ? { late } : {}), attempts }, null, 2)}\n` : `${describeProgress(progress, attempts)}${lateLine}\n`);
      } finally {
        await client.connection.close();
      }
    });
}
