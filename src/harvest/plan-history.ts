/**
 * What earlier runs observed of a harvest's targets, as the cost plan (cost-plan.ts) takes it: the
 * data the lake holds (read by src/warehouse/plan-history.ts), and the pure estimates made from it.
 * The run sizes an incremental listing's first page by the same `firstPageLimit`, so the plan and
 * the run read the same history the same way.
 */
import { PAGE_LIMITS } from '../api-catalog/endpoints.js';

/** What the lake and the store observed of one target. */
export interface TargetHistory {
  /**
   * The last listing of the target was complete for its max_items (the store's listing coverage):
   * the next run stops at the first item it already has.
   */
  incremental: boolean;
  /** Posting times (epoch ms) of the newest items the lake has of the target, newest first. */
  knownPostedAtMs: number[];
  /** Comments enrichment of the target's items: per item, the comments bought and the item's age then (ms). */
  comments?: CommentsObservation[];
}

/** One item's comments bought: how many, and how old the item was then. */
export interface CommentsObservation {
  ageMs: number;
  units: number;
}

/** What earlier runs observed, by target key, and the time (the API's clock) the next run is planned at. */
export interface PlanHistory {
  asOfMs: number;
  targets: Record<string, TargetHistory>;
}

/** Where a plan line's expectation came from, and how many observations stand behind it. */
export interface LineBasis {
  source: 'history' | 'prices';
  /** Observations used: known items for a listing, items whose comments were bought for comments. */
  observations: number;
  /** What was observed, in words, for the plan's text. */
  detail: string;
}

/** Known items the run reads to stop at and to size its first page (activities/runs.ts). */
export const KNOWN_IDS = 100;

/** The rate new items appeared at, per ms, from the known items' posting times; undefined with fewer than two. */
function postingRate(postedAt: readonly number[]): number | undefined {
  if (postedAt.length < 2) return undefined;
  const newest = Math.max(...postedAt);
  const oldest = Math.min(...postedAt);
  if (newest <= oldest) return undefined;
  return (postedAt.length - 1) / (newest - oldest);
}

/** New items expected since the newest known one, at the rate the known items were posted. */
export function expectedNewItems(postedAt: readonly number[], nowMs: number): number | undefined {
  const rate = postingRate(postedAt);
  return rate === undefined ? undefined : rate * Math.max(0, nowMs - Math.max(...postedAt));
}

/**
 * The first page's size: the items expected since the newest known one was posted, at the rate
 * the known items were posted, with a quarter of headroom and one more (the known item that tells
 * the run to stop). Both times are the API's (its posted_at, and its Date header for now).
 */
export function firstPageLimit(postedAt: readonly number[], nowMs: number): number | undefined {
  const expected = expectedNewItems(postedAt, nowMs);
  if (expected === undefined) return undefined;
  return Math.min(PAGE_LIMITS.maxSynchronous, Math.max(1, Math.ceil(expected * 1.25) + 1));
}

/**
 * Items an incremental listing buys to find `fresh` new ones: pages from `firstLimit`, each twice
 * the one before (up to `pageSize`, as the run's Paginator grows them), until a page holds a known
 * item (the first past the new ones) or `wanted` items are listed.
 */
export function incrementalListed(fresh: number, firstLimit: number, pageSize: number, wanted: number): { items: number; pages: number } {
  let listed = 0;
  let pages = 0;
  let limit = Math.min(firstLimit, pageSize);
  while (listed < wanted) {
    const size = Math.min(limit, wanted - listed);
    listed += size;
    pages++;
    if (listed > fresh) break;
    limit = Math.min(pageSize, limit * 2);
  }
  return { items: listed, pages };
}

/**
 * A count's range: about two standard deviations either side, the spread of a Poisson count (new
 * items arrive one by one at a rate), at least one either side; never below 0.
 */
export function countRange(expected: number): { low: number; high: number } {
  const spread = Math.max(1, 2 * Math.sqrt(expected));
  return { low: Math.max(0, Math.floor(expected - spread)), high: Math.ceil(expected + spread) };
}

/** Observations an age's comments are read from: the nearest in age. */
const NEAREST = 10;

/** Points the ages of a listing's new items are averaged over. */
const AGE_POINTS = 20;

