/**
 * What the warehouse already has of a target: the newest items (or comments) an incremental run
 * stops at, with their posting times, from which its first page is sized; and the items tracking
 * observes again as they age.
 */
import type { Platform } from '../api-catalog/endpoints.js';
import type { TargetPlan } from '../harvest/targets.js';
import type { PriceTable } from '../api-catalog/endpoints.js';
import { priceOf } from '../harvest/rules.js';
import { dueObservations, trackedSinceMs, type DueObservation, type TrackedItem, type TrackingForecast } from '../harvest/tracking.js';
import { sqlString } from './duckdb.js';
import { LIST_KINDS, SEARCH_KINDS } from './normalize.js';
import { lakeExists } from './lake.js';
import { queryWarehouse } from './query.js';

export interface KnownItem {
  id: string;
  /** posted_at in epoch milliseconds, when known. */
  postedAtMs: number | null;
}

/**
 * The ids of the items a listing target has landed: a channel's items of its kind, or a search's
 * hits of its kind. None for a comments target, whose items are comments.
 */
export function targetItemIds(target: TargetPlan): string | undefined {
  const platform = sqlString(target.platform);
  if (target.kind === 'channel') {
    return `SELECT item_id FROM items WHERE platform = ${platform} AND author_handle = ${sqlString(target.params.handle ?? '')} AND kind = '${LIST_KINDS[target.endpoint] ?? 'video'}'`;
  }
  if (target.kind === 'search') {
    return `SELECT item_id FROM search_hits WHERE platform = ${platform} AND query = ${sqlString(target.params.query ?? '')} AND kind = '${SEARCH_KINDS[target.endpoint] ?? 'search'}'`;
  }
  return undefined;
}

/**
 * The newest `limit` items the warehouse has of each target, by target key (newest first); none
 * when there is no warehouse yet. One query for all targets: each query of the lake opens it
 * (about 0.15 s), and a run may have hundreds of targets.
 */
export async function newestKnownItems(dataDir: string, targets: readonly TargetPlan[], limit: number): Promise<Map<string, KnownItem[]>> {
  const known = new Map<string, KnownItem[]>();
  if (targets.length === 0 || !(await lakeExists(dataDir))) return known;
  const parts = targets.map((target, order) => {
    const platform = sqlString(target.platform);
    const ids = targetItemIds(target);
    const newest = ids
      ? `SELECT item_id AS id, posted_at FROM items WHERE platform = ${platform} AND item_id IN (${ids}) ORDER BY posted_at DESC LIMIT ${limit}`
      : `SELECT c.comment_id AS id, c.posted_at FROM comments c
         WHERE c.platform = ${platform} AND c.item_id = (SELECT item_id FROM items WHERE platform = ${platform} AND url = ${sqlString(target.params.url ?? '')} LIMIT 1)
         ORDER BY c.posted_at DESC LIMIT ${limit}`;
    return `SELECT ${order} AS target_order, id, epoch_ms(posted_at) AS t, posted_at FROM (${newest})`;
  });
  const sql = `SELECT target_order, id, t FROM (${parts.join(' UNION ALL ')}) ORDER BY target_order, posted_at DESC`;
  const rows = (await queryWarehouse(dataDir, sql)).rows as { target_order: number; id: string; t: string | number | null }[];
  for (const row of rows) {
    const key = targets[Number(row.target_order)]!.key;
    const items = known.get(key) ?? [];
    items.push({ id: String(row.id), postedAtMs: row.t === null ? null : Number(row.t) });
    known.set(key, items);
  }
  return known;
}

/** An item `track.items` may observe again: the target that landed it first, and its last fresh observation. */
export interface TrackableItem extends TrackedItem {
  platform: Platform;
  /** The key of the first of the harvest's targets (in config order) that landed the item. */
  target: string;
}

/**
 * The items the harvest's listing targets landed that were posted at or after `postedSinceMs`,
 * each once (with the first target that has it), and when each was last observed: the newest
 * observation the API answered fresh, not from its cache (whose data may be older than its time).
 */
export async function trackableItems(dataDir: string, targets: readonly TargetPlan[], postedSinceMs: number): Promise<TrackableItem[]> {
  if (!(await lakeExists(dataDir))) return [];
  const parts = targets.flatMap((target, order) => {
    const ids = targetItemIds(target);
    return ids ? [`SELECT ${order} AS target_order, ${sqlString(target.platform)} AS platform, item_id FROM (${ids})`] : [];
  });
  if (parts.length === 0) return [];
  const rows = (
    await queryWarehouse(
      dataDir,
      `WITH tracked AS (${parts.join(' UNION ALL ')}),
       firsts AS (SELECT platform, item_id, min(target_order) AS target_order FROM tracked GROUP BY ALL)
       SELECT f.target_order, i.platform, i.url, epoch_ms(i.posted_at) AS posted,
         (SELECT epoch_ms(max(m.observed_at)) FROM item_metrics m WHERE m.platform = i.platform AND m.item_id = i.item_id AND m.from_cache IS NOT TRUE) AS last_observed
       FROM firsts f JOIN items i USING (platform, item_id)
       WHERE i.url IS NOT NULL AND i.posted_at >= to_timestamp(${postedSinceMs / 1000})
       ORDER BY i.posted_at, i.url`,
    )
  ).rows as { target_order: number; platform: Platform; url: string; posted: string | number; last_observed: string | number | null }[];
  return rows.map((row) => ({
    platform: row.platform,
    target: targets[Number(row.target_order)]!.key,
    url: row.url,
    postedAtMs: Number(row.posted),
    ...(row.last_observed === null ? {} : { lastObservedAtMs: Number(row.last_observed) }),
  }));
}

/** The tracked items due at `nowMs` (the API's clock), most overdue first. */
export async function dueTrackedItems(dataDir: string, targets: readonly TargetPlan[], days: number, nowMs: number): Promise<DueObservation<TrackableItem>[]> {
  return dueObservations(await trackableItems(dataDir, targets, trackedSinceMs(nowMs, days)), nowMs, days);
}

/** What tracking's items will cost at `asOfMs`: the due items by target, and their stats' price. */
export async function forecastTracking(dataDir: string, targets: readonly TargetPlan[], days: number, asOfMs: number, prices: PriceTable): Promise<TrackingForecast> {
  const due: Record<string, number> = {};
  let credits = 0;
  for (const { item } of await dueTrackedItems(dataDir, targets, days, asOfMs)) {
    due[item.target] = (due[item.target] ?? 0) + 1;
    credits += priceOf(prices, item.platform, 'stats');
  }
  return { asOfMs, due, credits };
}
