/**
 * What one run of a harvest would buy, and what it would cost, worked out from the config and the
 * price table alone: no API call, no warehouse. Pure arithmetic, for `harvester plan`.
 *
 * It follows the harvest workflow (workflows/harvest.ts): targets are planned by planTargets; a
 * target wanting more than job_threshold items is one async job of at most PAGE_LIMITS.maxJob
 * items (a first run), any other is listed in pages of 50; the items the run pages from channel
 * and search targets are then enriched item by item (stats, transcript, summary, download, then
 * comments), instagram photo posts skipping transcript and summary (they have no audio).
 *
 * Two figures per line:
 * - worst: every list bought in full and every listed item enriched in full, as if the budget
 *   were endless; the plan's total worst case is that sum capped at the budget.
 * - expected: what a first run is expected to spend. Lists are assumed to hold max_items (so
 *   before the budget bites, expected list credits equal worst), TikTok downloads are refused by
 *   the API and cost nothing, and the budget is spent in the workflow's order: jobs are reserved
 *   first, then pages are bought, then items are enriched; a list buys what still fits, an
 *   object call needs its full price free, and once one does not fit, enrichment stops.
 */
import type { Harvest } from '../../config/harvest-types.js';
import type { PriceTable } from '../../config/prices.js';
import { PAGE_LIMITS, type EndpointKey, type Platform } from '../../spec/endpoints.js';
import { planTargets, type TargetKind, type TargetPlan } from '../../../workflows/targets.js';

/** The enrichment a listed item gets, in the order the workflow makes the calls. */
export type EnrichmentKind = 'stats' | 'transcript' | 'summary' | 'download' | 'comments';
const OBJECT_KINDS = ['stats', 'transcript', 'summary', 'download'] as const;

/** A list bought in pages, a list bought as one async job, or one call per item. */
export type CallMode = 'pages' | 'job' | 'per-item';

export interface Purchase {
  /** Billed calls: pages, jobs, or object calls (a refused TikTok download counts as a call). */
  calls: number;
  /** Units bought: listed items, enriched items, or comments (for comments enrichment). */
  items: number;
  credits: number;
}

export interface PlanLine {
  /** `list` for the target's own listing, else the enrichment kind. */
  what: 'list' | EnrichmentKind;
  endpoint: EndpointKey;
  mode: CallMode;
  /** Credits per unit, from the price table. */
  unitPrice: number;
  /** Credits per unit actually charged: 0 for TikTok downloads, which the API refuses. */
  chargedUnitPrice: number;
  worst: Purchase;
  expected: Purchase;
  note?: string;
}

export interface TargetCost {
  key: string;
  kind: TargetKind;
  platform: Platform;
  maxItems: number;
  list: PlanLine;
  enrichment: PlanLine[];
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
  };
  budgetCoversWorstCase: boolean;
  /** Credits the budget lacks to cover the worst case (0 when it covers it). */
  shortfall: number;
  assumptions: string[];
}

export interface CostPlanOptions {
  /** This run's budget instead of the harvest's, like `harvester run --budget`. */
  budgetCredits?: number;
  /** Page size of listing calls: 50, as the workflow uses. */
  pageSize?: number;
}

const ZERO: Purchase = { calls: 0, items: 0, credits: 0 };

/** Credits spent so far in the simulated run, against the budget. */
class Wallet {
  spent = 0;
  /** Set once an object call did not fit: the workflow stops enriching then. */
  stopped = false;
  constructor(readonly limit: number) {}

  get free(): number {
    return Math.max(0, this.limit - this.spent);
  }

  /** How many of `wanted` units at `price` fit what is free (budget.ts fitLimit). */
  fit(price: number, wanted: number): number {
    return price <= 0 ? wanted : Math.max(0, Math.min(wanted, Math.floor(this.free / price)));
  }
}

function priceOf(prices: PriceTable, platform: Platform, endpoint: string): number {
  return prices[`${platform}/${endpoint}` as EndpointKey];
}

/** TikTok downloads are switched off by the API (503 download_unavailable) and never charged. */
function refusedByApi(platform: Platform, kind: EnrichmentKind): boolean {
  return platform === 'tiktok' && kind === 'download';
}

/** Instagram photo posts (a channel's `posts`) have no audio: no transcript, no summary. */
function isPhotoPostList(target: TargetPlan): boolean {
  return target.platform === 'instagram' && target.endpoint === 'channel-posts';
}

