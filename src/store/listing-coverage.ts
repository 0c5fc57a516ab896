/**
 * How far the last listing of a target got: complete when it reached its max_items or the end of
 * the list, incomplete when it stopped short (budget, failure, a pause). An incremental run may
 * stop at the first item the warehouse already has only after a complete listing; after an
 * incomplete one it lists again to max_items, so the gap the earlier run left is filled.
 */
import { existsSync, readFileSync } from 'node:fs';
import { writeDurableFile } from './durable-file.js';
import { coverageFile } from './layout.js';

export interface ListingCoverage {
  complete: boolean;
  /** The max_items the listing was asked for: a later run asking for more is not covered. */
  max_items: number;
  run_id: string;
  at: string;
}

export function readCoverage(dataDir: string, targetKey: string): ListingCoverage | undefined {
  const file = coverageFile(dataDir, targetKey);
  if (!existsSync(file)) return undefined;
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as ListingCoverage;
  } catch {
    // Unreadable is treated as incomplete: the cost is one fuller listing, never a silent gap.
    return undefined;
  }
}

/** Replaces the target's coverage whole (writeDurableFile), or throws a FileWriteError naming its file. */
export function writeCoverage(dataDir: string, targetKey: string, coverage: ListingCoverage): void {
  writeDurableFile(coverageFile(dataDir, targetKey), JSON.stringify(coverage), { what: 'listing coverage' });
}

/** Whether an incremental run of a target wanting `maxItems` may stop at known items. */
export function coversListing(coverage: ListingCoverage | undefined, maxItems: number): boolean {
  return coverage !== undefined && coverage.complete && coverage.max_items >= maxItems;
}
