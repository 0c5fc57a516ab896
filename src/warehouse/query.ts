import { existsSync } from 'node:fs';
import { closeDatabase, openDatabase } from './duckdb.js';
import { warehousePath } from './loader.js';

export interface QueryResult {
  columns: string[];
  rows: Record<string, unknown>[];
}

/** Runs SQL against the published warehouse, opened read-only: a query can never change it. */
export async function queryWarehouse(dataDir: string, sql: string): Promise<QueryResult> {
  const path = warehousePath(dataDir);
  if (!existsSync(path)) throw new Error(`no warehouse at ${path} yet: run a harvest (or a load) first`);
  const db = await openDatabase(path, { readOnly: true });
  try {
    const reader = await db.connection.runAndReadAll(sql);
    return { columns: reader.columnNames(), rows: reader.getRowObjectsJson() as Record<string, unknown>[] };
  } finally {
    closeDatabase(db);
  }
}
