import { describe, expect, it } from 'vitest';
import { MAX_RELISTS, Paginator } from '../../src/harvest/paginator.js';
import type { ListingPosition } from '../../src/harvest/run-state.js';

function start(fields: Partial<ListingPosition> = {}): ListingPosition {
  return { page: 1, items: 0, offset: 0, relists: 0, ...fields };
}

describe('Paginator', () => {
  it('sizes the next page by the page size, what is still wanted and an incremental estimate', () => {
    expect(new Paginator(start(), 50, 120, false).nextSize()).toBe(50);
    expect(new Paginator(start({ items: 100 }), 50, 120, false).nextSize()).toBe(20);
    expect(new Paginator(start({ nextLimit: 7 }), 50, 120, true).nextSize()).toBe(7);
    expect(new Paginator(start({ items: 120 }), 50, 120, false).wanted()).toBe(0);
  });

  it('doubles an incremental run\'s next page after each bought page, up to the page size', () => {
    const paging = new Paginator(start({ nextLimit: 7 }), 50, 1_000, true);
    paging.bought(7);
    expect(paging.nextSize()).toBe(14);
    paging.bought(14);
    paging.bought(28);
    expect(paging.nextSize()).toBe(50);
  });

  it('leaves a full run\'s page size alone when a page is bought', () => {
    const paging = new Paginator(start(), 50, 1_000, false);
    paging.bought(50);
    expect(paging.position.nextLimit).toBeUndefined();
  });

  it('moves the position past a page: its number, its fresh items, its offset and its cursor', () => {
    const position = start();
    const paging = new Paginator(position, 3, 100, false);
    paging.advance({ items: [1, 2, 3], nextCursor: 'c2' }, 2);
    // The checkpoint itself moves on: the listing heartbeats the same object.
    expect(position).toEqual({ page: 2, items: 2, offset: 3, relists: 0, cursor: 'c2' });
    paging.advance({ items: [4] }, 1);
    expect(position).toEqual({ page: 3, items: 3, offset: 4, relists: 0, cursor: undefined });
  });

  it('starts the list again from the top after a refused cursor, at most MAX_RELISTS times', () => {
    const position = start({ page: 4, items: 30, offset: 30, cursor: 'c4', nextLimit: 5 });
    const paging = new Paginator(position, 10, 100, true);
    for (let relist = 1; relist <= MAX_RELISTS; relist++) {
      expect(paging.relist()).toBe(true);
      // Page numbers and items landed stay: a relisted page lands after the others, and items the run has are not counted again.
      expect(position).toEqual({ page: 4, items: 30, offset: 0, relists: relist, cursor: undefined, nextLimit: 10 });
    }
    expect(paging.relist()).toBe(false);
    expect(position.relists).toBe(MAX_RELISTS);
  });
});
