import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api';

/**
 * Opening DuckDB the project's way: no extension is ever downloaded at run time (parquet, json
 * and icu are built into @duckdb/node-api; the lake's are loaded by path, lake.ts), so autoinstall is off.
 */
export const DUCKDB_CONFIG = { autoinstall_known_extensions: 'false', autoload_known_extensions: 'true' };

export async function openDatabase(
  path: string,
  options: { readOnly?: boolean; memoryLimit?: string; threads?: number; settings?: Record<string, string> } = {},
): Promise<{ instance: DuckDBInstance; connection: DuckDBConnection }> {
  const config: Record<string, string> = { ...DUCKDB_CONFIG, ...options.settings };
  if (options.readOnly) config.access_mode = 'READ_ONLY';
  if (options.memoryLimit) config.memory_limit = options.memoryLimit;
  if (options.threads) config.threads = String(options.threads);
  const instance = await DuckDBInstance.create(path, config);
  return { instance, connection: await instance.connect() };
}

export function closeDatabase(db: { instance: DuckDBInstance; connection: DuckDBConnection }): void {
  db.connection.closeSync();
  db.instance.closeSync();
}

/**
 * Runs `work` in one transaction: committed when it returns, rolled back when it throws (and the
 * error thrown on). In the lake, one transaction is one snapshot.
 */
export async function inTransaction<T>(connection: DuckDBConnection, work: () => Promise<T>): Promise<T> {
  await connection.run('BEGIN TRANSACTION');
  try {
    const result = await work();
    await connection.run('COMMIT');
    return result;
  } catch (error) {
    await connection.run('ROLLBACK');
    throw error;
  }
}

/** The first value of a query's first row, as a number (0 when there is none, or it is null). */
export async function scalarOf(connection: DuckDBConnection, sql: string): Promise<number> {
  return Number((await connection.runAndReadAll(sql)).getRows()[0]?.[0] ?? 0);
}

/** The names of the tables an attached database has. */
export async function tableNames(connection: DuckDBConnection, database: string): Promise<Set<string>> {
  const reader = await connection.runAndReadAll(`SELECT table_name FROM duckdb_tables() WHERE database_name = ${sqlString(database)}`);
  return new Set(reader.getRows().map((row) => String(row[0])));
}

/** A SQL string literal. */
export function sqlString(value: string): string {
  return `'${value.replaceAll("'", "''")}'`;
}

/** A SQL identifier (a table, column or database name), quoted. */
export function sqlIdentifier(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

/** Runs `work` with `database` as the connection's default, and then makes `after` the default. */
export async function withDefaultDatabase<T>(connection: DuckDBConnection, database: string, after: string, work: () => Promise<T>): Promise<T> {
  await connection.run(`USE ${sqlIdentifier(database)}`);
  try {
    return await work();
  } finally {
    await connection.run(`USE ${sqlIdentifier(after)}`);
  }
}