function pagesFor(items: number, pageSize: number): number {
  return Math.ceil(items / pageSize);
}

function add(a: Purchase, b: Purchase): Purchase {
  return { calls: a.calls + b.calls, items: a.items + b.items, credits: a.credits + b.credits };
}

interface Listing {
  line: PlanLine;
  /** Listed through a job: the workflow enriches these items after every paged target's. */
  byJob: boolean;
}

/**
 * Every target's listing, spent in the workflow's order: first each job target (config order)
 * reserves what fits of its job, and one that fits 50 items or fewer is paged instead; then the
 * paged targets buy their pages, in config order.
 */
function listings(plans: TargetPlan[], harvest: Harvest, prices: PriceTable, pageSize: number, wallet: Wallet): Listing[] {
  const result = plans.map((target): Listing & { job: boolean; paged: boolean; price: number } => {
    const price = priceOf(prices, target.platform, target.endpoint);
    const job = target.maxItems > harvest.job_threshold;
    const wanted = job ? Math.min(target.maxItems, PAGE_LIMITS.maxJob) : target.maxItems;
    const line: PlanLine = {
      what: 'list',
      endpoint: `${target.platform}/${target.endpoint}`,
      mode: job ? 'job' : 'pages',
      unitPrice: price,
      chargedUnitPrice: price,
      worst: { calls: job ? 1 : pagesFor(wanted, pageSize), items: wanted, credits: wanted * price },
      expected: { ...ZERO },
    };
    if (job && target.maxItems > PAGE_LIMITS.maxJob) line.note = `a job returns at most ${PAGE_LIMITS.maxJob} items; max_items is ${target.maxItems}`;
    return { line, byJob: job, job, paged: !job, price };
  });
  for (const listing of result) {
    if (!listing.job) continue;
    const limit = wallet.fit(listing.price, listing.line.worst.items);
    if (limit <= pageSize) {
      // Jobs take more than 50 items: the workflow pages this target instead.
      listing.paged = true;
      listing.byJob = false;
      continue;
    }
    wallet.spent += limit * listing.price;
    listing.line.expected = { calls: 1, items: limit, credits: limit * listing.price };
  }
  result.forEach((listing, index) => {
    if (!listing.paged) return;
    const bought = wallet.fit(listing.price, (plans[index] as TargetPlan).maxItems);
    wallet.spent += bought * listing.price;
    listing.line.expected = { calls: pagesFor(bought, pageSize), items: bought, credits: bought * listing.price };
  });
  return result.map(({ line, byJob }) => ({ line, byJob }));
}

/** The enrichment of one target's listed items, item by item in the workflow's call order. */
function enrichmentLines(target: TargetPlan, harvest: Harvest, prices: PriceTable, pageSize: number, worstItems: number, expectedItems: number, wallet: Wallet): PlanLine[] {
  if (!target.enrich) return [];
  const platform = target.platform;
  const perItem = harvest.enrich.comments === false ? 0 : harvest.enrich.comments.max_per_item;
  const kinds: EnrichmentKind[] = OBJECT_KINDS.filter((kind) => harvest.enrich[kind] && !(isPhotoPostList(target) && (kind === 'transcript' || kind === 'summary')));
  if (perItem > 0) kinds.push('comments');

  const lines = kinds.map((kind): PlanLine => {
    const unitPrice = priceOf(prices, platform, kind);
    const chargedUnitPrice = refusedByApi(platform, kind) ? 0 : unitPrice;
    const worst: Purchase =
      kind === 'comments'
        ? { calls: worstItems * pagesFor(perItem, pageSize), items: worstItems * perItem, credits: worstItems * perItem * chargedUnitPrice }
        : { calls: worstItems, items: worstItems, credits: worstItems * chargedUnitPrice };
    const line: PlanLine = { what: kind, endpoint: `${platform}/${kind}`, mode: kind === 'comments' ? 'pages' : 'per-item', unitPrice, chargedUnitPrice, worst, expected: { ...ZERO } };
    if (refusedByApi(platform, kind)) line.note = 'refused by the API (download_unavailable): not charged';
    return line;
  });

  const spendItem = (line: PlanLine): void => {
    if (wallet.stopped) return;
    if (line.what === 'comments') {
      // Comments are a list: it buys what fits, and running short does not stop the enrichment.
      const fits = wallet.fit(line.unitPrice, perItem);
      if (fits === 0) return;
      wallet.spent += fits * line.chargedUnitPrice;
      line.expected = add(line.expected, { calls: pagesFor(fits, pageSize), items: fits, credits: fits * line.chargedUnitPrice });
      return;
    }
    // An object call reserves its list price first; when that does not fit, enrichment stops.
    if (wallet.fit(line.unitPrice, 1) < 1) {
      wallet.stopped = true;
      return;
    }
    wallet.spent += line.chargedUnitPrice;
    line.expected = add(line.expected, { calls: 1, items: 1, credits: line.chargedUnitPrice });
  };

  // Plenty of budget: every item in full, at once (the per-item walk below is for the edge).
  const itemCost = lines.reduce((sum, line) => sum + (line.what === 'comments' ? perItem : 1) * line.chargedUnitPrice, 0);
  const largestReservation = Math.max(0, ...lines.map((line) => (line.what === 'comments' ? perItem : 1) * line.unitPrice));
  if (!wallet.stopped && expectedItems * itemCost + largestReservation <= wallet.free) {
    for (const line of lines) {
      const units = line.what === 'comments' ? expectedItems * perItem : expectedItems;
      const calls = line.what === 'comments' ? expectedItems * pagesFor(perItem, pageSize) : expectedItems;
      line.expected = { calls, items: units, credits: units * line.chargedUnitPrice };
      wallet.spent += units * line.chargedUnitPrice;
    }
    return lines;
  }
  for (let item = 0; item < expectedItems && !wallet.stopped; item++) for (const line of lines) spendItem(line);
  return lines;
}

