/**
 * The lake's schema version: this version's tables and views, and the mark that says a lake has
 * them. Apart from the loader so that whatever brings a lake to this schema (a load, a rebuild, the
 * repair of a damaged lake) imports it without importing the loader.
 */
import { createHash } from 'node:crypto';
import type { DuckDBConnection } from '@duckdb/node-api';
import { inTransaction, sqlString } from './duckdb.js';
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
const SCHEMA_REPAIRS = ['one row per key of latest-state tables (DuckLake MERGE at 2,048 rows)'];
const SCHEMA_MARK = `social-harvester schema ${createHash('sha256').update([...SCHEMA_DDL, ...TABLE_OPTIONS, ...SCHEMA_REPAIRS].join(';\n')).digest('hex').slice(0, 16)}`;

/**
 * Brings the lake's tables and views to this version's schema, in two snapshots, unless it has them:
 * every statement is a change of the catalog that commits a snapshot of its own, even a view
 * replaced by the same view, and a load made ~30 such snapshots before its data (about 0.8 s).
 */
export async function ensureSchema(connection: DuckDBConnection): Promise<boolean> {
  const marked = await connection.runAndReadAll(`SELECT comment FROM duckdb_tables() WHERE database_name = ${sqlString(LAKE)} AND table_name = 'loaded_landings'`);
  if (marked.getRows()[0]?.[0] === SCHEMA_MARK) return false;
  await inTransaction(connection, async () => {
    for (const statement of SCHEMA_DDL) await connection.run(statement);
  });
  // A table's options cannot be set in the transaction that made it (DuckLake: "transaction-local
  // tables"): they follow, with the mark, so a lake cut off between the two is made up to date again.
  await inTransaction(connection, async () => {
    for (const statement of TABLE_OPTIONS) await connection.run(statement);
    await connection.run(`COMMENT ON TABLE loaded_landings IS ${sqlString(SCHEMA_MARK)}`);
  });
  return true;
}
