/**
 * Keeping the lake small and quick to read. Every load writes a few Parquet files per table it
 * touches, so runs that load often leave many small files; and every snapshot keeps the files it
 * read, so nothing is ever freed. Maintenance moves rows DuckLake inlined in the catalog to Parquet,
 * rewrites the tables that MERGEs and deletes left in many partly deleted files (compactTables),
 * merges small files of a table into larger ones,
 * expires snapshots older than the time-travel window, and deletes the files that no snapshot has
 * read since the maintenance before.
 * It is the lake's writer while it runs (one at a time with loads); readers are never stopped.
 */
import type { DuckDBConnection, DuckDBInstance } from '@duckdb/node-api';
import { RETRYABLE_STATUSES } from '../harvest/checkpoint.js';
import { LocalStore, type Store } from '../store/store.js';
import { scalarOf, sqlString } from './duckdb.js';
import { LAKE, lakeLocation, latestSnapshot, openLakeWriter } from './lake.js';
import { keepLatestPerKey, type LatestStateTable } from './merge.js';
import { repairLake, type LakeRepair } from './lake-repair.js';
import { removeOrphanedLakeFiles } from './lake-orphans.js';

export interface MaintenanceOptions {
  /** Snapshots younger than this stay readable with `AT (VERSION => …)`; older ones expire. */
  keepSnapshotsHours?: number;
  /**
   * Raw answers (raw_answers) loaded more than this many days ago are deleted: a rebuild can then
   * re-derive only what is younger. Undefined (the default): every answer is kept.
   */
  keepRawAnswersDays?: number;
  /** How long to wait for a load that holds the lake. */
  lockWaitMs?: number;
  /** Whose lake writers it takes turns with: a shared store's, on every machine (the data directory's by default). */
  store?: Store;
  /**
   * The load process's engine (createLakeEngine), so maintenance writes through the same DuckDB
   * as its loads: a second DuckDB instance of the same process on the loader's file is not kept
   * out by the file lock (it is the process's), and met a load with "Unique file handle conflict".
   */
  engine?: DuckDBInstance;
}

export const DEFAULT_KEEP_SNAPSHOTS_HOURS = 7 * 24;

export interface MaintenanceResult {
  dataFilesBefore: number;
  dataFilesAfter: number;
  snapshotsBefore: number;
  snapshotsAfter: number;
  filesDeleted: number;
  /** Rows removed from latest-state tables that held more than one row for a key (keepLatestPerKey). */
  duplicatesRemoved: Record<LatestStateTable, number>;
  /** Tables rewritten into few files (compactTables), by name, with how many fragments each had. */
  compacted: Record<string, number>;
  /** Raw answers deleted for being older than `keepRawAnswersDays`. */
  rawAnswersExpired: number;
  /** Records of archived call journals (call_journal) deleted for being older than `keepRawAnswersDays`. */
  journalRecordsExpired: number;
  /** Runs over for good (neither running nor left for a retry) whose call journals were removed. */
  journalsRemoved: number;
  /** The snapshot readers read after maintenance. */
  snapshot: number;
  /** Files of the lake that were not whole, repaired first (lake-repair.ts), and what was lost. */
  repair?: LakeRepair | undefined;
  /** Files a crash left that no catalog row names, removed (lake-orphans.ts). */
  orphanedFilesRemoved?: string[];
  durationMs: number;
}

/** How often the runs' final loads maintain the lake by themselves. */
export const MAINTENANCE_INTERVAL_MS = 24 * 3_600_000;

/**
 * Maintains the lake if it was not maintained within MAINTENANCE_INTERVAL_MS: the scheduled step
 * after a run's final load. The mark is the store's, so machines sharing a store share it.
 */
export async function maintainIfDue(
  dataDir: string,
  nowMs = Date.now(),
  store: Store = new LocalStore(dataDir),
  engine?: DuckDBInstance,
): Promise<MaintenanceResult | undefined> {
  const maintainedRecently = (markMs: number | undefined) => markMs !== undefined && nowMs - markMs < MAINTENANCE_INTERVAL_MS;
  const lastMs = await store.lakeMaintainedAt();
  if (lastMs === undefined) {
    // Never maintained: a young lake has little to merge, so its first maintenance is a day away.
    await store.markLakeMaintained(nowMs);
    return undefined;
  }
  if (maintainedRecently(lastMs)) return undefined;
  return store.asLakeWriter(async () => {
    // Asked again as the writer: another machine may have maintained the lake while this one waited its turn.
    if (maintainedRecently(await store.lakeMaintainedAt())) return undefined;
    return maintainAsWriter(dataDir, store, engine ? { engine } : {}, nowMs);
  });
}

