/**
 * What `harvester budgets`, the worker's metrics and the report say of each budget across runs:
 * its month now (in its time zone), what the ledger says was spent, is reserved and is left, and
 * its month-end forecast: what it used, plus the runs its harvests' schedules still start this
 * month, each at its plan's expected credits (src/harvest/cost-plan.ts, the plan `harvester plan`
 * makes), capped at the run's own budget, which no run passes.
 */
import { existsSync } from 'node:fs';
import type { PriceTable } from '../api-catalog/endpoints.js';
import { loadHarvestConfig } from '../config/harvest-config.js';
import { DEFAULT_PRICES_FILE, loadPriceTable } from '../config/prices.js';
import type { BudgetGaugeValues } from '../metrics/budget-metrics.js';
import { budgetForecast, cronRunsBetween, monthWindow, type BudgetForecast, type CrossRunBudget } from '../harvest/budgets.js';
import { planHarvestCost } from '../harvest/cost-plan.js';
import type { Harvest, HarvestConfig } from '../harvest/harvest-types.js';
import type { BudgetLedger } from '../store/budget-ledger.js';

export interface BudgetStatus {
  budget: string;
  /** `YYYY-MM` in the budget's time zone. */
  period: string;
  timezone: string;
  harvests: string[] | 'all';
  limit: number;
  spent: number;
  reserved: number;
  left: number;
  /** Reservations whose lease ran out unsettled (a worker that died): in `spent` at their worst case. */
  expired: number;
  monthEndsAt: string;
  forecast: BudgetForecast;
}

/** The expected credits of one run of a harvest: its plan's, from the lake's history when `history` gives it. */
export type RunExpectation = (harvest: Harvest) => Promise<number>;

/** One run's expected credits from the config and the price table alone (as for a first run). */
export function expectedFromConfig(prices: PriceTable): RunExpectation {
  return async (harvest) => planHarvestCost(harvest, prices).totals.expectedCredits;
}

/** Every budget of the config, at `atMs`, with the ledger's figures and its forecast. */
export async function budgetStatuses(config: HarvestConfig, ledger: BudgetLedger, expected: RunExpectation, atMs = Date.now()): Promise<BudgetStatus[]> {
  const figures = await ledger.figures(atMs);
  const statuses: BudgetStatus[] = [];
  for (const budget of config.budgets ?? []) {
    const window = monthWindow(atMs, budget.timezone);
    const found = figures.find((candidate) => candidate.budget === budget.name && candidate.period === window.period);
    const spent = found?.spent ?? 0;
    const reserved = found?.reserved ?? 0;
    const limit = budget.credits;
    statuses.push({
      budget: budget.name,
      period: window.period,
      timezone: budget.timezone,
      harvests: budget.harvests,
      limit,
      spent,
      reserved,
      left: Math.max(0, limit - spent - reserved),
      expired: found?.expired ?? 0,
      monthEndsAt: new Date(window.endsAtMs).toISOString(),
      forecast: await forecastOf(budget, config.harvests, spent + reserved, expected, atMs, window.endsAtMs),
    });
  }
  return statuses;
}

async function forecastOf(budget: CrossRunBudget, harvests: readonly Harvest[], used: number, expected: RunExpectation, atMs: number, endsAtMs: number): Promise<BudgetForecast> {
  const covered = harvests.filter((harvest) => budget.harvests === 'all' || budget.harvests.includes(harvest.name));
  const forecast: BudgetForecast['harvests'] = [];
  const unforecast: string[] = [];
  for (const harvest of covered) {
    if (!harvest.schedule) {
      unforecast.push(`${harvest.name}: no schedule (its runs are started by hand)`);
      continue;
    }
    const runsLeft = cronRunsBetween(harvest.schedule.cron, harvest.schedule.timezone, atMs, endsAtMs);
    if (runsLeft === undefined) {
      unforecast.push(`${harvest.name}: its cron ${JSON.stringify(harvest.schedule.cron)} names days or months, which the forecast does not read`);
      continue;
    }
    // A run never spends more than its own budget: the plan's expectation is capped there.
    forecast.push({ harvest: harvest.name, runsLeft, expectedPerRun: Math.min(await expected(harvest), harvest.budget.credits) });
  }
  return budgetForecast(used, budget.credits, forecast, unforecast);
}

/**
 * What each scrape of a worker's metrics reads of the budgets: the config's budgets (read at each
 * scrape, so an edited file counts at the next), the ledger's figures, forecasts from the config
 * and the price table (not the lake's history: a scrape does not load DuckDB into the worker). No
 * config file: no budget series.
 */
export function budgetGaugeReader(store: { budgets: BudgetLedger }, configFile: string): () => Promise<BudgetGaugeValues[]> {
  return async () => {
    if (!existsSync(configFile)) return [];
    const config = loadHarvestConfig(configFile);
    const prices = loadPriceTable(process.env.HARVESTER_PRICES ?? DEFAULT_PRICES_FILE);
    const statuses = await budgetStatuses(config, store.budgets, expectedFromConfig(prices));
    return statuses.map((status) => ({ budget: status.budget, limit: status.limit, spent: status.spent, reserved: status.reserved, left: status.left, forecast: status.forecast.credits, monthEndsAt: Date.parse(status.monthEndsAt) / 1000 }));
  };
}
