import { describe, expect, it } from 'vitest';
import { dueAge, dueObservations, OBSERVATION_AGES_MS } from '../../src/harvest/tracking.js';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const POSTED = Date.UTC(2026, 10, 1);

describe('tracking: observations follow an item\'s age', () => {
  it('is due at each planned age reached since the last observation, and not before', () => {
    expect(dueAge({ url: 'a', postedAtMs: POSTED }, POSTED + 30 * 60_000, 30)).toBeUndefined();
    expect(dueAge({ url: 'a', postedAtMs: POSTED }, POSTED + 2 * HOUR, 30)).toBe(HOUR);
    expect(dueAge({ url: 'a', postedAtMs: POSTED, lastObservedAtMs: POSTED + 2 * HOUR }, POSTED + 5 * HOUR, 30)).toBeUndefined();
    expect(dueAge({ url: 'a', postedAtMs: POSTED, lastObservedAtMs: POSTED + 2 * HOUR }, POSTED + 7 * HOUR, 30)).toBe(6 * HOUR);
    // A schedule paused for days: one observation covers every age passed meanwhile.
    expect(dueAge({ url: 'a', postedAtMs: POSTED, lastObservedAtMs: POSTED + 2 * HOUR }, POSTED + 4 * DAY, 30)).toBe(3 * DAY);
  });

  it('follows a 6-hour schedule over ten days to one observation per planned age in the window', () => {
    const item = { url: 'a', postedAtMs: POSTED + 2 * HOUR } as { url: string; postedAtMs: number; lastObservedAtMs?: number };
    const observedAt: number[] = [];
    for (let now = POSTED; now <= POSTED + 10 * DAY; now += 6 * HOUR) {
      if (dueAge(item, now, 7) !== undefined) {
        observedAt.push(now - item.postedAtMs);
        item.lastObservedAtMs = now;
      }
    }
    const planned = OBSERVATION_AGES_MS.filter((age) => age <= 7 * DAY);
    expect(observedAt).toHaveLength(planned.length);
    planned.forEach((age, i) => {
      expect(observedAt[i]).toBeGreaterThanOrEqual(age);
      expect(observedAt[i]! - age).toBeLessThan(6 * HOUR);
    });
  });

  it('lists due items most overdue first, and leaves out items older than the window', () => {
    const items = [
      { url: 'young', postedAtMs: POSTED - 2 * HOUR },
      { url: 'old', postedAtMs: POSTED - 40 * DAY },
      { url: 'week', postedAtMs: POSTED - 7 * DAY - 5 * HOUR, lastObservedAtMs: POSTED - 4 * DAY },
    ];
    const due = dueObservations(items, POSTED, 30);
    expect(due.map((entry) => [entry.item.url, entry.plannedAgeMs, entry.overdueMs])).toEqual([
      ['week', 7 * DAY, 5 * HOUR],
      ['young', HOUR, HOUR],
    ]);
  });
});
