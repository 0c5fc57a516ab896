/**
 * The merge stage of a load: what normalize staged (`stage_<table>`) goes into the warehouse
 * tables, latest state upserted (newer observations win) and history appended, and the landings it
 * came from are recorded in `loaded_landings`, all in one transaction. A landing's rows and its
 * record commit together or not at all, so each landing is loaded exactly once. Latest-state tables
 * (accounts, items, comments) keep one row per natural key: each merge checks the keys it merged
 * (assertOnePerKey), and maintenance repairs a lake that a DuckLake MERGE bug left with two
 * versions of a key (keepLatestPerKey; docs/ducklake-merge-duplicates.md).
 */
import type { DuckDBConnection } from '@duckdb/node-api';
import { StepTimes } from './step-times.js';
import { inTransaction, scalarOf } from './duckdb.js';
import { STAGED_TABLES, type StagedTable } from './schema.js';

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

/**
 * Which of two observations is newer: the later seen, and of two seen at the same moment (the API's
 * clock has a second's resolution), the one with the greater request id. Without that tie-break the
 * winner of a tie depended on the order rows met in a batch, so a rebuild (harvester rebuild) could
 * pick another answer's request id than the load had.
 */
const observation = (table: string, seenColumn: string) => `(${table}.${seenColumn}, coalesce(${table}.request_id, ''))`;

/** For upserts: take the newer observation's value, falling back to what is known. */
function newer(table: string, column: string, seenColumn = 'last_seen_at'): string {
  return `${column} = CASE WHEN ${observation('s', seenColumn)} >= ${observation(table, seenColumn)} THEN coalesce(s.${column}, ${table}.${column}) ELSE coalesce(${table}.${column}, s.${column}) END`;
}
const seenRange = (table: string) => `first_seen_at = least(${table}.first_seen_at, s.first_seen_at), last_seen_at = greatest(${table}.last_seen_at, s.last_seen_at)`;
/** The latest non-null value of a column within a batch (latest as `observation` orders them). */
const latest = (column: string) => `arg_max(${column}, (seen_at, coalesce(request_id, ''))) FILTER (WHERE ${column} IS NOT NULL) AS ${column}`;
/**
 * One row per key of a staged latest-state table, as the upsert needs: each column's latest non-null
 * value in the batch, and when the key was first and last seen. Keys seen once in the batch (nearly
 * all of them) skip the aggregation, which costs more than the merge itself for string columns.
 */
function onePerKey(stage: string, keys: readonly string[], anyColumns: string[], latestColumns: string[]): string {
  const keyList = keys.join(', ');
  return `WITH repeated AS (SELECT ${keyList} FROM ${stage} GROUP BY ${keyList} HAVING count(*) > 1)
    SELECT ${[...keys, ...anyColumns, ...latestColumns].join(', ')}, seen_at AS first_seen_at, seen_at AS last_seen_at FROM ${stage} ANTI JOIN repeated USING (${keyList})
    UNION ALL
    SELECT ${[keyList, ...anyColumns.map((column) => `any_value(${column}) AS ${column}`), ...latestColumns.map((column) => latest(column))].join(', ')},
      min(seen_at) AS first_seen_at, max(seen_at) AS last_seen_at
    FROM ${stage} SEMI JOIN repeated USING (${keyList}) GROUP BY ${keyList}`;
}
/** One row per key within the batch, so a merge never meets the same key twice. */
const distinctBy = (keys: string) => `QUALIFY row_number() OVER (PARTITION BY ${keys}) = 1`;
/**
 * Latest state: rows of `source` (one per key) update the row with their key, or are inserted. In a
 * lake that inlines small writes (`inlines`, lake.ts's lakeInlines): an UPDATE and then an INSERT
 * of the keys it did not find, not one MERGE: DuckLake 1.5.5 writes every MERGE's rows to a Parquet
 * file of its own, while an UPDATE's and an INSERT's rows below the data inlining limit stay in the
 * catalog, with no file to fsync before the commit (lake-sync.ts); a daily run's few changed items
 * cost no file. In a lake that writes files (a shared one), one MERGE: one file a load, where the
 * UPDATE and the INSERT would write two and a delete file, which merge_adjacent_files never merges.
 * (The tables that never inline, schema.ts's NEVER_INLINED, are appended to, never upserted.)
 */
