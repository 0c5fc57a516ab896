import { DEFAULT_HARVESTS_FILE, loadHarvestConfig } from '../../config/harvest-config.js';
import { DEFAULT_PRICES_FILE, loadPriceTable } from '../../config/prices.js';
import { budgetStatuses, expectedFromConfig, type BudgetStatus } from '../budget-status.js';
import { existsSync, mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { Command } from 'commander';
import { WorkflowFailedError, type Client } from '@temporalio/client';
import { dataDirFromEnv } from '../../config/environment.js';
import { loadReportData } from '../../report/read-report.js';
import { REPORT_DEFAULTS, type FailedRun, type ReportOptions } from '../../report/report-data.js';
import { renderReport } from '../../report/render-report.js';
import { connectClient, reachable } from '../../temporal/connection.js';
import { temporalSettingsFromEnv } from '../../temporal/settings.js';
import { defaultPayloadConverter } from '@temporalio/common';
import type { StoreIdentity } from '../../store/store-identity.js';
import { HARVEST_TASK_QUEUE } from '../../../workflows/definitions.js';
import { listRuns } from '../run-queries.js';
import { runStoreFromEnv, taskQueueFromEnv } from '../run-environment.js';

/** Temporal's outcomes of a run that ended early; a run's own `failed` covers a workflow that failed. */
const ENDED_EARLY = ['failed', 'terminated', 'cancelled', 'timed_out'] as const;

/**
 * The runs Temporal lists as ended early, each with why: the report lists those the warehouse has
 * no row of (a run refused its key before it recorded itself). When Temporal does not answer at its
 * address, says so instead: the report is of the warehouse, and Temporal is only asked.
 */
async function runsEndedEarly(): Promise<NonNullable<ReportOptions['unrecordedRuns']>> {
  const settings = temporalSettingsFromEnv();
  if (!(await reachable(settings.address))) return { unreachable: `Temporal did not answer at ${settings.address} (TEMPORAL_ADDRESS)` };
  const client = await connectClient(settings);
  const store = await runStoreFromEnv();
  try {
    const runs: FailedRun[] = [];
    for (const status of ENDED_EARLY) {
      // The runs of this harvester's task queue, and, with no queue set, of the queues of `harvester
      // run`'s and `retry`'s own workers (`harvester-<run>`); of those, the runs started for this
      // store: a Temporal shared with other harvesters and data directories holds theirs too.
      const taskQueuePrefix = process.env.HARVESTER_TASK_QUEUE ? undefined : `${HARVEST_TASK_QUEUE}-`;
      const listed = await listRuns(client, { status, limit: REPORT_DEFAULTS.maxFailures, taskQueue: taskQueueFromEnv(), ...(taskQueuePrefix ? { taskQueuePrefix } : {}) });
      for (const run of listed) {
        if (!(await startedFor(client, run.workflowId, store))) continue;
        runs.push({
          runId: run.workflowId,
          harvest: run.harvest,
          status: run.status,
          startedAt: run.startedAt.slice(0, 16).replace('T', ' '),
          finishedAt: run.closedAt === undefined ? null : run.closedAt.slice(0, 16).replace('T', ' '),
          budgetCredits: run.budget ?? null,
          creditsSpent: run.credits ?? null,
          itemsLanded: run.items ?? null,
          error: await whyItEnded(client, run.workflowId, run.status),
        });
      }
    }
    return { runs };
  } finally {
    await client.connection.close();
  }
}

/**
 * Whether a run was started for this store: one that carries another store's id is another data
 * directory's, and one that carries none (a run started where no data directory was named, or
 * before runs carried their store) may be anyone's, so it is counted.
 */
async function startedFor(client: Client, workflowId: string, store: StoreIdentity | undefined): Promise<boolean> {
  if (!store) return true;
  const history = await client.workflow.getHandle(workflowId).fetchHistory();
  const payload = history.events?.[0]?.workflowExecutionStartedEventAttributes?.input?.payloads?.[0];
  const input = payload ? defaultPayloadConverter.fromPayload<{ store?: StoreIdentity } | undefined>(payload) : undefined;
  return input?.store === undefined || input.store.id === store.id;
}

/** Why a run ended early, as Temporal has it: the failure's message, or the run's own reason. */
async function whyItEnded(client: Client, workflowId: string, status: string): Promise<string> {
  try {
    const summary = (await client.workflow.getHandle(workflowId).result()) as { reason?: string } | undefined;
    return summary?.reason ?? `the run ended ${status}`;
  } catch (error) {
    if (error instanceof WorkflowFailedError) return error.cause?.message ?? error.message;
    return `the run ended ${status} (${error instanceof Error ? error.message : String(error)})`;
  }
}

/** The config's budgets across runs with the ledger's figures, as `harvester budgets --no-history` gives them; none without a config file. */
async function reportBudgets(dataDir: string, configFile: string): Promise<BudgetStatus[]> {
  if (!existsSync(configFile)) return [];
  const config = loadHarvestConfig(configFile);
  if (!config.budgets) return [];
  const { storeFromEnvironment } = await import('../../store/store-from-environment.js');
  const store = await storeFromEnvironment(dataDir);
  try {
    return await budgetStatuses(config, store.budgets, expectedFromConfig(loadPriceTable(process.env.HARVESTER_PRICES ?? DEFAULT_PRICES_FILE)));
  } finally {
    await store.close();
  }
}

export function reportCommand(): Command {
  return new Command('report')
    .description(
      'Write a self-contained HTML report of the warehouse: credits per harvest and endpoint, cost per item, items landed per run, views and followers over time for the top items and accounts, engagement rate, fastest-growing items, enrichment coverage, failures',
    )
    .option('--out <file>', 'the HTML file to write (replaced if it exists)', 'report.html')
    .option('--no-temporal', "do not ask Temporal for runs that ended before the warehouse recorded them")
    .option('--config <file>', 'harvest config: its budgets across runs are shown with their figures (as `harvester budgets`)', DEFAULT_HARVESTS_FILE)
    .addHelpText(
      'after',
      `
Reads the warehouse, <data dir>/lake (HARVESTER_DATA_DIR, default ./data), read-only, at its
latest snapshot. Failures also lists the runs of the task queue (HARVESTER_TASK_QUEUE) that
Temporal (TEMPORAL_ADDRESS, as for \`harvester runs\`) has as failed, terminated, cancelled or
timed out and that never reached the warehouse, such as a run refused its key; when Temporal does
not answer, the page says so.
The page is one file of CSS and SVG charts (drawn by Vega-Lite as the report is
made): no scripts, and nothing is loaded from the network, so it opens offline
and can be mailed or archived as is. Its only links are the items' own pages.
Times are UTC.

Example:
  $ harvester report --out reports/$(date +%F).html`,
    )
    .action(async (options: { out: string; temporal: boolean; config: string }) => {
      const dataDir = dataDirFromEnv();
      const data = await loadReportData(dataDir, options.temporal ? { unrecordedRuns: await runsEndedEarly() } : {});
      const budgets = await reportBudgets(dataDir, options.config);
      const html = await renderReport(budgets.length > 0 ? { ...data, budgets } : data);
      const out = resolve(options.out);
      mkdirSync(dirname(out), { recursive: true });
      // Written beside the target and renamed over it, so a browser never shows half a report.
      const temporary = `${out}.${process.pid}.tmp`;
      writeFileSync(temporary, html);
      renameSync(temporary, out);
      process.stderr.write(`wrote the report to ${out} (${Math.ceil(Buffer.byteLength(html) / 1024)} KB)\n`);
    });
}
