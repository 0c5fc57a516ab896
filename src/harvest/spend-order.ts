/**
 * The order a short budget is spent in: the workflow runs by it and `harvester plan` forecasts by
 * it, so the forecast and the run cannot disagree. With room for everything, all work runs at once
 * and the order changes nothing.
 *
 * 1. `job`: each target bought as a job, in config order, reserves what the budget fits of its
 *    job (rules.ts `jobLimit`), or is paged when that is too few items for a job;
 * 2. `pages`: the paged targets, in config order, list items, each with its enrichment, while the
 *    next item's worst case fits what is free;
 * 3. `job-items`: the items the jobs listed are enriched, once no listing is left to start, or
 *    alongside the listings when what is free covers their whole worst case;
 * 4. `tracked-accounts`: once everything new is listed and enriched, the tracked accounts are
 *    observed (`track.accounts`), in config order, as far as what is left covers;
 * 5. `tracked-items`: then the tracked items due (`track.items`), most overdue first, as far as
 *    what is left covers.
 */
export const SPEND_ORDER = ['job', 'pages', 'job-items', 'tracked-accounts', 'tracked-items'] as const;

/** Whether a paged target may list another item: its worst case (listing and enrichment) fits. */
export function mayList(free: number, itemWorst: number): boolean {
  return free >= itemWorst;
}

/** Whether the items a job listed may be enriched now: step 3 of SPEND_ORDER. */
export function mayEnrichJobItems(free: number, enrichmentWorst: number, listingsLeft: boolean): boolean {
  return free > 0 && (!listingsLeft || free >= enrichmentWorst);
}

/**
 * How many of `wanted` items are bought out of `free` credits when items are bought one at a
 * time, each while its worst case `worst` still fits, and each then charged `actual`.
 */
export function itemsBought(free: number, worst: number, actual: number, wanted: number): number {
  if (!mayList(free, worst) || wanted <= 0) return 0;
  if (actual <= 0) return wanted;
  return Math.min(wanted, Math.floor((free - worst) / actual) + 1);
}
