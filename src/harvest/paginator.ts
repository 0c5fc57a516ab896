/**
 * A target's paging (as a Singer SDK paginator is a stream's): where the listing stands, the next
 * page's size, how a page moves it on, and starting again from the top after a refused cursor.
 * Pure: the listing's activity (activities/target-work.ts) drives it, and
 * test/harvest/paginator.test.ts checks it without a worker.
 */
import type { ListingPosition } from './run-state.js';

/** A cursor that keeps expiring before the next page is fetched would re-buy the list forever. */
export const MAX_RELISTS = 3;

/** What the paging reads of a landed page: how many items it had and where the list goes on. */
export interface PageMove {
  items: readonly unknown[];
  nextCursor?: string;
}

export class Paginator {
  /**
   * `position` is the listing's checkpoint, moved on in place. `incremental`: the run stops at
   * known items, and pages start at the estimate of what is new (`position.nextLimit`) and grow.
   */
  constructor(
    readonly position: ListingPosition,
    private readonly pageSize: number,
    private readonly maxItems: number,
    private readonly incremental: boolean,
  ) {}

  /** Items still wanted; none left once max_items are landed. */
  wanted(): number {
    return this.maxItems - this.position.items;
  }

  /** The next page's size, before the budget has its say. */
  nextSize(): number {
    return Math.min(this.pageSize, this.wanted(), this.position.nextLimit ?? this.pageSize);
  }

  /** A page of `limit` was bought: an incremental run's next page may be twice the size. */
  bought(limit: number): void {
    if (this.incremental) this.position.nextLimit = Math.min(this.pageSize, limit * 2);
  }

  /** Past a landed page, with `fresh` new items of it. */
  advance(page: PageMove, fresh: number): void {
    this.position.page++;
    this.position.items += fresh;
    this.position.offset += page.items.length;
    this.position.cursor = page.nextCursor;
  }

  /**
   * Starts the list again from the top after its cursor was refused (cursors are short-lived, and
   * one may be refused outright): the items the run already has are recognised, not counted twice.
   * False once it was started again MAX_RELISTS times.
   */
  relist(): boolean {
    if (this.position.relists >= MAX_RELISTS) return false;
    this.position.relists++;
    this.position.cursor = undefined;
    this.position.offset = 0;
    this.position.nextLimit = this.pageSize;
    return true;
  }
}
