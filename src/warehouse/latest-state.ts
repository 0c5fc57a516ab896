/**
 * Latest-state tables (accounts, items, comments) hold one row per natural key: each load checks
 * the keys it merged (assertOnePerKey), and maintenance repairs a lake that a DuckLake MERGE bug left
 * with two versions of a key (keepLatestPerKey; docs/ducklake-merge-duplicates.md).
 */
import type { DuckDBConnection } from '@duckdb/node-api';
import { inTransaction, scalarOf } from './duckdb.js';
import type { StagedTable } from './schema.js';

/** The natural key of each latest-state table: one row per key, checked by every load. */
export const LATEST_STATE_KEYS = {
  accounts: ['platform', 'handle'],
  items: ['platform', 'item_id'],
  comments: ['platform', 'comment_id'],
} as const satisfies Partial<Record<StagedTable, readonly string[]>>;

export type LatestStateTable = keyof typeof LATEST_STATE_KEYS;
export const isLatestState = (table: string): table is LatestStateTable => Object.hasOwn(LATEST_STATE_KEYS, table);

/** A load that would leave a latest-state table with more than one row for a key: it is rolled back. */
export class DuplicateKeysError extends Error {
  constructor(
    readonly table: string,
    readonly keys: readonly string[],
    readonly examples: ReadonlyArray<{ key: string[]; rows: number }>,
  ) {
    const shown = examples.map(({ key, rows }) => `(${key.join(', ')}): ${rows} rows`).join('; ');
    super(
      `the load would leave ${table} with more than one row per key (${keys.join(', ')}), e.g. ${shown}: the batch was rolled back and nothing of it is loaded. ` +
        '`harvester maintain` keeps each key\'s latest version; then load again (docs/ducklake-merge-duplicates.md)',
    );
    this.name = 'DuplicateKeysError';
  }
}

/**
 * The guard of every load: after its merge, inside its transaction, each key of `batch` (a table of
 * the batch's keys) has one row in the table, or the load fails and rolls back. Only the batch's keys are looked at (a
 * merge can double no other), so the check costs what the batch does, not what the table holds.
 */
export async function assertOnePerKey(connection: DuckDBConnection, table: LatestStateTable, batch: string): Promise<void> {
  const keys = LATEST_STATE_KEYS[table];
  const keyList = keys.join(', ');
  const reader = await connection.runAndReadAll(
    `SELECT ${keyList}, count(*) AS rows FROM ${table} SEMI JOIN ${batch} USING (${keyList}) GROUP BY ${keyList} HAVING count(*) > 1 ORDER BY ${keyList} LIMIT 3`,
  );
  const examples = reader.getRows().map((row) => ({ key: row.slice(0, keys.length).map(String), rows: Number(row[keys.length]) }));
  if (examples.length > 0) throw new DuplicateKeysError(table, keys, examples);
}

/**
 * Repairs latest-state tables that hold more than one row for a key (left by the DuckLake MERGE bug
 * before loads worked around it): each such key keeps one row, its latest version (the newest
 * `last_seen_at`) with its first sighting widened to the earliest of them. One transaction per
 * table; returns the rows removed per table. Costs a scan of each table's keys, so maintenance, not
 * every load, runs it.
 */
export async function keepLatestPerKey(connection: DuckDBConnection): Promise<Record<LatestStateTable, number>> {
  const removed = { accounts: 0, items: 0, comments: 0 };
  for (const [table, keys] of Object.entries(LATEST_STATE_KEYS) as Array<[LatestStateTable, readonly string[]]>) {
    const keyList = keys.join(', ');
    const kept = `repair_${table}`;
    await connection.run(
      `CREATE OR REPLACE TEMP TABLE ${kept} AS
       SELECT * REPLACE (min(first_seen_at) OVER versions AS first_seen_at), count(*) OVER versions AS _versions
       FROM ${table} WHERE (${keyList}) IN (SELECT (${keyList}) FROM ${table} GROUP BY ${keyList} HAVING count(*) > 1)
       WINDOW versions AS (PARTITION BY ${keyList})
       QUALIFY row_number() OVER (PARTITION BY ${keyList} ORDER BY last_seen_at DESC) = 1`,
    );
    removed[table] = await scalarOf(connection, `SELECT coalesce(sum(_versions - 1), 0) FROM ${kept}`);
    if (removed[table] > 0) {
      await inTransaction(connection, async () => {
        await connection.run(`DELETE FROM ${table} WHERE (${keyList}) IN (SELECT (${keyList}) FROM ${kept})`);
        await connection.run(`INSERT INTO ${table} BY NAME SELECT * EXCLUDE (_versions) FROM ${kept}`);
        await assertOnePerKey(connection, table, kept);
      });
    }
    await connection.run(`DROP TABLE ${kept}`);
  }
  return removed;
}
