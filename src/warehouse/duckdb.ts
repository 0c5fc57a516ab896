import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api';

/**
 * Opening DuckDB the project's way: no extension is ever downloaded at run time (parquet, json
 * and icu are built into @duckdb/node-api; the lake's are loaded by path, lake.ts), so autoinstall is off.
 */
export const DUCKDB_CONFIG = { autoinstall_known_extensions: 'false', autoload_known_extensions: 'true' };

export async function openDatabase(
  path: string,
  options: { readOnly?: boolean; memoryLimit?: string; threads?: number } = {},
): Promise<{ instance: DuckDBInstance; connection: DuckDBConnection }> {
  const config: Record<string, string> = { ...DUCKDB_CONFIG };
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

/** A SQL string literal. */
export function sqlString(value: string): string {
  return `'${value.replaceAll("'", "''")}'`;
}