export async function maintainLake(dataDir: string, options: MaintenanceOptions = {}): Promise<MaintenanceResult> {
  const store = options.store ?? new LocalStore(dataDir);
  return store.asLakeWriter(() => maintainAsWriter(dataDir, store, options));
}

/** Maintains the lake as its writer, and marks it maintained in the store: at `atMs`, or when done. */
async function maintainAsWriter(dataDir: string, store: Store, options: MaintenanceOptions, atMs?: number): Promise<MaintenanceResult> {
  const started = Date.now();
  const keepHours = options.keepSnapshotsHours ?? DEFAULT_KEEP_SNAPSHOTS_HOURS;
  const db = await openLakeWriter(dataDir, options.lockWaitMs ?? 120_000, { engine: options.engine });
  const lake = sqlString(LAKE);
  // Data files of the latest snapshot: the ones a query reads.
  const dataFiles = () => scalarOf(db.connection, `SELECT coalesce(sum(file_count), 0) FROM ducklake_table_info(${lake})`);
  const snapshots = () => scalarOf(db.connection, `SELECT count(*) FROM ducklake_snapshots(${lake})`);
  try {
    const repair = await repairLake(db, dataDir);
    const dataFilesBefore = await dataFiles();
    const snapshotsBefore = await snapshots();
    const duplicatesRemoved = await keepLatestPerKey(db.connection);
    const days = options.keepRawAnswersDays;
    const rawAnswersExpired = days === undefined ? 0 : await deleteOlderThan(db.connection, 'raw_answers', 'loaded_at', days);
    // The journals' records the loads archived (call_journal) are raw records too, and go with the same retention.
    const journalRecordsExpired = days === undefined ? 0 : await deleteOlderThan(db.connection, 'call_journal', 'archived_at', days);
    // First the files that the last maintenance left unread, not this one's: a query that began on
    // an expired snapshot just before now may still be reading those. (The function's older_than
    // did not hold them back: it deleted files unread for a second as if an hour.)
    const deleted = await db.connection.runAndReadAll(`CALL ducklake_cleanup_old_files(${lake}, cleanup_all => true)`);
    const orphanedFilesRemoved = lakeLocation(dataDir).shared ? [] : await removeOrphanedLakeFiles(db.connection, dataDir);
    // Rows of small loads that DuckLake inlined into the catalog (accounts, account_metrics,
    // loaded_segments: a few rows a day each, and the deletes of items' MERGEs) go to Parquet files:
    // the catalog then holds only what was loaded since the last maintenance, not every day's rows.
    await db.connection.run(`CALL ducklake_flush_inlined_data(${lake})`);
    const compacted = await compactTables(db.connection);
    await db.connection.run(`CALL ducklake_merge_adjacent_files(${lake})`);
    await db.connection.run(`CALL ducklake_expire_snapshots(${lake}, older_than => now() - INTERVAL ${Math.max(0, keepHours)} HOUR)`);
    // The call journals of runs over for good are kept as long as the snapshots (a post-mortem
    // reads them beside the lake as it was), then removed: the data directory does not grow with history.
    const journalsRemoved = await journalsOfEndedRuns(db.connection, keepHours);
    await store.journals.removeRunJournals(journalsRemoved);
    await store.markLakeMaintained(atMs ?? Date.now());
    return {
      dataFilesBefore,
      dataFilesAfter: await dataFiles(),
      snapshotsBefore,
      snapshotsAfter: await snapshots(),
      filesDeleted: deleted.currentRowCount,
      duplicatesRemoved,
      compacted,
      rawAnswersExpired,
      journalRecordsExpired,
      journalsRemoved: journalsRemoved.length,
      snapshot: await latestSnapshot(db.connection),
      durationMs: Date.now() - started,
      repair,
      orphanedFilesRemoved,
    };
  } finally {
    await db.close();
  }
}

/** Runs over for good, neither running nor left for a retry, that finished more than `keepHours` ago. */
async function journalsOfEndedRuns(connection: DuckDBConnection, keepHours: number): Promise<string[]> {
  const kept = ['running', ...RETRYABLE_STATUSES].map(sqlString).join(', ');
  const reader = await connection.runAndReadAll(
    `SELECT run_id FROM harvest_runs WHERE status NOT IN (${kept}) AND coalesce(finished_at, started_at) < now() - INTERVAL ${Math.max(0, keepHours)} HOUR`,
  );
  return reader.getRows().map(([runId]) => String(runId));
}

/** Deletes a table's rows whose `column` is more than `days` days old; returns how many. */
async function deleteOlderThan(connection: DuckDBConnection, table: 'raw_answers' | 'call_journal', column: string, days: number): Promise<number> {
  const expired = `FROM ${table} WHERE ${column} < now() - INTERVAL ${Math.max(0, Math.floor(days))} DAY`;
  const rows = await scalarOf(connection, `SELECT count(*) ${expired}`);
  if (rows > 0) await connection.run(`DELETE ${expired}`);
  return rows;
}

