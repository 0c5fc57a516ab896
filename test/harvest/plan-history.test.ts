/**
 * The plan's history arithmetic, pure: new items at the known items' posting rate, the pages an
 * incremental listing buys to find them, comments per item read at the new items' ages, and the
 * run's forecast misses (a part outside its range, by how much).
 */
import { describe, expect, it } from 'vitest';
import { planHarvestCost } from '../../src/harvest/cost-plan.js';
import { commentsAtAge, commentsPerItemFrom, countRange, expectedNewItems, firstPageLimit, incrementalListed, newItemAges, type PlanHistory } from '../../src/harvest/plan-history.js';
import { forecastMisses, runForecastOf, TRACKING_PART } from '../../src/harvest/run-forecast.js';
import { harvestFrom, prices } from '../support/temporal.js';

const HOUR = 3_600_000;
/** Eleven items posted an hour apart, the newest at 10 h. */
const HOURLY = Array.from({ length: 11 }, (_, index) => (10 - index) * HOUR);

describe('new items and the pages that find them', () => {
  it('expects new items at the known rate since the newest, and sizes the first page as the run does', () => {
    expect(expectedNewItems(HOURLY, 16 * HOUR)).toBeCloseTo(6);
    // 6 × 1.25, and one more for the known item the run stops at.
    expect(firstPageLimit(HOURLY, 16 * HOUR)).toBe(9);
    expect(expectedNewItems([5 * HOUR], 16 * HOUR)).toBeUndefined();
  });

  it('lists pages from the first, each twice the one before, until a page holds a known item', () => {
    expect(incrementalListed(6, 9, 50, 100)).toEqual({ items: 9, pages: 1 });
    // 9 are all new: then 18 more, the last of which are known.
    expect(incrementalListed(12, 9, 50, 100)).toEqual({ items: 27, pages: 2 });
    expect(incrementalListed(500, 9, 50, 100)).toEqual({ items: 100, pages: 4 });
  });

  it('a count of new items ranges two standard deviations of a Poisson count either side', () => {
    expect(countRange(25)).toEqual({ low: 15, high: 35 });
    expect(countRange(0)).toEqual({ low: 0, high: 1 });
  });
});

describe('comments per item', () => {
  const observed = [
    ...Array.from({ length: 10 }, () => ({ ageMs: 2 * HOUR, units: 4 })),
    ...Array.from({ length: 10 }, () => ({ ageMs: 48 * HOUR, units: 10 })),
  ];

  it('reads an age from the items observed nearest it, and a younger one in proportion to its age', () => {
    expect(commentsAtAge(observed, 40 * HOUR)).toBe(10);
    expect(commentsAtAge(observed, 3 * HOUR)).toBe(4);
    expect(commentsAtAge(observed, HOUR)).toBe(2);
  });

  it('averages the new items ages, within max_per_item, and keeps the observed spread in proportion', () => {
    const ages = newItemAges(HOURLY, 16 * HOUR, 6)!;
    expect(ages).toHaveLength(20);
    expect(Math.max(...ages)).toBeLessThan(6 * HOUR);
    const young = commentsPerItemFrom(observed, 5, ages);
    expect(young.mean).toBeGreaterThan(2);
    expect(young.mean).toBeLessThanOrEqual(4);
    expect(commentsPerItemFrom(observed, 5).mean).toBe(5);
    expect(commentsPerItemFrom(observed, 20)).toEqual({ mean: 7, deviation: 3 });
  });
});

describe("a plan from history, and the run's forecast misses", () => {
  const harvest = harvestFrom(`
harvests:
  - name: history
    budget: { credits: 100000 }
    enrich: { stats: true, comments: { max_per_item: 5 } }
    channels:
      - { platform: tiktok, handle: someone, content: videos, max_items: 30 }
`);
  const key = 'channel:tiktok:someone:videos';
  const history: PlanHistory = { asOfMs: 16 * HOUR, targets: { [key]: { incremental: true, knownPostedAtMs: HOURLY, comments: Array.from({ length: 30 }, () => ({ ageMs: 3 * HOUR, units: 2 })) } } };

  it('expects the new items, not max_items, and says which lines came from history and from how many observations', () => {
    const plan = planHarvestCost(harvest, prices, { history });
    const target = plan.targets[0]!;
    // 9 listed at 3 credits; 6 new items, each stats (3), and comments: the new items are 0 to 6 h
    // old, the observed ones 3 h with 2 each, so the younger half are read at 1 on average, the older at 2: 1.5 × 6 = 9.
    expect(target.list.expected).toEqual({ calls: 1, items: 9, credits: 27 });
    expect(target.list.basis).toMatchObject({ source: 'history', observations: 11 });
    expect(target.enrichment.map((line) => [line.what, line.expected.items])).toEqual([['stats', 6], ['comments', 9]]);
    expect(target.enrichment[1]!.basis).toMatchObject({ source: 'history', observations: 30 });
    expect(plan.totals.expectedRange.low).toBeLessThanOrEqual(plan.totals.expectedCredits);
    expect(plan.totals.expectedRange.high).toBeGreaterThanOrEqual(plan.totals.expectedCredits);
    // The worst case is a first run's, as before: a bound no run passes.
    expect(plan.totals.worstCredits).toBe(planHarvestCost(harvest, prices).totals.worstCredits);
  });

  it('a target listed completely with one known item is listed again one full page, no job and no new item expected, as the run does', () => {
    const one: PlanHistory = { asOfMs: 16 * HOUR, targets: { [key]: { incremental: true, knownPostedAtMs: [5 * HOUR] } } };
    const target = planHarvestCost({ ...harvest, job_threshold: 10 }, prices, { history: one }).targets[0]!;
    expect(target.list.mode).toBe('pages');
    expect(target.list.expected).toEqual({ calls: 1, items: 30, credits: 90 });
    expect(target.enrichment.every((line) => line.expected.credits === 0)).toBe(true);
  });

  it('names a part that spent outside its range, by how far past its edge', () => {
    const forecast = runForecastOf(planHarvestCost(harvest, prices, { history }));
    const part = forecast.parts[0]!;
    expect(forecastMisses(forecast, { [key]: part.expected })).toEqual([]);
    expect(forecastMisses(forecast, { [key]: part.high + 7 })).toEqual([expect.objectContaining({ part: key, spent: part.high + 7, by: 7 })]);
    expect(forecastMisses(forecast, { [key]: part.low - 3, [TRACKING_PART]: 0 })[0]).toMatchObject({ by: -3 });
    expect(part.lines).toContain('history: ');
  });
});

describe('comments at an age, whatever order the lake gave the observations in', () => {
  it('is the same for every order of the same observations: items of equal age are taken by their counts, not by where they came', () => {
    const HOUR_MS = 3_600_000;
    // Twelve items bought at the same age (one batch), with counts from 0 to 11, and older ones:
    // the ten nearest to 1 h are ten of the twelve, and which ten must not depend on the order.
    const observed = [...Array.from({ length: 12 }, (_, index) => ({ ageMs: HOUR_MS, units: index })), ...Array.from({ length: 5 }, (_, index) => ({ ageMs: (index + 10) * HOUR_MS, units: 50 }))];
    const reversed = [...observed].reverse();
    const shuffled = [...observed.slice(6), ...observed.slice(0, 6)];
    for (const age of [HOUR_MS, HOUR_MS / 2]) {
      const expected = commentsAtAge(observed, age);
      expect(commentsAtAge(reversed, age)).toBe(expected);
      expect(commentsAtAge(shuffled, age)).toBe(expected);
    }
  });
});
