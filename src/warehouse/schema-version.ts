/**
 * The lake's schema version: this version's tables and views, and the mark that says a lake has
 * them. Apart from the loader so that whatever brings a lake to this schema (a load, a rebuild, the
 * repair of a damaged lake) imports it without importing the loader.
 */
import { createHash } from 'node:crypto';
import type { DuckDBConnection } from '@duckdb/node-api';
import { inTransaction, scalarOf, sqlString } from './duckdb.js';
import { LAKE } from './lake.js';
import { NEVER_INLINED, TABLES_DDL, VIEWS_DDL } from './schema.js';

/** The tables that never inline, by a table option DuckLake keeps in the catalog (it wins over the writer's ATTACH limit). */
const TABLE_OPTIONS = NEVER_INLINED.map((table) => `CALL ${LAKE}.set_option('data_inlining_row_limit', 0, table_name => ${sqlString(table)})`);
const SCHEMA_DDL = [...TABLES_DDL, ...VIEWS_DDL];
/**
 * This version's schema, by its statements: the comment on `loaded_landings` names the one the lake
 * has. The repairs a lake of an older version needs are part of it: a lake whose loads could leave
 * duplicate keys gets a new mark, and so is repaired by its first load after the upgrade.
 */
const SCHEMA_REPAIRS = ['one row per key of latest-state tables (DuckLake MERGE at 2,048 rows)', 'a stats row for every table (DuckLake plans an empty table at ~4 ms a column)'];
const SCHEMA_MARK = `social-harvester schema ${createHash('sha256').update([...SCHEMA_DDL, ...TABLE_OPTIONS, ...SCHEMA_REPAIRS].join(';\n')).digest('hex').slice(0, 16)}`;

/**
 * Brings the lake's tables and views to this version's schema, in two snapshots, unless it has them:
 * every statement is a change of the catalog that commits a snapshot of its own, even a view
 * replaced by the same view, and a load made ~30 such snapshots before its data (about 0.8 s).
 */
export async function ensureSchema(connection: DuckDBConnection): Promise<boolean> {
  const marked = await connection.runAndReadAll(`SELECT comment FROM duckdb_tables() WHERE database_name = ${sqlString(LAKE)} AND table_name = 'loaded_landings'`);
  if (marked.getRows()[0]?.[0] === SCHEMA_MARK) return false;
  const existing = await tablesWithStats(connection);
  await inTransaction(connection, async () => {
    for (const statement of SCHEMA_DDL) await connection.run(statement);
    await giveTablesStats(connection, existing);
  });
  // A table's options cannot be set in the transaction that made it (DuckLake: "transaction-local
  // tables"): they follow, with the mark, so a lake cut off between the two is made up to date again.
  await inTransaction(connection, async () => {
    for (const statement of TABLE_OPTIONS) await connection.run(statement);
    await connection.run(`COMMENT ON TABLE loaded_landings IS ${sqlString(SCHEMA_MARK)}`);
  });
  return true;
}

/** The catalog DuckLake keeps the lake's metadata in, as it attaches it. */
const META = `__ducklake_metadata_${LAKE}`;

/** The lake's tables, each with whether it has a row in DuckLake's table stats (none in a lake being made). */
async function tablesWithStats(connection: DuckDBConnection): Promise<Map<string, boolean>> {
  const tables = await connection.runAndReadAll(
    `SELECT t.table_name, t.table_id IN (SELECT table_id FROM ${META}.ducklake_table_stats) FROM ${META}.ducklake_table t WHERE t.end_snapshot IS NULL`,
  );
  return new Map(tables.getRows().map(([name, stats]) => [String(name), Boolean(stats)]));
}

/** A value of each type a NOT NULL column of the schema has, for the row giveTablesStats inserts and deletes. */
const NOT_NULL_VALUES: Record<string, string> = {
  BIGINT: '0',
  INTEGER: '0',
  BLOB: "''::BLOB",
  JSON: "'{}'",
  VARCHAR: "''",
  'VARCHAR[]': '[]',
  'TIMESTAMP WITH TIME ZONE': "'1970-01-01 00:00:00+00'",
};

/**
 * Gives every table of the lake without one (`existing` says which had one) a row in DuckLake's table stats, by inserting a
 * row and deleting it in the caller's transaction (the one that makes the tables: there it costs
 * nothing measurable, where a transaction of its own cost ~250 ms for 20 tables): nothing of the row
 * is kept, and the stats say 0 rows. Why: DuckLake 1.5.5 caches a table's stats but not their
 * absence (fixed upstream in duckdb/ducklake#1313), so each statement on a table that never held a
 * row asks the catalog for its stats once per column it names: 12 columns of an empty harvest_runs
 * cost 38 ms a SELECT and 56 ms an UPDATE, against 3 ms once it has stats. Most lakes keep some
 * tables empty for good (failed_calls, schema_drift, text_repairs), and a new lake has all of them
 * empty. A lake that writes every insert to a file (a shared one, or HARVESTER_LAKE_INLINE_ROWS=0)
 * gets no stats row this way (DuckLake drops the transaction's file unwritten): it plans as before.
 */
async function giveTablesStats(connection: DuckDBConnection, existing: ReadonlyMap<string, boolean>): Promise<void> {
  const columns = await connection.runAndReadAll(
    `SELECT c.table_name, c.column_name, c.data_type, c.is_nullable FROM duckdb_columns() c JOIN duckdb_tables() t USING (database_name, schema_name, table_name)
     WHERE c.database_name = ${sqlString(LAKE)} ORDER BY c.table_name, c.column_index`,
  );
  const rows = new Map<string, string[]>();
  for (const [table, column, type, nullable] of columns.getRows()) {
    const name = String(table);
    if (existing.get(name) === true) continue;
    const value = nullable ? 'NULL' : NOT_NULL_VALUES[String(type)];
    if (value === undefined) throw new Error(`schema-version.ts: no value for the NOT NULL column ${name}.${String(column)} of type ${String(type)}: add one to NOT_NULL_VALUES`);
    rows.set(name, [...(rows.get(name) ?? []), value]);
  }
  for (const [table, values] of rows) {
    // A table made before (an upgrade) is given the row only when it holds none: the DELETE below
    // empties the table, and no row of the user's may go with it.
    if (existing.has(table) && (await scalarOf(connection, `SELECT count(*) FROM ${table}`)) > 0) continue;
    await connection.run(`INSERT INTO ${table} VALUES (${values.join(', ')})`);
    await connection.run(`DELETE FROM ${table}`);
  }
}
