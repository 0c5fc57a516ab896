/**
 * What a cost plan's lines are worked out from (the lake's history of a target, or the price
 * table), how many observations stand behind each, and the range each line's credits are expected
 * in. Pure arithmetic on the history src/warehouse/plan-history.ts read.
 *
 * The ranges:
 * - from the price table, a line is what the config asks for (a first run's lists hold max_items);
 *   only comments may come to less (an item may have fewer than max_per_item), down to none;
 * - from history, new items arrive at the rate the known ones were posted, a count whose spread is
 *   that of a Poisson count (two standard deviations either side), and an item's comments vary as
 *   the observed items' did (commentsRange);
 * - where the budget runs short of a target's expectation, its lines are what the budget buys.
 */
import type { Harvest } from './harvest-types.js';
import { commentsPages, type ForecastTarget, type PlanLine } from './plan-lines.js';
import { commentsPerItemFrom, commentsRange, countRange, expectedNewItems, firstPageLimit, incrementalListed, newItemAges, type LineBasis, type PlanHistory } from './plan-history.js';
import { commentsPerItem } from './rules.js';
import type { TargetPlan } from './targets.js';
import type { TrackingForecast } from './tracking.js';

/** What a target is expected to buy, from its history where there is one. */
export interface TargetExpectation {
  /** Comments per enriched item: the observed mean, or max_per_item. */
  commentsPerItem: number;
  comments?: { mean: number; deviation: number; observations: number; maxPerItem: number; atAges: boolean };
  /** An incremental listing: what it lists, in how many pages, how many are new, and the range of new ones. */
  listing?: { listed: number; pages: number; fresh: number };
  fresh?: { low: number; high: number };
  /** Known items the listing's expectation was made from. */
  known: number;
  firstLimit?: number;
  pageSize: number;
  maxItems: number;
}

/** A line's basis and range before the forecast fills them in: the price table's. */
export function pricesBasis(): Pick<PlanLine, 'basis' | 'range'> {
  return { basis: { source: 'prices', observations: 0, detail: 'price table and config' }, range: { low: 0, high: 0 } };
}

/** A target's expectation from the history the plan was given (none: the price table's). */
export function historyOfTarget(target: TargetPlan, harvest: Harvest, pageSize: number, history: PlanHistory | undefined): TargetExpectation {
  const maxPerItem = commentsPerItem(harvest.enrich);
  const expectation: TargetExpectation = { commentsPerItem: maxPerItem, known: 0, pageSize, maxItems: target.maxItems };
  const observed = history?.targets[target.key];
  if (!history || !observed) return expectation;
  if (observed.incremental && observed.knownPostedAtMs.length > 0) {
    // As the run: with no posting rate (one known item), its first page is a full one and no new item is expected.
    const fresh = expectedNewItems(observed.knownPostedAtMs, history.asOfMs) ?? 0;
    const firstLimit = firstPageLimit(observed.knownPostedAtMs, history.asOfMs) ?? pageSize;
    const expected = Math.min(fresh, target.maxItems);
    const listed = incrementalListed(expected, firstLimit, pageSize, target.maxItems);
    expectation.listing = { listed: listed.items, pages: listed.pages, fresh: expected };
    const range = countRange(expected);
    expectation.fresh = { low: range.low, high: Math.min(target.maxItems, range.high) };
    expectation.known = observed.knownPostedAtMs.length;
    expectation.firstLimit = firstLimit;
  }
  if (observed.comments && observed.comments.length > 0 && maxPerItem > 0) {
    // A listing's new items are young: their comments are read at their ages, not the mean of every age.
    const ages = expectation.listing ? newItemAges(observed.knownPostedAtMs, history.asOfMs, expectation.listing.fresh) : undefined;
    const perItem = commentsPerItemFrom(observed.comments, maxPerItem, ages);
    expectation.commentsPerItem = perItem.mean;
    expectation.comments = { ...perItem, observations: observed.comments.length, maxPerItem, atAges: ages !== undefined };
  }
  return expectation;
}

function exact(line: PlanLine): void {
  line.range = { low: line.expected.credits, high: line.expected.credits };
}

/** The list line's basis and range: from its known items when the listing is incremental. */
function listRange(line: ForecastTarget, expectation: TargetExpectation, short: boolean): void {
  const { list } = line;
  const { listing, fresh, firstLimit } = expectation;
  if (!listing || !fresh || firstLimit === undefined) return exact(list);
  list.basis = {
    source: 'history',
    observations: expectation.known,
    detail: `${listing.fresh.toFixed(1)} new items expected at the posting rate of ${expectation.known} known items; pages from ${firstLimit}, stopping at a known item`,
  };
  if (short) return exact(list);
  const listed = (items: number) => incrementalListed(items, firstLimit, expectation.pageSize, expectation.maxItems).items * list.unitPrice;
  list.range = { low: Math.min(list.expected.credits, listed(fresh.low)), high: Math.max(list.expected.credits, listed(fresh.high)) };
}

/** An enrichment line's basis and range: its items as the listing's new ones, its comments as observed. */
function enrichmentRange(enrichment: PlanLine, expectation: TargetExpectation, short: boolean): void {
  if (expectation.listing) enrichment.basis = { source: 'history', observations: expectation.known, detail: 'one call per new item the listing is expected to find' };
  const scaled = (items: { low: number; high: number }, perItem: (count: number) => number) => ({
    low: Math.min(enrichment.expected.credits, perItem(items.low) * enrichment.chargedUnitPrice),
    high: Math.max(enrichment.expected.credits, perItem(items.high) * enrichment.chargedUnitPrice),
  });
  if (enrichment.what !== 'comments') {
    if (short || !expectation.fresh) return exact(enrichment);
    enrichment.range = scaled(expectation.fresh, (count) => count);
    return;
  }
  // Each enriched item's comments take the same calls (plan-lines.ts expectEnrichment): the calls say how many items.
  const enriched = enrichment.expected.calls / Math.max(1, commentsPages(Math.ceil(expectation.commentsPerItem)));
  const items = !short && expectation.fresh ? expectation.fresh : { low: enriched, high: enriched };
  const comments = expectation.comments;
  if (!comments) {
    // From the price table: max_per_item on every item, at most; an item may have none.
    enrichment.range = { low: 0, high: enrichment.expected.credits };
    return;
  }
  enrichment.basis = { source: 'history', observations: comments.observations, detail: `${comments.mean.toFixed(2)} comments per item, from ${comments.observations} items' comments bought${comments.atAges ? ', read at the ages the new items are expected to have' : ''}` };
  const units = commentsRange(items, comments, comments.observations, comments.maxPerItem);
  enrichment.range = scaled(units, (count) => count);
}

/** Sets each of a target's lines' basis and range, once the forecast has set what they are expected to buy. */
export function lineRanges(line: ForecastTarget, expectation: TargetExpectation, tracking: TrackingForecast | undefined): void {
  const wanted = expectation.listing?.listed ?? (line.byJob ? line.list.worst.items : expectation.maxItems);
  const short = line.list.expected.items < wanted;
  listRange(line, expectation, short);
  for (const enrichment of line.enrichment) enrichmentRange(enrichment, expectation, short);
  if (line.account) exact(line.account);
  if (line.tracked) {
    exact(line.tracked);
    if (tracking) line.tracked.basis = { source: 'history', observations: line.tracked.worst.items, detail: `items due at ${new Date(tracking.asOfMs).toISOString()}, from their observations in the lake` };
  }
}

export type { LineBasis };
