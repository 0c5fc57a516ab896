/**
 * The lines of a cost plan (cost-plan.ts): what one kind of call of one target buys, at worst and
 * as expected, and the forecast the spend steps (spend-order.ts) fill in as they walk the budget.
 * Pure arithmetic.
 */
import { PAGE_LIMITS, type EndpointKey, type PriceTable } from '../api-catalog/endpoints.js';
import type { Harvest } from './harvest-types.js';
import type { ObjectEnrichment } from './rules.js';
import type { LineBasis } from './plan-history.js';
import type { TargetPlan } from './targets.js';

/** The enrichment a listed item gets, in the order the workflow makes the calls. */
export type EnrichmentKind = ObjectEnrichment | 'comments';

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
  what: 'list' | EnrichmentKind | 'account' | 'tracked';
  endpoint: EndpointKey;
  mode: CallMode;
  /** Credits per unit, from the price table. */
  unitPrice: number;
  /** Credits per unit actually charged: 0 for TikTok downloads, which the API refuses. */
  chargedUnitPrice: number;
  worst: Purchase;
  expected: Purchase;
  /** The credits the line is expected to come to, low and high (the plan's range; `expected` lies within). */
  range: { low: number; high: number };
  /** What the expectation was worked out from: the lake's history of the target, or the price table. */
  basis: LineBasis;
  note?: string;
}

/** One target's lines as the forecast fills them in: its list, its enrichment, and tracking's. */
export interface ForecastTarget {
  target: TargetPlan;
  /** Credits per listed item. */
  price: number;
  /** Bought as one async job (false once the budget left too little for one: then it is paged). */
  byJob: boolean;
  list: PlanLine;
  enrichment: PlanLine[];
  account?: PlanLine;
  tracked?: PlanLine;
  /** Comments each enriched item is expected to get: from history, or the harvest's max_per_item. */
  commentsPerItem: number;
  /**
   * An incremental listing (after a complete one), from history: the items it is expected to list
   * (new ones and the known one it stops at, in pages it grows) and how many of them are new.
   */
  listing?: { listed: number; pages: number; fresh: number };
}

/** What a forecast walks the spend steps with: the harvest, the prices, and the credits still free. */
export interface Forecast {
  harvest: Harvest;
  prices: PriceTable;
  pageSize: number;
  free: number;
  lines: ForecastTarget[];
}

export const NOTHING: Purchase = { calls: 0, items: 0, credits: 0 };

export function pagesFor(items: number, pageSize: number): number {
  return Math.ceil(items / pageSize);
}

/** Credits one item's enrichment is expected to be charged with `perItem` comments (TikTok downloads are free). */
export function chargedPerItem(lines: PlanLine[], perItem: number): number {
  return lines.reduce((sum, line) => sum + (line.what === 'comments' ? perItem : 1) * line.chargedUnitPrice, 0);
}

/** The comments calls one item's `perItem` comments take: pages of the API's synchronous maximum, as the enricher asks for them. */
export function commentsPages(perItem: number): number {
  return pagesFor(perItem, PAGE_LIMITS.maxSynchronous);
}

/**
 * Sets the expected purchases of a target's enrichment lines for `items` enriched items, each with
 * `perItem` comments (rounded to whole items and comments: a plan buys no part of one).
 */
export function expectEnrichment(lines: PlanLine[], perItem: number, items: number): void {
  const enriched = Math.round(items);
  for (const line of lines) {
    const units = line.what === 'comments' ? Math.round(enriched * perItem) : enriched;
    const calls = line.what === 'comments' ? enriched * Math.max(1, commentsPages(Math.ceil(perItem))) : enriched;
    line.expected = { calls, items: units, credits: units * line.chargedUnitPrice };
  }
}