const upsert = (table: string, keys: readonly string[], source: string, updates: string) => (inlines: boolean) => {
  const matches = keys.map((key) => `${table}.${key} = s.${key}`).join(' AND ');
  if (!inlines) return [`MERGE INTO ${table} USING (${source}) AS s ON ${matches} WHEN MATCHED THEN UPDATE SET ${updates} WHEN NOT MATCHED THEN INSERT BY NAME`];
  return [`UPDATE ${table} SET ${updates} FROM (${source}) AS s WHERE ${matches}`, `INSERT INTO ${table} BY NAME SELECT * FROM (${source}) AS s WHERE NOT EXISTS (SELECT 1 FROM ${table} WHERE ${matches})`];
};
/** The table a latest-state merge reads its batch from: one row per key, materialized. */
const mergeSource = (table: StagedTable): string => `merge_source_${table}`;
/**
 * A latest-state table seen over time (accounts, items, comments): each key's newest non-null
 * values win, and its first and last sightings widen. `fixedColumns` never change for a key.
 *
 * The batch's rows (one per key) are materialized in a temporary table first, and the upsert reads
 * that table plainly (see upsert for when it is one MERGE). DuckLake 1.5.5's MERGE with the `onePerKey` query itself as its source (a CTE and
 * UNION ALL) matched rows at positions 2,048 and above of a data file but did not delete them: both
 * versions stayed visible (docs/ducklake-merge-duplicates.md, with a reproduction without the
 * project). A plain table as the source leaves none; every load checks it (assertOnePerKey).
 */
const latestState = (table: StagedTable, keys: readonly string[], fixedColumns: string[], latestColumns: string[]) => (inlines: boolean) => [
  `CREATE OR REPLACE TEMP TABLE ${mergeSource(table)} AS ${onePerKey(`stage_${table}`, keys, fixedColumns, latestColumns)}`,
  ...upsert(table, keys, `SELECT * FROM ${mergeSource(table)}`, `${latestColumns.map((column) => newer(table, column)).join(', ')}, ${seenRange(table)}`)(inlines),
];

const append = (table: StagedTable) => `INSERT INTO ${table} BY NAME SELECT * EXCLUDE (_landing) FROM stage_${table}`;

/**
 * How each staged table merges into its warehouse table: latest state is upserted (newer
 * observations win), history is appended.
 */
const MERGES: Record<StagedTable, string[] | ((inlines: boolean) => string[])> = {
  accounts: latestState('accounts', LATEST_STATE_KEYS.accounts, [], ['name', 'bio', 'verified', 'followers', 'following', 'posts', 'request_id']),
  account_metrics: [append('account_metrics')],
  items: latestState('items', LATEST_STATE_KEYS.items, ['kind'], ['url', 'caption', 'author_handle', 'posted_at', 'request_id']),
  item_metrics: [append('item_metrics')],
  comments: latestState('comments', LATEST_STATE_KEYS.comments, ['item_id'], ['text', 'author_handle', 'likes', 'posted_at', 'request_id']),
  search_hits: [append('search_hits')],
  transcripts: upsert(
    'transcripts',
    ['platform', 'item_id'],
    'SELECT * EXCLUDE (_landing) FROM stage_transcripts QUALIFY row_number() OVER (PARTITION BY platform, item_id ORDER BY fetched_at DESC, request_id DESC) = 1',
    `${['language', 'source', 'text', 'request_id'].map((column) => newer('transcripts', column, 'fetched_at')).join(', ')}, fetched_at = greatest(transcripts.fetched_at, s.fetched_at)`,
  ),
  transcript_segments: [
    // A transcript's segments are replaced whole, so a shorter new transcript leaves no stale tail.
    `DELETE FROM transcript_segments WHERE (platform, item_id) IN (SELECT DISTINCT platform, item_id FROM stage_transcript_segments)`,
    `INSERT INTO transcript_segments BY NAME SELECT * EXCLUDE (_landing) FROM stage_transcript_segments ${distinctBy('platform, item_id, seq')}`,
  ],
  summaries: upsert(
    'summaries',
    ['platform', 'item_id'],
    'SELECT * EXCLUDE (_landing) FROM stage_summaries QUALIFY row_number() OVER (PARTITION BY platform, item_id ORDER BY fetched_at DESC, request_id DESC) = 1',
    `${['language', 'summary', 'request_id'].map((column) => newer('summaries', column, 'fetched_at')).join(', ')}, fetched_at = greatest(summaries.fetched_at, s.fetched_at)`,
  ),
  downloads: [append('downloads')],
  api_calls: [append('api_calls')],
  harvest_runs: upsert(
    'harvest_runs',
    ['run_id'],
    `SELECT * EXCLUDE (_landing, seq) FROM stage_harvest_runs QUALIFY row_number() OVER (PARTITION BY run_id ORDER BY seq DESC) = 1`,
    'status = s.status, finished_at = s.finished_at, budget_credits = s.budget_credits, credits_spent = s.credits_spent, items_landed = s.items_landed, error = s.error, enrichments = coalesce(s.enrichments, harvest_runs.enrichments), answers_quarantined = s.answers_quarantined',
  ),
  text_repairs: [append('text_repairs')],
  // A run's final status lists every failed call it still has: it replaces what its earlier final
  // status (before a retry) listed, an empty list included.
  failed_calls: [
    `DELETE FROM failed_calls WHERE run_id IN (SELECT run_id FROM raw_run WHERE failed_calls IS NOT NULL)`,
    `INSERT INTO failed_calls BY NAME SELECT * EXCLUDE (_landing, seq) FROM stage_failed_calls
     WHERE (run_id, seq) IN (SELECT (run_id, max(seq)) FROM raw_run WHERE failed_calls IS NOT NULL GROUP BY run_id)`,
  ],
};

