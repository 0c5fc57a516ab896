import { existsSync } from 'node:fs';
import { closeDatabase, openDatabase } from './duckdb.js';
import { warehousePath } from './loader.js';

export interface QueryResult {
  columns: string[];
  rows: Record<string, unknown>[];
}

/**
 * Runs SQL against the published warehouse, opened read-only and with every file system operation
 * switched off (and that setting locked): a query reads the warehouse's tables and nothing else.
 * It cannot write a file (COPY … TO, which could replace the warehouse itself), read one
 * (read_text, read_csv, ATTACH), or install an extension.
 */
export async function queryWarehouse(dataDir: string, sql: string): Promise<QueryResult> {
  const path = warehousePath(dataDir);
  if (!existsSync(path)) throw new Error(`no warehouse at ${path} yet: run a harvest (or a load) first`);
  const db = await openDatabase(path, { readOnly: true, sandboxed: true });
  try {
    const reader = await db.connection.runAndReadAll(sql);
    return { columns: reader.columnNames(), rows: reader.getRowObjectsJson() as Record<string, unknown>[] };
  } catch (error) {
    const message = (error as Error).message.split('\n')[0] ?? '';
    if (/disabled by configuration|configuration has been locked/.test(message)) throw new Error(`refused: queries read only the warehouse's tables (${message})`);
    throw error;
  } finally {
    closeDatabase(db);
  }
}