/** A minute: ages are compared on a log scale, from a minute up. */
const MINUTE_MS = 60_000;

function meanOf(values: readonly number[]): number {
  return values.reduce((sum, value) => sum + value, 0) / values.length;
}

/**
 * The comments an item of `ageMs` is expected to have, from the items observed nearest in age (on
 * a log scale: an hour differs from two as a day from two). Younger than the youngest observed, an
 * item is expected to have a share of theirs in proportion to its age: an item gathers its comments
 * as it ages, from none when it is posted.
 */
export function commentsAtAge(observed: readonly CommentsObservation[], ageMs: number): number {
  const youngest = nearest(observed, (item) => item.ageMs);
  const youngestAge = meanOf(youngest.map((item) => item.ageMs));
  if (ageMs < youngestAge) return (meanOf(youngest.map((item) => item.units)) * ageMs) / youngestAge;
  return meanOf(nearest(observed, (item) => Math.abs(Math.log(item.ageMs + MINUTE_MS) - Math.log(ageMs + MINUTE_MS))).map((item) => item.units));
}

/**
 * The NEAREST observations by `distance`, and every one as near as the last of them: a tie at the
 * edge is taken whole rather than cut where the lake's row order put it, so the same observations
 * in any order give the same plan (two plans of the same lake at the same --at once differed by 2%,
 * 2,731 and 2,782 credits), and no side of a tie is favoured.
 */
function nearest(observed: readonly CommentsObservation[], distance: (item: CommentsObservation) => number): CommentsObservation[] {
  const sorted = [...observed].sort((a, b) => distance(a) - distance(b));
  if (sorted.length <= NEAREST) return sorted;
  const edge = distance(sorted[NEAREST - 1]!);
  return sorted.filter((item) => distance(item) <= edge);
}

/**
 * The ages of a listing's `fresh` new items when the run buys them at `nowMs`: posted at the known
 * items' rate, the newest just now, over the time `fresh` items take at that rate (at most since
 * the newest known item). Undefined without a rate (fewer than two known items).
 */
export function newItemAges(postedAt: readonly number[], nowMs: number, fresh: number): number[] | undefined {
  const rate = postingRate(postedAt);
  if (rate === undefined || fresh <= 0) return undefined;
  const span = Math.min(Math.max(0, nowMs - Math.max(...postedAt)), fresh / rate);
  return Array.from({ length: AGE_POINTS }, (_, index) => ((index + 0.5) / AGE_POINTS) * span);
}

/**
 * Comments per item from what was bought, within 0 and `maxPerItem`: at the ages given (a
 * listing's new items) or, without ages, the mean of all observed; and their spread, the observed
 * items' standard deviation in proportion to the mean.
 */
export function commentsPerItemFrom(observed: readonly CommentsObservation[], maxPerItem: number, ages?: readonly number[]): { mean: number; deviation: number } {
  const units = observed.map((item) => item.units);
  const observedMean = meanOf(units);
  const deviation = Math.sqrt(Math.max(0, meanOf(units.map((value) => value * value)) - observedMean * observedMean));
  const expected = ages ? meanOf(ages.map((age) => Math.min(maxPerItem, commentsAtAge(observed, age)))) : observedMean;
  const mean = Math.min(maxPerItem, Math.max(0, expected));
  return { mean, deviation: observedMean > 0 ? (deviation * mean) / observedMean : 0 };
}

/**
 * The range of the comments `items` items get, when `observations` items had `perItem` on average:
 * two standard deviations either side, of the items' own spread (each item's count varies) and of
 * the mean's error (it was measured on `observations` items), within 0 and `maxPerItem` each.
 */
export function commentsRange(items: { low: number; high: number }, perItem: { mean: number; deviation: number }, observations: number, maxPerItem: number): { low: number; high: number } {
  const spread = (n: number) => 2 * Math.sqrt(n * perItem.deviation ** 2 + (n * perItem.deviation) ** 2 / observations);
  return {
    low: Math.max(0, Math.floor(items.low * perItem.mean - spread(items.low))),
    high: Math.min(items.high * maxPerItem, Math.ceil(items.high * perItem.mean + spread(items.high))),
  };
}
