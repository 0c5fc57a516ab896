/**
 * The lake's files reach the disk before the catalog names them. DuckDB 1.5.5 writes DuckLake's
 * Parquet data files and delete files and closes them without fsync (DuckDB PR #12371; duckdb/ducklake
 * #680), while the SQLite catalog that names them is synced at its commit: a power loss just after a
 * load left the catalog naming files of 0 bytes, and the lake did not open again.
 *
 * The mechanism, in this one place: the lake's writer connection (openLakeWriter, lake.ts) is wrapped
 * by `syncingLakeWrites`. Each of its transactions notes the names under `lake/data/` when it begins;
 * before its COMMIT goes to DuckDB, every file under `lake/data/` whose name is new since then is
 * fsynced, and then each folder that holds a new name (a new folder's parent too). A
 * statement outside an explicit transaction that may write to the lake (anything but a read, a
 * setting or an attachment) runs as a transaction of its own the same way. It rests on DuckLake
 * writing every data and delete file of a transaction during the transaction's statements, never
 * during COMMIT (seen with strace for INSERT, DELETE, UPDATE, MERGE and ducklake_merge_adjacent_files:
 * COMMIT writes only the catalog), and on one writer of the lake at a time (the writers' lock), so
 * a name new under `lake/data/` is this transaction's. Files are immutable once written (a new
 * version of a table's rows is a new file), so a name seen before was synced by the transaction
 * that wrote it.
 *
 * A commit of the catalog is made durable before anything relies on it having happened:
 * SQLite's rollback journal (the catalog's journal mode) commits by unlinking the journal without
 * syncing its folder (syncing it is SQLite's `synchronous = EXTRA`, which DuckLake does not set),
 * so a power loss right after COMMIT could find the journal again and roll the commit back. SQLite
 * fsyncs the catalog's folder when it makes the next commit's journal, so only the latest commit is
 * ever at risk; `syncCatalogCommit` fsyncs the folder for it, and is called before an earlier copy
 * of what a commit holds is removed (the loader, before a run's segments and journals go) and before
 * the lake's files that commits unnamed are deleted (DuckLake's cleanup, the orphans' removal).
 *
 * With shared storage (a PostgreSQL catalog, data files in the object store) nothing is synced here:
 * DuckDB writes each data file to the object store as an upload it completes when the file is closed,
 * during the statement that wrote it, so every PUT is acknowledged before the COMMIT that names it
 * (test/warehouse/lake-sync.test.ts checks it against MinIO), and PostgreSQL's commit is durable.
 */
import { open, readdir } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { DuckDBConnection } from '@duckdb/node-api';
import { lakeCatalogFile, lakeDataFolder } from '../store/layout.js';

/** What one sync before a commit did: the files and folders fsynced, and how long it took. */
export interface LakeSyncReport {
  files: number;
  folders: number;
  ms: number;
}

/** Statements that never write a lake file: reads, settings, attachments. Everything else is treated as a write. */
const READ_ONLY_STATEMENT = /^\s*(SELECT|WITH|FROM|VALUES|SET|RESET|USE|PRAGMA|DESCRIBE|SHOW|EXPLAIN|SUMMARIZE|ATTACH|DETACH|LOAD|INSTALL|CHECKPOINT|CREATE\s+(OR\s+REPLACE\s+)?TEMP(ORARY)?\s)/i;
const BEGIN = /^\s*(BEGIN|START\s+TRANSACTION)\b/i;
const COMMIT = /^\s*(COMMIT|END)\b/i;
const ROLLBACK = /^\s*(ROLLBACK|ABORT)\b/i;

/** Every path under `folder`, each with whether it is a folder; none when `folder` is not there. */
async function namesUnder(folder: string): Promise<Map<string, boolean>> {
  const names = new Map<string, boolean>();
  let entries;
  try {
    entries = await readdir(folder, { recursive: true, withFileTypes: true });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return names;
    throw error;
  }
  for (const entry of entries) names.set(join(entry.parentPath, entry.name), entry.isDirectory());
  return names;
}

