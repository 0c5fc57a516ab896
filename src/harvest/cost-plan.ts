/**
 * What one run of a harvest would buy, and what it would cost, worked out from the config and the
 * price table (and, for `track.items`, the due items the caller read from the warehouse): no API
 * call. Pure arithmetic, for `harvester plan`, by the same
 * rules the workflow runs by (src/harvest/rules.ts): job or pages, which calls an item gets, worst
 * cases, and the order a short budget is spent in.
 *
 * Two figures per line:
 * - worst: every list bought in full and every listed item enriched in full, as if the budget
 *   were endless; the plan's total worst case is that sum capped at the budget.
 * - expected: what the run is expected to spend. Without history, a first run: lists are assumed
 *   to hold max_items (so before the budget bites, expected list credits equal worst). With the
 *   lake's history of a target (plan-basis.ts), what it observed: a listing stops at known items
 *   after its new ones, and items get the comments observed at their age. TikTok downloads are
 *   refused by the API and cost nothing, and a short budget is spent by walking the steps the
 *   workflow walks (SPEND_STEPS in spend-order.ts), each forecasting what it buys out of what is
 *   free. Each line says what it was worked out from (`basis`) and gives a `range`.
 */
import type { Harvest } from './harvest-types.js';
import { PAGE_LIMITS, type Platform, type PriceTable } from '../api-catalog/endpoints.js';
import { commentsPages, NOTHING, pagesFor, type EnrichmentKind, type ForecastTarget, type PlanLine, type Purchase } from './plan-lines.js';
import { pricesBasis, historyOfTarget, lineRanges, type TargetExpectation } from './plan-basis.js';
import type { PlanHistory } from './plan-history.js';
import { commentsPerItem, jobItems, listsPhotoPosts, objectEnrichments, priceOf, refusedByApi, takesJob, trackedAccounts } from './rules.js';
import { forecastSteps } from './spend-order.js';
import { planTargets, type TargetKind, type TargetPlan } from './targets.js';
import type { TrackingForecast } from './tracking.js';

export type { CallMode, EnrichmentKind, PlanLine, Purchase } from './plan-lines.js';
export type { LineBasis, PlanHistory, TargetHistory } from './plan-history.js';

export interface TargetCost {
  key: string;
  kind: TargetKind;
  platform: Platform;
  maxItems: number;
  list: PlanLine;
  enrichment: PlanLine[];
  /** The channel's profile, observed once per run when the harvest tracks accounts. */
  account?: PlanLine;
  /** The stats of the target's items due for tracking (`track.items`), when the plan was given them. */
  tracked?: PlanLine;
  worstCredits: number;
  expectedCredits: number;
  note?: string;
}

export interface CostPlan {
  harvest: string;
  budget: { credits: number; source: 'harvest' | 'override'; harvestCredits: number };
  pageSize: number;
  jobThreshold: number;
  targets: TargetCost[];
  totals: {
    /** Every billed call of the worst case. */
    calls: number;
    /** Items the lists would land in the worst case (enrichment units not included). */
    listedItems: number;
    /** The worst case as if the budget were endless. */
    worstCredits: number;
    /** The worst case capped at the budget: the most the run can spend. */
    worstCreditsCapped: number;
    expectedCredits: number;
    /** The expected credits' range: the lines' lows and highs summed, the high capped at the budget. */
    expectedRange: { low: number; high: number };
  };
  /** When the plan read the lake's history of its targets: the time it planned at (the API's clock). */
  historyAsOfMs?: number;
  budgetCoversWorstCase: boolean;
  /** The tracked items the plan was given (`track.items`). */
  tracking?: TrackingForecast;
  /** Credits the budget lacks to cover the worst case (0 when it covers it). */
  shortfall: number;
  assumptions: string[];
}

export interface CostPlanOptions {
  /** This run's budget instead of the harvest's, like `harvester run --budget`. */
  budgetCredits?: number;
  /** Page size of listing calls: PAGE_LIMITS.maxSynchronous, as the workflow uses. */
  pageSize?: number;
  /** The tracked items due (`track.items`), read from the warehouse at the run's time. */
  tracking?: TrackingForecast;
  /** What earlier runs observed of the targets (src/warehouse/plan-history.ts): expectations from it, not the price table, where it has them. */
  history?: PlanHistory;
}

