/**
 * What the lake observed of a harvest's targets, for the cost plan (src/harvest/plan-basis.ts):
 * the newest items each target has (their posting times: the rate new ones appear at) and the
 * comments bought for its items (comments per item, for the account or the query). Whether each
 * target's last listing was complete is the store's (its listing coverage), given by the caller.
 */
import { KNOWN_IDS, type PlanHistory, type TargetHistory } from '../harvest/plan-history.js';
import { commentsTargetKeySql, type TargetPlan } from '../harvest/targets.js';
import { sqlString } from './duckdb.js';
import { newestKnownItems, targetItemIds } from './known-items.js';
import { lakeExists } from './lake.js';
import { queryWarehouse } from './query.js';

type CommentsObserved = NonNullable<TargetHistory['comments']>;

/** Items' comments purchases a target's history keeps: its newest, by the time they were bought. */
const COMMENTS_OBSERVED = 500;

/**
 * The comments bought for each enriching target's items: per item and run its comments calls'
 * units summed (one item's pages are one observation), with the item's age when they were bought
 * (an item gathers comments as it ages). The newest COMMENTS_OBSERVED per target; one query for all.
 * In a total order, and the newest chosen by one (purchases at the same moment by item and run):
 * the same lake gives the same observations in the same order, so the same plan.
 */
async function commentsBought(dataDir: string, targets: readonly TargetPlan[]): Promise<Map<string, CommentsObserved>> {
  const parts = targets.flatMap((target, order) => {
    const ids = target.enrich ? targetItemIds(target) : undefined;
    return ids ? [`SELECT ${order} AS target_order, ${sqlString(target.platform)} AS platform, item_id FROM (${ids})`] : [];
  });
  const observed = new Map<string, CommentsObserved>();
  if (parts.length === 0) return observed;
  const rows = (
    await queryWarehouse(
      dataDir,
      `WITH listed AS (${parts.join(' UNION ALL ')}),
       per_item AS (
         SELECT l.target_order, a.run_id, i.item_id, sum(a.units) AS units,
           epoch_ms(min(a.called_at)) - epoch_ms(any_value(i.posted_at)) AS age_ms, min(a.called_at) AS bought_at
         FROM listed l JOIN items i ON i.platform = l.platform AND i.item_id = l.item_id
         JOIN api_calls a ON a.endpoint = i.platform || '/comments' AND a.target = ${commentsTargetKeySql('i.platform', 'i.url')}
         WHERE i.posted_at IS NOT NULL
         GROUP BY ALL)
       SELECT target_order, units, age_ms FROM per_item
       QUALIFY row_number() OVER (PARTITION BY target_order ORDER BY bought_at DESC, item_id, run_id) <= ${COMMENTS_OBSERVED}
       ORDER BY target_order, age_ms, units`,
    )
  ).rows as { target_order: number; units: number | bigint | string; age_ms: number | bigint | string }[];
  for (const row of rows) {
    const key = targets[Number(row.target_order)]!.key;
    const items = observed.get(key) ?? [];
    items.push({ ageMs: Math.max(0, Number(row.age_ms)), units: Number(row.units) });
    observed.set(key, items);
  }
  return observed;
}

/**
 * The history of `targets` in the lake at `asOfMs` (the API's clock), each marked incremental when
 * `incremental` names it (its last listing was complete). Empty when there is no lake yet.
 */
export async function readPlanHistory(dataDir: string, targets: readonly TargetPlan[], incremental: ReadonlySet<string>, asOfMs: number): Promise<PlanHistory> {
  const history: PlanHistory = { asOfMs, targets: {} };
  if (targets.length === 0 || !(await lakeExists(dataDir))) return history;
  const known = await newestKnownItems(dataDir, targets, KNOWN_IDS);
  const comments = await commentsBought(dataDir, targets);
  for (const target of targets) {
    const items = known.get(target.key) ?? [];
    const bought = comments.get(target.key);
    if (items.length === 0 && !bought) continue;
    history.targets[target.key] = {
      incremental: incremental.has(target.key),
      knownPostedAtMs: items.flatMap((item) => (item.postedAtMs === null ? [] : [item.postedAtMs])),
      ...(bought ? { comments: bought } : {}),
    };
  }
  return history;
}
