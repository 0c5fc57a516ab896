import { describe, expect, it } from 'vitest';
import { itemsBought, mayEnrichJobItems, mayList, SPEND_ORDER, SPEND_STEPS } from '../../src/harvest/spend-order.js';

describe('the spend order of a short budget', () => {
  it('is jobs, a retry\'s failed calls, paged listings with the jobs\' items beside them, then tracked accounts, then tracked items', () => {
    expect(SPEND_ORDER).toEqual(['jobs', 'redo-failed', 'list', 'enrich', 'track-accounts', 'track-items']);
    expect(SPEND_STEPS.map((step) => step.runs)).toEqual(['first', 'first', 'together', 'together', 'last', 'last']);
  });

  it('runs the steps of one kind next to each other: first ones, then the loop, then last ones', () => {
    const kinds = SPEND_STEPS.map((step) => step.runs).filter((runs, index, all) => index === 0 || all[index - 1] !== runs);
    expect(kinds).toEqual(['first', 'together', 'last']);
  });

  it('lists another item while its worst case fits what is free, to the credit', () => {
    expect(mayList(30, 30)).toBe(true);
    expect(mayList(29, 30)).toBe(false);
  });

  it('enriches a job\'s items once no listing is left, or beside the listings when what is free covers their worst case', () => {
    expect(mayEnrichJobItems(0, 10, false)).toBe(false);
    expect(mayEnrichJobItems(1, 10, false)).toBe(true);
    expect(mayEnrichJobItems(9, 10, true)).toBe(false);
    expect(mayEnrichJobItems(10, 10, true)).toBe(true);
  });

  it('counts the items bought one at a time as the workflow buys them: each while its worst case fits, then charged what it cost', () => {
    // The closed form against the process it stands for, over small budgets, worst cases and charges.
    const oneAtATime = (free: number, worst: number, actual: number, wanted: number) => {
      let bought = 0;
      for (let left = free; bought < wanted && left >= worst; left -= actual) bought++;
      return bought;
    };
    for (let free = 0; free <= 40; free++) {
      for (let worst = 1; worst <= 6; worst++) {
        for (let actual = 1; actual <= worst; actual++) {
          for (const wanted of [0, 1, 3, 100]) expect(itemsBought(free, worst, actual, wanted), `free ${free}, worst ${worst}, actual ${actual}, wanted ${wanted}`).toBe(oneAtATime(free, worst, actual, wanted));
        }
      }
    }
  });

  it('buys every wanted item that fits once when items cost nothing, and none when none is wanted', () => {
    expect(itemsBought(5, 5, 0, 7)).toBe(7);
    expect(itemsBought(4, 5, 0, 7)).toBe(0);
    expect(itemsBought(100, 5, 1, -1)).toBe(0);
  });
});
