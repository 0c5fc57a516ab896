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
    const refused = refusal(message);
    if (refused) throw new Error(`refused: ${refused}; queries read only the warehouse's tables (file access, extensions and settings are locked off)`, { cause: error });
    throw error;
  } finally {
    closeDatabase(db);
  }
}

/** What DuckDB refused the query, in the user's terms, from DuckDB's message; undefined for any other error. */
function refusal(message: string): string | undefined {
  const access = /Cannot access (file|directory) "([^"]*)" - file system operations are disabled/.exec(message);
  if (access) {
    const [, kind = '', path = ''] = access;
    // INSTALL reaches for DuckDB's extension folder, not for a file of the user's.
    if (/[/\\]\.duckdb[/\\]extensions/.test(path)) return 'the query would install an extension';
    return `the query would read or write the ${kind} ${path}`;
  }
  if (/Loading external extensions is disabled/.test(message)) return 'the query would load an extension';
  const setting = /Cannot change configuration option "([^"]*)" - the configuration has been locked/.exec(message)?.[1];
  if (setting !== undefined) return `the query would change the setting ${setting}`;
  return undefined;
}