/**
 * The staged tables whose merge has anything to do: their stage has rows (normalize counted them,
 * `staged_rows`), or, for failed_calls, a run status lists its failed calls (an empty list replaces
 * the rows of an earlier one). A merge into a lake table costs 20–50 ms even from an empty stage,
 * and most batches stage a few tables.
 */
async function tablesWithWork(connection: DuckDBConnection): Promise<StagedTable[]> {
  const reader = await connection.runAndReadAll(
    "SELECT DISTINCT staged FROM staged_rows UNION SELECT 'failed_calls' WHERE EXISTS (SELECT 1 FROM raw_run WHERE failed_calls IS NOT NULL)",
  );
  const staged = new Set(reader.getRows().map((row) => String(row[0])));
  return STAGED_TABLES.filter((table) => staged.has(table));
}

/**
 * Merges what normalize staged into the warehouse tables and records the batch's landings, in one
 * transaction; returns the rows loaded. `beforeCommit` runs inside the transaction, just before
 * COMMIT (the loader records there how far it read each segment); when anything fails, the transaction is rolled back and nothing of the batch is loaded.
 */
export async function merge(connection: DuckDBConnection, staged: boolean, inlines: boolean, steps: StepTimes, beforeCommit: () => void | Promise<void>): Promise<number> {
  // A batch of answers all loaded before (a load killed before it recorded its segments' progress) stages nothing.
  if (!staged) return steps.time('transaction', () => inTransaction(connection, async () => (await beforeCommit(), 0)));
  const tables = await steps.time('tables with work', () => tablesWithWork(connection));
  let rows = 0;
  await steps.time('transaction', () =>
    inTransaction(connection, async () => {
      await steps.time('merge', () => mergeTables(connection, tables, inlines, steps));
      await steps.time('record landings', async () => {
        await connection.run('CREATE OR REPLACE TEMP TABLE landing_rows AS SELECT * FROM stage_loaded_landings');
        await connection.run('INSERT INTO loaded_landings SELECT landing, run_id, rows, now() FROM landing_rows');
        await connection.run('INSERT INTO raw_answers SELECT *, now() FROM stage_raw_answers');
        await insertMediaFiles(connection);
        rows = await scalarOf(connection, 'SELECT coalesce(sum(rows), 0) FROM landing_rows');
      });
      await beforeCommit();
    }),
  );
  return rows;
}

/**
 * The batch's media files the lake lacks, once per hash. Asked only of a batch with media: a
 * statement on a lake table costs milliseconds even when it has nothing to do.
 */
async function insertMediaFiles(connection: DuckDBConnection): Promise<void> {
  if ((await scalarOf(connection, 'SELECT count(*) FROM raw_media')) === 0) return;
  await connection.run(`INSERT INTO media_files
    SELECT sha256, mime_type, octet_length(content) AS bytes, content, run_id, now() AS loaded_at
    FROM (SELECT * FROM raw_media QUALIFY row_number() OVER (PARTITION BY sha256 ORDER BY _landing) = 1) AS batch
    ANTI JOIN media_files USING (sha256)`);
}

/**
 * Merges what normalize staged into the warehouse tables, within the caller's transaction, and
 * checks that latest state kept one row per key. A rebuild (rebuild.ts) merges so, without the
 * load's records, which it keeps.
 */
export async function mergeStaged(connection: DuckDBConnection, inlines: boolean): Promise<void> {
  await mergeTables(connection, await tablesWithWork(connection), inlines, new StepTimes());
}

async function mergeTables(connection: DuckDBConnection, tables: StagedTable[], inlines: boolean, steps: StepTimes): Promise<void> {
  for (const table of tables) {
    const statements = MERGES[table];
    for (const statement of typeof statements === 'function' ? statements(inlines) : statements) await connection.run(statement);
  }
  await steps.time('one row per key', async () => {
    for (const table of tables) if (isLatestState(table)) await assertOnePerKey(connection, table, mergeSource(table));
  });
}