/** The enrichment lines of one target's items: their worst case as if the budget were endless. */
function enrichmentLines(target: TargetPlan, harvest: Harvest, prices: PriceTable, worstItems: number): PlanLine[] {
  if (!target.enrich) return [];
  const platform = target.platform;
  const perItem = commentsPerItem(harvest.enrich);
  const kinds: EnrichmentKind[] = [...objectEnrichments(harvest.enrich, listsPhotoPosts(target))];
  if (perItem > 0) kinds.push('comments');
  return kinds.map((kind): PlanLine => {
    const unitPrice = priceOf(prices, platform, kind);
    const chargedUnitPrice = refusedByApi(platform, kind) ? 0 : unitPrice;
    const units = kind === 'comments' ? perItem : 1;
    const worst: Purchase = { calls: worstItems * (kind === 'comments' ? commentsPages(perItem) : 1), items: worstItems * units, credits: worstItems * units * chargedUnitPrice };
    const line: PlanLine = { what: kind, endpoint: `${platform}/${kind}`, mode: kind === 'comments' ? 'pages' : 'per-item', unitPrice, chargedUnitPrice, worst, expected: { ...NOTHING }, ...pricesBasis() };
    if (refusedByApi(platform, kind)) line.note = 'refused by the API (download_unavailable): not charged';
    return line;
  });
}

type TargetLines = Omit<ForecastTarget, 'target' | 'price' | 'byJob' | 'commentsPerItem' | 'listing'>;

/** The tracked-items line of each target with items due: one stats call each. */
function trackedLines(plans: TargetPlan[], prices: PriceTable, tracking: TrackingForecast | undefined): (PlanLine | undefined)[] {
  return plans.map((plan) => {
    const due = tracking?.due[plan.key] ?? 0;
    if (due === 0) return undefined;
    const price = priceOf(prices, plan.platform, 'stats');
    return { what: 'tracked', endpoint: `${plan.platform}/stats`, mode: 'per-item', unitPrice: price, chargedUnitPrice: price, worst: { calls: due, items: due, credits: due * price }, expected: { ...NOTHING }, ...pricesBasis() };
  });
}

/** The account line of each tracked account, on the first channel target of that account. */
function accountLines(plans: TargetPlan[], harvest: Harvest, prices: PriceTable): (PlanLine | undefined)[] {
  const owners = new Set(trackedAccounts(harvest).map((account) => plans.find((plan) => plan.kind === 'channel' && plan.platform === account.platform && plan.params.handle === account.handle)));
  return plans.map((plan) => {
    if (!owners.has(plan)) return undefined;
    const price = priceOf(prices, plan.platform, 'channel-stats');
    return { what: 'account', endpoint: `${plan.platform}/channel-stats`, mode: 'per-item', unitPrice: price, chargedUnitPrice: price, worst: { calls: 1, items: 1, credits: price }, expected: { ...NOTHING }, ...pricesBasis() };
  });
}

/**
 * Every target's lines, and what a run is expected to buy: the spend steps (SPEND_STEPS in
 * spend-order.ts) walked in order, as the workflow walks them, each spending what is free.
 */
function targetLines(plans: TargetPlan[], harvest: Harvest, prices: PriceTable, pageSize: number, budget: number, options: CostPlanOptions): TargetLines[] {
  const accounts = accountLines(plans, harvest, prices);
  const tracked = trackedLines(plans, prices, options.tracking);
  const expectations = plans.map((target) => historyOfTarget(target, harvest, pageSize, options.history));
  const lines = plans.map((target, index) => {
    const price = priceOf(prices, target.platform, target.endpoint);
    const expectation = expectations[index] as TargetExpectation;
    const job = takesJob(target, harvest.job_threshold, expectation.listing !== undefined);
    const wanted = job ? jobItems(target) : target.maxItems;
    const list: PlanLine = {
      what: 'list',
      endpoint: `${target.platform}/${target.endpoint}`,
      mode: job ? 'job' : 'pages',
      unitPrice: price,
      chargedUnitPrice: price,
      worst: { calls: job ? 1 : pagesFor(wanted, pageSize), items: wanted, credits: wanted * price },
      expected: { ...NOTHING },
      ...pricesBasis(),
    };
    if (job && target.maxItems > PAGE_LIMITS.maxJob) list.note = `a job returns at most ${PAGE_LIMITS.maxJob} items; max_items is ${target.maxItems}`;
    const listing = expectation.listing;
    return { target, price, byJob: job, list, enrichment: enrichmentLines(target, harvest, prices, wanted), account: accounts[index], tracked: tracked[index], commentsPerItem: expectation.commentsPerItem, ...(listing ? { listing } : {}) };
  });
  forecastSteps({ harvest, prices, pageSize, free: budget, lines });
  lines.forEach((line, index) => lineRanges(line, expectations[index] as TargetExpectation, options.tracking));
  return lines.map(({ list, enrichment, account, tracked }) => ({ list, enrichment, ...(account ? { account } : {}), ...(tracked ? { tracked } : {}) }));
}

