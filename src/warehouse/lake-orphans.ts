/**
 * Removing the lake's files that nothing names: a load or maintenance a crash cut short leaves the
 * Parquet files its transaction wrote, which no commit ever named. DuckLake's own
 * `ducklake_delete_orphaned_files` is not used: it deleted files the catalog still named
 * (duckdb/ducklake #815). Here a file is removed only when all of these hold:
 * - its name is a DuckLake file's (`ducklake-<uuid>….parquet`), under the lake's data folder;
 * - no row of the catalog names it, in any snapshot kept (`ducklake_data_file`, `ducklake_delete_file`,
 *   ended or not) nor among the files DuckLake has scheduled for deletion: names are compared by the
 *   file's own name, a UUID, so no path written another way (relative, moved lake) can make a named
 *   file look unnamed;
 * - it was last written more than `olderThanMs` ago (an hour by default): the caller is the lake's
 *   one writer, so no transaction is writing now, and the age keeps clear of any clock doubt.
 * Only a lake in the data directory: a shared lake's files are objects, left to DuckLake's cleanup.
 */
import { readdir, rm, stat } from 'node:fs/promises';
import { basename, join } from 'node:path';
import type { DuckDBConnection } from '@duckdb/node-api';
import { lakeDataFolder } from '../store/layout.js';
import { syncCatalogCommit } from './lake-sync.js';

const META = '__ducklake_metadata_lake';
const DUCKLAKE_FILE = /^ducklake-[0-9a-f-]{36}(-delete)?\.parquet$/;
export const ORPHAN_MIN_AGE_MS = 3_600_000;

/** The file names (UUIDs) every row of the catalog names, whatever their snapshots. */
async function namedFiles(connection: DuckDBConnection): Promise<Set<string>> {
  const reader = await connection.runAndReadAll(
    `SELECT path FROM ${META}.ducklake_data_file UNION ALL SELECT path FROM ${META}.ducklake_delete_file UNION ALL SELECT path FROM ${META}.ducklake_files_scheduled_for_deletion`,
  );
  return new Set(reader.getRows().map(([path]) => basename(String(path))));
}

/** Removes the lake's files no catalog row names (see the module's comment); returns their paths. */
export async function removeOrphanedLakeFiles(connection: DuckDBConnection, dataDir: string, { olderThanMs = ORPHAN_MIN_AGE_MS, nowMs = Date.now() } = {}): Promise<string[]> {
  const folder = lakeDataFolder(dataDir);
  let entries;
  try {
    entries = await readdir(folder, { recursive: true, withFileTypes: true });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw error;
  }
  const candidates = entries.filter((entry) => entry.isFile() && DUCKLAKE_FILE.test(entry.name)).map((entry) => join(entry.parentPath, entry.name));
  if (candidates.length === 0) return [];
  // Every commit that unnamed a file is on disk before the file goes (lake-sync.ts).
  await syncCatalogCommit(dataDir);
  // Read after the listing: a file named by a commit before the listing is in the catalog read here.
  const named = await namedFiles(connection);
  const removed: string[] = [];
  for (const path of candidates) {
    if (named.has(basename(path))) continue;
    const file = await stat(path).catch(() => undefined);
    if (!file || nowMs - file.mtimeMs < olderThanMs) continue;
    await rm(path, { force: true });
    removed.push(path);
  }
  return removed;
}