export function planHarvestCost(harvest: Harvest, prices: PriceTable, options: CostPlanOptions = {}): CostPlan {
  const pageSize = options.pageSize ?? PAGE_LIMITS.maxSynchronous;
  const budgetCredits = options.budgetCredits ?? harvest.budget.credits;
  const wallet = new Wallet(budgetCredits);
  const plans = planTargets(harvest);

  // The workflow lists every target first, then enriches: the items of paged targets as they were
  // listed, then those of job targets as their results landed. The same order here.
  const listed = listings(plans, harvest, prices, pageSize, wallet);
  const enrichments: PlanLine[][] = [];
  for (const byJob of [false, true]) {
    plans.forEach((plan, index) => {
      const { line: list, byJob: listedByJob } = listed[index] as Listing;
      if (listedByJob === byJob) enrichments[index] = enrichmentLines(plan, harvest, prices, pageSize, list.worst.items, list.expected.items, wallet);
    });
  }
  const targets: TargetCost[] = plans.map((plan, index) => {
    const list = (listed[index] as Listing).line;
    const enrichment = enrichments[index] ?? [];
    const lines = [list, ...enrichment];
    return {
      key: plan.key,
      kind: plan.kind,
      platform: plan.platform,
      maxItems: plan.maxItems,
      list,
      enrichment,
      worstCredits: lines.reduce((sum, line) => sum + line.worst.credits, 0),
      expectedCredits: lines.reduce((sum, line) => sum + line.expected.credits, 0),
    };
  });

  const lines = targets.flatMap((target) => [target.list, ...target.enrichment]);
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
    },
    budgetCoversWorstCase: worstCredits <= budgetCredits,
    shortfall: Math.max(0, worstCredits - budgetCredits),
    assumptions: assumptionsOf(harvest, pageSize),
  };
}

function assumptionsOf(harvest: Harvest, pageSize: number): string[] {
  return [
    'a first run: every list holds max_items (the plan reads neither the API nor the warehouse; a later run stops at items it has seen before and usually buys less)',
    `targets above job_threshold (${harvest.job_threshold}) are one async job of at most ${PAGE_LIMITS.maxJob} items; the others are pages of ${pageSize}`,
    'enrichment follows listing: first the items of paged targets, then those a job listed; expected stops where the budget does',
    'comments enrichment finds max_per_item comments on every item; instagram photo posts (channel content posts) get no transcript or summary',
    'tiktok downloads are refused by the API (download_unavailable) and cost nothing',
    "expected spends the budget in the run's order (jobs reserved first, then pages in config order, then enrichment item by item) and stops buying where the next call's worst case no longer fits",
  ];
}