/** A target's lines in the order they are shown: its list, its enrichment, then tracking's. */
export function linesOf(target: TargetLines): PlanLine[] {
  return [target.list, ...target.enrichment, ...(target.account ? [target.account] : []), ...(target.tracked ? [target.tracked] : [])];
}

export function planHarvestCost(harvest: Harvest, prices: PriceTable, options: CostPlanOptions = {}): CostPlan {
  const pageSize = options.pageSize ?? PAGE_LIMITS.maxSynchronous;
  const budgetCredits = options.budgetCredits ?? harvest.budget.credits;
  const plans = planTargets(harvest);
  const planned = targetLines(plans, harvest, prices, pageSize, budgetCredits, options);
  const targets: TargetCost[] = plans.map((plan, index) => {
    const planLines = planned[index] as TargetLines;
    const { list, enrichment, account, tracked } = planLines;
    const lines = linesOf(planLines);
    return {
      key: plan.key,
      kind: plan.kind,
      platform: plan.platform,
      maxItems: plan.maxItems,
      list,
      enrichment,
      ...(account ? { account } : {}),
      ...(tracked ? { tracked } : {}),
      worstCredits: lines.reduce((sum, line) => sum + line.worst.credits, 0),
      expectedCredits: lines.reduce((sum, line) => sum + line.expected.credits, 0),
    };
  });

  const lines = targets.flatMap(linesOf);
  const worstCredits = lines.reduce((sum, line) => sum + line.worst.credits, 0);
  const expectedCredits = lines.reduce((sum, line) => sum + line.expected.credits, 0);
  return {
    harvest: harvest.name,
    budget: { credits: budgetCredits, source: options.budgetCredits === undefined ? 'harvest' : 'override', harvestCredits: harvest.budget.credits },
    pageSize,
    jobThreshold: harvest.job_threshold,
    targets,
    totals: {
      calls: lines.reduce((sum, line) => sum + line.worst.calls, 0),
      listedItems: targets.reduce((sum, target) => sum + target.list.worst.items, 0),
      worstCredits,
      worstCreditsCapped: Math.min(worstCredits, budgetCredits),
      expectedCredits,
      expectedRange: {
        low: Math.min(budgetCredits, lines.reduce((sum, line) => sum + line.range.low, 0)),
        high: Math.min(budgetCredits, lines.reduce((sum, line) => sum + line.range.high, 0)),
      },
    },
    ...(options.history ? { historyAsOfMs: options.history.asOfMs } : {}),
    budgetCoversWorstCase: worstCredits <= budgetCredits,
    ...(options.tracking ? { tracking: options.tracking } : {}),
    shortfall: Math.max(0, worstCredits - budgetCredits),
    assumptions: assumptionsOf(harvest, pageSize),
  };
}

function assumptionsOf(harvest: Harvest, pageSize: number): string[] {
  return [
    "where the lake has no history of a target, a first run: its list holds max_items and each item gets max_per_item comments (the plan reads no API); where it has, a target listed completely before lists only its new items (expected at the rate its known items were posted, in pages grown from the run's first-page estimate, stopping at a known item), and each new item gets the comments its target's items had when bought at the same age",
    `targets above job_threshold (${harvest.job_threshold}) are one async job of at most ${PAGE_LIMITS.maxJob} items; the others are pages of ${pageSize}`,
    'each listed item is enriched right after its page is landed; the items a job listed are enriched once its results land',
    'without history, comments enrichment finds max_per_item comments on every item; instagram photo posts (channel content posts) get no transcript or summary',
    'tiktok downloads are refused by the API (download_unavailable) and cost nothing',
    "expected spends the budget in the run's order when it is short (jobs reserved first, then each paged target in config order, item by item with its enrichment, then the items jobs listed) and stops buying where the next item's worst case no longer fits",
    ...(harvest.track?.items
      ? ['tracked items are observed last, after tracked accounts; when the budget runs short among them, the plan takes them target by target while the run takes the most overdue first, so which items (and, with both platforms, how many) can differ']
      : []),
  ];
}
