/**
 * Keeping the lake small and quick to read. Every load writes a few Parquet files per table it
 * touches, so runs that load often leave many small files; and every snapshot keeps the files it
 * read, so nothing is ever freed. Maintenance merges small files of a table into larger ones,
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
