import { Command } from 'commander';
import { DEFAULT_HARVESTS_FILE, loadHarvestConfig } from '../../config/harvest-config.js';
import { dataDirFromEnv } from '../../config/environment.js';
import { DEFAULT_PRICES_FILE, loadPriceTable } from '../../config/prices.js';
import { planHarvestCost } from '../../harvest/cost-plan.js';
import { budgetStatuses, expectedFromConfig, type BudgetStatus, type RunExpectation } from '../budget-status.js';
import { isoTime } from '../options.js';
import { textTable } from '../text-table.js';
import type { PriceTable } from '../../api-catalog/endpoints.js';

/** One run's expected credits from its plan with the lake's history, as `harvester plan` makes it. */
function expectedFromHistory(prices: PriceTable, atMs: number): RunExpectation {
  return async (harvest) => {
    const { planHistory } = await import('./plan.js');
    const history = await planHistory(harvest, atMs);
    return planHarvestCost(harvest, prices, history ? { history } : {}).totals.expectedCredits;
  };
}

export function budgetsText(statuses: readonly BudgetStatus[], config: string): string {
  if (statuses.length === 0) return `no budgets across runs in ${config} (its budgets: section)`;
  const rows = statuses.map((status) => [
    status.budget,
    `${status.period} (${status.timezone})`,
    String(status.limit),
    String(status.spent),
    String(status.reserved),
    String(status.left),
    String(status.forecast.credits),
    status.forecast.runsOut ? 'RUNS OUT' : 'holds',
  ]);
  const table = textTable(['budget', 'month', 'credits', 'spent', 'reserved', 'left', 'month-end forecast', ''], rows, { rightAligned: [false, false, true, true, true, true, true, false] });
  const notes = statuses.flatMap((status) => [
    ...(status.expired > 0 ? [`${status.budget}: ${status.expired} reservations of a worker that died counted at their worst case (their charge unknown)`] : []),
    ...status.forecast.harvests.map((harvest) => `${status.budget}: ${harvest.harvest}, ${harvest.runsLeft} runs left before ${status.monthEndsAt} at ${harvest.expectedPerRun} expected credits each`),
    ...status.forecast.unforecast.map((why) => `${status.budget}: not in the forecast: ${why}`),
  ]);
  return [table, ...(notes.length > 0 ? ['', ...notes] : [])].join('\n');
}

export function budgetsCommand(): Command {
  return new Command('budgets')
    .description("Each budget across runs this month: spent, reserved, left, and the month-end forecast from its harvests' schedules")
    .option('--config <file>', 'harvest config', DEFAULT_HARVESTS_FILE)
    .option('--json', 'print JSON')
    .option('--at <time>', 'the time to read the budgets at: its month, and the schedules left after it (ISO 8601; default now)', isoTime)
    .option('--no-history', "forecast each run from the price table and the config alone, not from the lake's history")
    .addHelpText(
      'after',
      `
Reads the ledger of the budgets in HARVESTER_DATA_DIR (or the shared store's catalog): what each
budget's runs spent this month (settled at the API's charge; a reservation of a worker that died
counts at its worst case once its lease ran out), what calls in flight hold, and what is left. The
forecast adds, for each harvest the budget covers, the runs its schedule starts before the month
ends, at its plan's expected credits (as \`harvester plan\`). The month is the budget's time zone's.

Examples:
  $ harvester budgets
  $ harvester budgets --json`,
    )
    .action(async (options: { config: string; json?: boolean; at?: number; history: boolean }) => {
      const config = loadHarvestConfig(options.config);
      const prices = loadPriceTable(process.env.HARVESTER_PRICES ?? DEFAULT_PRICES_FILE);
      const atMs = options.at ?? Date.now();
      const { storeFromEnvironment } = await import('../../store/store-from-environment.js');
      const store = await storeFromEnvironment(dataDirFromEnv());
      try {
        const statuses = await budgetStatuses(config, store.budgets, options.history ? expectedFromHistory(prices, atMs) : expectedFromConfig(prices), atMs);
        process.stdout.write(options.json ? `${JSON.stringify(statuses, null, 2)}\n` : `${budgetsText(statuses, options.config)}\n`);
      } finally {
        await store.close();
      }
    });
}