/**
 * A table is rewritten once it holds more than this many fragments (data files smaller than the
 * lake's target file size, or carrying deletes). A day's MERGE adds one (its new and updated rows'
 * file; the deletes it leaves fall on files already counted; a flush of inlined rows may add one),
 * so with daily loads a latest-state table is rewritten every fourth or fifth day (a year of
 * bench/year-of-runs.mjs: items every 4th, accounts every 5th), and holds 1 to 5 small files beside
 * its full-size ones: its file count follows its size, not its age. Fewer would rewrite a table
 * nearly every day for a gain readers do not see (a query on 5 small files instead of 1); many more
 * (16 was tried) leave readers more files for more days.
 */
export const COMPACT_AFTER_FRAGMENTS = 5;
/** DuckLake's `target_file_size` when the lake sets none (DuckDB 1.5.5's ducklake): files at or above it are not merged. */
const DEFAULT_TARGET_FILE_BYTES = 512 * 1024 * 1024;

/**
 * Rewrites each table that holds more than COMPACT_AFTER_FRAGMENTS fragments into few files:
 * `ducklake_rewrite_data_files` with a delete threshold of 0 first writes every file carrying
 * deletes again without its deleted rows, then `ducklake_merge_adjacent_files` merges the table's
 * small files up to the target size. The tables loads rewrite are the latest-state ones (accounts,
 * items, comments), and also harvest_runs, transcripts, summaries (MERGEd), transcript_segments and
 * failed_calls (deleted and inserted again), call_journal and raw_answers (retention deletes);
 * append-only tables never pass the threshold (their small files are merged by the maintenance's
 * `ducklake_merge_adjacent_files`), so every table is looked at.
 * Why both calls: a MERGE that updates rows leaves a delete file on the file they were in, and
 * `ducklake_merge_adjacent_files` leaves every file with deletes as it is, so on its own it never
 * merged `items` (657 files for 1,928 rows after a year of daily runs, issue 44); and
 * `ducklake_rewrite_data_files` at its default threshold (0.95) rewrites only files nearly all
 * deleted, which a file of items re-observed for 30 days rarely is (100 MERGE loads: 93 files
 * after it and a merge, 1 at threshold 0).
 * Each call commits a snapshot of its own: readers keep reading the snapshot they began on, whose
 * files stay until the next maintenance's cleanup; loads wait, as for the rest of maintenance (the
 * caller is the lake's writer). Rows are moved, never changed: the table reads the same after.
 * The cost: each compaction writes again the table's files that carry deletes and its small ones;
 * a year of the daily tracking harvest leaves `items` a few thousand rows (milliseconds). A table
 * past the target file size would also have its full-size files with any deletes rewritten, at most
 * every fifth load (then a per-file delete share, from the catalog's delete counts, would be the
 * better threshold).
 * Returns the tables compacted, each with the fragments it had.
 */
export async function compactTables(connection: DuckDBConnection): Promise<Record<string, number>> {
  const lake = sqlString(LAKE);
  const targetBytes = await targetFileBytes(connection);
  const compacted: Record<string, number> = {};
  const tables = (await connection.runAndReadAll(`SELECT table_name FROM ducklake_table_info(${lake}) ORDER BY table_name`)).getRows().map(([name]) => String(name));
  for (const table of tables) {
    const fragments = await scalarOf(
      connection,
      `SELECT count(*) FROM ducklake_list_files(${lake}, ${sqlString(table)}) WHERE data_file_size_bytes < ${targetBytes} OR delete_file IS NOT NULL`,
    );
    if (fragments <= COMPACT_AFTER_FRAGMENTS) continue;
    await connection.run(`CALL ducklake_rewrite_data_files(${lake}, ${sqlString(table)}, delete_threshold => 0)`);
    await connection.run(`CALL ducklake_merge_adjacent_files(${lake}, ${sqlString(table)})`);
    compacted[table] = fragments;
  }
  return compacted;
}

/** The size DuckLake merges files up to: the lake's `target_file_size` option, or its default. */
async function targetFileBytes(connection: DuckDBConnection): Promise<number> {
  const reader = await connection.runAndReadAll(`SELECT value FROM ducklake_options(${sqlString(LAKE)}) WHERE option_name = 'target_file_size'`);
  const value = reader.getRows()[0]?.[0];
  const bytes = value === undefined || value === null ? NaN : Number(value);
  return Number.isFinite(bytes) && bytes > 0 ? bytes : DEFAULT_TARGET_FILE_BYTES;
}
