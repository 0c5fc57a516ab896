/**
 * The budgets across runs as Prometheus metrics: each budget's figures for its month now, read
 * from the ledger at each scrape (so every worker of the store says the same), with its month-end
 * forecast. The reader is given by whoever serves the metrics (`harvester worker`, with the store
 * and the config): this room imports nothing but prom-client. Labels: `budget` (a few per
 * deployment); the month is the budget's current one.
 */
import { Gauge } from 'prom-client';
import { metricsRegistry } from './worker-metrics.js';

/** One budget's figures, as the ledger and the forecast give them. */
export interface BudgetGaugeValues {
  budget: string;
  limit: number;
  spent: number;
  reserved: number;
  left: number;
  forecast: number;
  /** Seconds since the epoch when the budget's month ends (in its time zone). */
  monthEndsAt: number;
}

let readBudgets: (() => Promise<BudgetGaugeValues[]>) | undefined;

/** Has every scrape read the budgets' figures through `read` (undefined: none served). */
export function watchBudgets(read: (() => Promise<BudgetGaugeValues[]>) | undefined): void {
  readBudgets = read;
}

/** One read per scrape, shared by the gauges of that scrape. */
let scrape: Promise<BudgetGaugeValues[]> | undefined;
function valuesOfScrape(): Promise<BudgetGaugeValues[]> {
  if (!readBudgets) return Promise.resolve([]);
  scrape ??= readBudgets().finally(() => setTimeout(() => (scrape = undefined), 100).unref());
  return scrape;
}

function budgetGauge(name: string, help: string, value: (values: BudgetGaugeValues) => number): Gauge<'budget'> {
  return new Gauge({
    name,
    help,
    labelNames: ['budget'] as const,
    registers: [metricsRegistry],
    async collect() {
      this.reset();
      // A ledger that cannot be read leaves the budget series out of this scrape, not the worker's others.
      const values = await valuesOfScrape().catch(() => []);
      for (const budget of values) this.set({ budget: budget.budget }, value(budget));
    },
  });
}

budgetGauge('harvester_budget_limit_credits', "A budget across runs' credits for its month", (values) => values.limit);
budgetGauge('harvester_budget_spent_credits', "What a budget's runs spent this month: settled at the API's charge, an expired reservation at its worst case", (values) => values.spent);
budgetGauge('harvester_budget_reserved_credits', "What a budget's calls in flight hold now, at their worst case", (values) => values.reserved);
budgetGauge('harvester_budget_left_credits', "What a budget has left this month: its credits less spent and reserved", (values) => values.left);
budgetGauge('harvester_budget_forecast_credits', "A budget's month-end forecast: spent and reserved, plus its schedules' runs left at their plans' expected credits", (values) => values.forecast);
budgetGauge('harvester_budget_month_end_timestamp_seconds', "When a budget's month ends, in its time zone, as seconds since the epoch", (values) => values.monthEndsAt);