async function fsyncPath(path: string): Promise<void> {
  const handle = await open(path, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/**
 * Fsyncs every file under the lake's data folder whose name is not in `before`, then each folder
 * holding a new name, file or folder (a new folder's name is a new name in its parent). Files
 * first, then folders: a name is synced only once what it names is. A new folder is not itself
 * fsynced unless a new name is in it: an empty one (DuckLake makes a table's folder when the table
 * is first written, and writes nothing there when its rows are inlined in the catalog) holds
 * nothing to sync, but its name is made durable in its parent now, so a later transaction's file in
 * it needs only its own folder synced. The data folder's own name is synced when the lake is made
 * (lake.ts, createLake). Returns the report and the names now under the folder (what the next
 * transaction starts from).
 */
export async function syncNewLakeFiles(dataDir: string, before: ReadonlySet<string>): Promise<LakeSyncReport & { now: Set<string> }> {
  const started = performance.now();
  const names = await namesUnder(lakeDataFolder(dataDir));
  const fresh = [...names].filter(([path]) => !before.has(path));
  const files = fresh.filter(([, isFolder]) => !isFolder).map(([path]) => path);
  const folders = new Set(fresh.map(([path]) => dirname(path)));
  // fs/promises' fsyncs run on libuv's thread pool, several at once: a batch's files take about the time of one.
  await Promise.all(files.map(fsyncPath));
  await Promise.all([...folders].map(fsyncPath));
  return { files: files.length, folders: folders.size, ms: performance.now() - started, now: new Set(names.keys()) };
}

/** The names under the lake's data folder now: what a transaction starts from. */
export async function lakeNamesNow(dataDir: string): Promise<Set<string>> {
  return new Set((await namesUnder(lakeDataFolder(dataDir))).keys());
}

/**
 * Makes the catalog's latest commit durable: fsyncs the catalog's folder, so the unlink of SQLite's
 * rollback journal, its commit, survives a power loss (see the module's comment). A shared lake's
 * catalog (PostgreSQL) commits durably by itself.
 */
export async function syncCatalogCommit(dataDir: string, shared = false): Promise<void> {
  if (!shared) await fsyncPath(dirname(lakeCatalogFile(dataDir)));
}

/** Statements that delete files earlier commits unnamed: the catalog's commits are made durable first. */
const DELETES_UNNAMED_FILES = /ducklake_(cleanup_old_files|delete_orphaned_files)/i;

/** Totals of what a writer connection synced, for the load's log and the measurements. */
export interface LakeSyncTotals {
  /** Commits whose new files were synced before them (each transaction of the writer). */
  commits: number;
  files: number;
  folders: number;
  /** Fsyncs of the catalog's folder before a cleanup deleted files (syncCatalogCommit). */
  catalogSyncs: number;
  ms: number;
  /** Time in the COMMIT statements themselves, after the sync: the catalog's commit (and rows inlined in it). */
  commitMs: number;
}

/**
 * The lake's writer connection, made to sync the lake's new files before each commit (see the
 * module's comment). Only `run` and `runAndReadAll` are watched, the two ways the warehouse writes;
 * every other method is the connection's own.
 */
export function syncingLakeWrites(connection: DuckDBConnection, dataDir: string, totals: LakeSyncTotals): DuckDBConnection {
  let before: Set<string> | undefined;
  // The names under the data folder as the last sync listed them: each was there and synced, or
  // written by a transaction that did not commit. The next transaction starts from them instead of a
  // listing of its own (one listing per transaction, not two). The writers' lock keeps every other
  // writer out while this connection is open, and DuckLake names each file by a new UUID, so a name
  // in this set is never a newer file; a file written outside a watched transaction is new to it,
  // and synced by the next commit. A rollback forgets it (its files were written, never synced).
  let known: Set<string> | undefined;
  const begin = async () => {
    before = known ?? (await lakeNamesNow(dataDir));
  };
  const sync = async () => {
    if (!before) return;
    const report = await syncNewLakeFiles(dataDir, before);
    known = report.now;
    totals.commits++;
    totals.files += report.files;
    totals.folders += report.folders;
    totals.ms += report.ms;
  };

  const statement = <T>(run: (sql: string) => Promise<T>) => async (sql: string, ...rest: unknown[]): Promise<T> => {
    const call = (text: string) => (run as (text: string, ...rest: unknown[]) => Promise<T>)(text, ...rest);
    if (BEGIN.test(sql)) {
      await begin();
      return call(sql);
    }
    if (COMMIT.test(sql)) {
      await sync();
      before = undefined;
      const started = performance.now();
      try {
        return await call(sql);
      } finally {
        totals.commitMs += performance.now() - started;
      }
    }
    if (ROLLBACK.test(sql)) {
      before = undefined;
      known = undefined;
      return call(sql);
    }
    if (DELETES_UNNAMED_FILES.test(sql)) {
      await syncCatalogCommit(dataDir);
      totals.catalogSyncs++;
    }
    if (before || READ_ONLY_STATEMENT.test(sql)) return call(sql);
    // A write outside a transaction: a transaction of its own, synced before its commit.
    await begin();
    await connection.run('BEGIN TRANSACTION');
    try {
      const result = await call(sql);
      await sync();
      await connection.run('COMMIT');
      return result;
    } catch (error) {
      known = undefined;
      await connection.run('ROLLBACK').catch(() => undefined);
      throw error;
    } finally {
      before = undefined;
    }
  };
  return new Proxy(connection, {
    get(target, property, receiver) {
      if (property === 'run') return statement(target.run.bind(target));
      if (property === 'runAndReadAll') return statement(target.runAndReadAll.bind(target));
      const value: unknown = Reflect.get(target, property, receiver);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}
