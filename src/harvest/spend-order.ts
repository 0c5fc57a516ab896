/**
 * The harvest as one table of steps, in the order a short budget is spent: SPEND_STEPS. Each step
 * says when it runs and how it forecasts; `harvester plan` (cost-plan.ts) forecasts by walking the
 * table, and the workflow (workflows/steps.ts) runs by walking it, with one runner per step name, so
 * the forecast and the run read the same steps. With room for everything, all work runs at once and
 * the order changes nothing.
 *
 * When a step runs:
 * - `first`: once, before the listings, in table order;
 * - `together`: per target, in one loop with the other `together` steps, several targets at once,
 *   until none of them has work left; a target's next work is its first step's in table order;
 * - `last`: once, after that loop, in table order.
 */
import { PAGE_LIMITS } from '../api-catalog/endpoints.js';
import { chargedPerItem, expectEnrichment, pagesFor, type Forecast } from './plan-lines.js';
import { itemEnrichmentWorst, jobLimit, listsPhotoPosts, targetWorst } from './rules.js';

export type StepName = 'jobs' | 'redo-failed' | 'list' | 'enrich' | 'track-accounts' | 'track-items';

export interface SpendStep {
  name: StepName;
  runs: 'first' | 'together' | 'last';
  /** What the step buys, and while what fits. */
  buys: string;
  /** Adds what the step is expected to buy to the forecast's lines, out of what is free. */
  forecast(forecast: Forecast): void;
}

/** Whether a paged target may list another item: its worst case (listing and enrichment) fits. */
export function mayList(free: number, itemWorst: number): boolean {
  return free >= itemWorst;
}

/** Whether the items a job listed may be enriched now: once no listing is left, or beside them when what is free covers their worst case. */
export function mayEnrichJobItems(free: number, enrichmentWorst: number, listingsLeft: boolean): boolean {
  return free > 0 && (!listingsLeft || free >= enrichmentWorst);
}

/**
 * How many of `wanted` items are bought out of `free` credits when items are bought one at a
 * time, each while its worst case `worst` still fits, and each then charged `actual`.
 */
export function itemsBought(free: number, worst: number, actual: number, wanted: number): number {
  if (!mayList(free, worst) || wanted <= 0) return 0;
  if (actual <= 0) return wanted;
  return Math.min(wanted, Math.floor((free - worst) / actual) + 1);
}

function forecastJobs(forecast: Forecast): void {
  for (const line of forecast.lines.filter((candidate) => candidate.byJob)) {
    const limit = jobLimit(forecast.prices, line.target, forecast.free);
    if (limit === 0) {
      line.byJob = false;
      continue;
    }
    forecast.free -= limit * line.price;
    line.list.expected = { calls: 1, items: limit, credits: limit * line.price };
  }
}

/**
 * Each paged target, in config order: a first listing buys max_items, each item enriched; an
 * incremental one (from history) lists what it is expected to (`listing`), of which only the new
 * items are enriched, so a listed item is charged its price and its share of the enrichment.
 */
function forecastPages(forecast: Forecast): void {
  const { harvest, prices, pageSize } = forecast;
  for (const line of forecast.lines.filter((candidate) => !candidate.byJob)) {
    const worst = targetWorst(prices, line.target, harvest.enrich, 1);
    const wanted = line.listing?.listed ?? line.target.maxItems;
    const freshShare = line.listing ? (wanted === 0 ? 0 : line.listing.fresh / wanted) : 1;
    const enrichment = chargedPerItem(line.enrichment, line.commentsPerItem);
    const items = itemsBought(forecast.free, worst, line.price + freshShare * enrichment, wanted);
    const pages = line.listing && items === wanted ? line.listing.pages : pagesFor(items, pageSize);
    line.list.expected = { calls: pages, items, credits: items * line.price };
    expectEnrichment(line.enrichment, line.commentsPerItem, items * freshShare);
    forecast.free -= line.list.expected.credits + sumCredits(line.enrichment);
  }
}

function sumCredits(lines: readonly { expected: { credits: number } }[]): number {
  return lines.reduce((sum, line) => sum + line.expected.credits, 0);
}

function forecastJobItems(forecast: Forecast): void {
  const { harvest, prices } = forecast;
  for (const line of forecast.lines.filter((candidate) => candidate.byJob && candidate.enrichment.length > 0)) {
    const worst = itemEnrichmentWorst(prices, line.target.platform, harvest.enrich, listsPhotoPosts(line.target));
    const items = itemsBought(forecast.free, worst, chargedPerItem(line.enrichment, line.commentsPerItem), line.list.expected.items);
    expectEnrichment(line.enrichment, line.commentsPerItem, items);
    forecast.free -= sumCredits(line.enrichment);
  }
}

function forecastAccounts(forecast: Forecast): void {
  for (const line of forecast.lines) {
    if (!line.account || forecast.free < line.account.worst.credits) continue;
    line.account.expected = { ...line.account.worst };
    forecast.free -= line.account.worst.credits;
  }
}

function forecastTrackedItems(forecast: Forecast): void {
  for (const line of forecast.lines) {
    if (!line.tracked) continue;
    const items = Math.min(line.tracked.worst.items, Math.floor(forecast.free / line.tracked.unitPrice));
    line.tracked.expected = { calls: items, items, credits: items * line.tracked.unitPrice };
    forecast.free -= line.tracked.expected.credits;
  }
}

/** The steps of a run, in the order a short budget is spent. */
export const SPEND_STEPS: readonly SpendStep[] = [
  {
    name: 'jobs',
    runs: 'first',
    buys: `each target bought as an async job (above job_threshold), in config order, reserves what the budget fits of its job (at most ${PAGE_LIMITS.maxJob} items, rules.ts jobLimit), or is paged when that is too few items for a job; the job's results land in \`list\``,
    forecast: forecastJobs,
  },
  {
    name: 'redo-failed',
    runs: 'first',
    buys: "a retry's enrichment calls that failed for good in the run so far, made again within one grant of their worst case (a plan forecasts a first run: none)",
    forecast: () => {},
  },
  {
    name: 'list',
    runs: 'together',
    buys: "the paged targets, in config order, list items, each enriched right after its page lands, while the next item's worst case fits what is free; a job's target lands its job's results",
    forecast: forecastPages,
  },
  {
    name: 'enrich',
    runs: 'together',
    buys: 'the items a job listed are enriched, once no listing is left to start, or beside the listings when what is free covers their whole worst case',
    forecast: forecastJobItems,
  },
  {
    name: 'track-accounts',
    runs: 'last',
    buys: "once everything new is listed and enriched, each tracked account's profile (`track.accounts`), in config order, as far as what is left covers",
    forecast: forecastAccounts,
  },
  {
    name: 'track-items',
    runs: 'last',
    buys: 'then the stats of the tracked items due (`track.items`), most overdue first, as far as what is left covers',
    forecast: forecastTrackedItems,
  },
];

/** The step names in spend order. */
export const SPEND_ORDER: readonly StepName[] = SPEND_STEPS.map((step) => step.name);

/** Walks the steps in spend order, each adding what it is expected to buy to the forecast. */
export function forecastSteps(forecast: Forecast): void {
  for (const step of SPEND_STEPS) step.forecast(forecast);
}
