/**
 * What the warehouse already has of a target, newest first: the items (or comments) an
 * incremental run stops at, with their posting times, from which its first page is sized.
 */
import { existsSync } from 'node:fs';
import type { TargetPlan } from '../harvest/targets.js';
import { sqlString } from './duckdb.js';
import { warehousePath } from '../store/layout.js';
import { LIST_KINDS, SEARCH_KINDS } from './normalize.js';
import { queryWarehouse } from './query.js';

export interface KnownItem {
  id: string;
  /** posted_at in epoch milliseconds, when known. */
  postedAtMs: number | null;
}

/** The newest `limit` items the warehouse has of a target; none when there is no warehouse yet. */
export async function newestKnownItems(dataDir: string, target: TargetPlan, limit: number): Promise<KnownItem[]> {
  if (!existsSync(warehousePath(dataDir))) return [];
  const platform = sqlString(target.platform);
  let sql: string;
  if (target.kind === 'channel') {
    sql = `SELECT item_id AS id, epoch_ms(posted_at) AS t FROM items WHERE platform = ${platform} AND author_handle = ${sqlString(target.params.handle ?? '')} AND kind = '${LIST_KINDS[target.endpoint] ?? 'video'}' ORDER BY posted_at DESC LIMIT ${limit}`;
  } else if (target.kind === 'search') {
    sql = `SELECT h.item_id AS id, epoch_ms(i.posted_at) AS t FROM search_hits h JOIN items i USING (platform, item_id)
           WHERE h.platform = ${platform} AND h.query = ${sqlString(target.params.query ?? '')} AND h.kind = '${SEARCH_KINDS[target.endpoint] ?? 'search'}'
           GROUP BY h.item_id, i.posted_at ORDER BY t DESC LIMIT ${limit}`;
  } else {
    sql = `SELECT c.comment_id AS id, epoch_ms(c.posted_at) AS t FROM comments c
           WHERE c.platform = ${platform} AND c.item_id = (SELECT item_id FROM items WHERE platform = ${platform} AND url = ${sqlString(target.params.url ?? '')} LIMIT 1)
           ORDER BY c.posted_at DESC LIMIT ${limit}`;
  }
  const rows = (await queryWarehouse(dataDir, sql)).rows as { id: string; t: string | number | null }[];
  return rows.map((row) => ({ id: String(row.id), postedAtMs: row.t === null ? null : Number(row.t) }));
}
