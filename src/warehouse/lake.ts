/**
 * The warehouse is a DuckLake lakehouse: Parquet data files under `lake/data/`, and a catalog
 * (SQLite, `lake/catalog.sqlite`) that records which files make each table at each snapshot. Every
 * load commits one snapshot, so a reader never waits on the loader and never reads half a load:
 * each of its queries reads the latest snapshot committed when it starts, on a connection that stays
 * open, and nothing is ever copied.
 *
 * DuckDB cannot download extensions at run time here, so the ducklake and sqlite extensions are
 * loaded by path from .tools/duckdb-extensions, where `npm run setup` put them.
 */
import { existsSync, mkdirSync, renameSync, rmSync } from 'node:fs';
import { dirname } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api';
import { lakeCatalogFile, lakeDataFolder, lakeDataPath, loaderDatabasePath, loaderFolder, loaderSpillFolder } from '../store/layout.js';
import { outageOf } from '../store/outage.js';
import { objectStorageSettings, redactedUrl, storageRootUrl, type ObjectStorageSettings } from '../store/shared/shared-settings.js';
import { syncDirectory } from '../store/durable-file.js';
import { DUCKDB_CONFIG, closeDatabase, openDatabase, scalarOf, sqlString, tableNames, withDefaultDatabase } from './duckdb.js';
import { extensionLoadStatements, extensionSettings, extensionsLoaded } from './extension-files.js';
import { syncingLakeWrites, type LakeSyncTotals } from './lake-sync.js';
import { DamagedLakeError, damagedLakeFiles, damagedSharedLakeFiles, type DamagedLakeFile } from './lake-health.js';

/** The name the lake is attached under; the readers' and the loader's default database. */
export const LAKE = 'lake';

/**
 * Where a data directory's lake is: its catalog (what DuckLake's ATTACH names), its data files,
 * the extensions that reach them, and the statements that give DuckDB the object store's
 * credentials (never printed) and its settings for reading there. In the data directory by default (a SQLite catalog); with shared
 * storage (HARVESTER_STORAGE=s3://…, HARVESTER_CATALOG=postgres://…), a PostgreSQL catalog and
 * data files in the object store, the same lake for every machine.
 */
export interface LakeLocation {
  catalog: string;
  /** The data files' folder, ending in `/`. */
  dataPath: string;
  extensions: readonly string[];
  credentials: readonly string[];
  shared: boolean;
  /** A shared lake's object store (its data files' bucket and prefix), for the health check. */
  objects?: ObjectStorageSettings;
  /** What a message may show of it: no password, no key. */
  description: string;
  /** Replaces every secret of the location in a message by `***`. */
  redact(message: string): string;
}

export function lakeLocation(dataDir: string, env: NodeJS.ProcessEnv = process.env): LakeLocation {
  const storage = env.HARVESTER_STORAGE;
  const catalogUrl = env.HARVESTER_CATALOG;
  if (!storage?.startsWith('s3://') || !catalogUrl) {
    return {
      catalog: `ducklake:sqlite:${lakeCatalogFile(dataDir)}`,
      dataPath: lakeDataPath(dataDir),
      extensions: ['ducklake', 'sqlite_scanner'],
      credentials: [],
      shared: false,
      description: lakeCatalogFile(dataDir),
      redact: (message) => message,
    };
  }
  const settings = objectStorageSettings(storage, env);
  const secrets = [settings.secretAccessKey, new URL(catalogUrl).password].filter((secret): secret is string => Boolean(secret));
  const endpoint = settings.endpoint ? new URL(settings.endpoint) : undefined;
  const options = [
    'TYPE S3',
    `REGION ${sqlString(settings.region)}`,
    ...(settings.accessKeyId ? [`KEY_ID ${sqlString(settings.accessKeyId)}`] : []),
    ...(settings.secretAccessKey ? [`SECRET ${sqlString(settings.secretAccessKey)}`] : []),
    ...(endpoint ? [`ENDPOINT ${sqlString(endpoint.host)}`, "URL_STYLE 'path'", `USE_SSL ${endpoint.protocol === 'https:'}`] : []),
  ];
  const dataPath = lakeDataPath(storageRootUrl(settings));
  return {
    catalog: `ducklake:postgres:${catalogUrl}`,
    dataPath,
    extensions: ['ducklake', 'postgres_scanner', 'httpfs'],
    credentials: [
      `CREATE OR REPLACE SECRET harvester_storage (${options.join(', ')})`,
      // DuckDB 1.5.5 refused the Parquet files it had written to MinIO, reading them back for a merge
      // with prefetching on ("incorrectly set page offsets", test/store/shared-store.test.ts); its
      // error names this setting, and with it the same reads succeed.
      'SET disable_parquet_prefetching = true',
    ],
    shared: true,
    objects: settings,
    description: `the DuckLake in ${redactedUrl(catalogUrl)} with data in ${dataPath}`,
    redact: (message) => secrets.reduce((text, secret) => text.split(secret).join('***'), message),
  };
}

/**
 * How a connection uses the lake:
 * - `write`: the loader, which alone creates tables and commits snapshots;
 * - `read`: the program's own readers, read-only;
 * - `sandboxed`: a user's SQL, read-only, with no file but the lake's data files readable and every
 *   setting locked (see src/warehouse/query.ts).
 */
export type LakeAccess = 'write' | 'read' | 'sandboxed';

/**
 * Whether the data directory's lake has been made (with its tables: see createLake). A shared
 * lake's catalog is asked; a lake in the data directory is its catalog file.
 */
export async function lakeExists(dataDir: string): Promise<boolean> {
  const location = lakeLocation(dataDir);
  if (!location.shared) return existsSync(lakeCatalogFile(dataDir));
  const db = await openDatabase(':memory:', { settings: extensionSettings(location.extensions) });
  try {
    // Whether it is there, not whether its files are whole: the open that follows checks them.
    await attachLake(db.connection, dataDir, 'read', undefined, undefined, false);
    return (await tableNames(db.connection, LAKE)).has('loaded_landings');
  } catch (error) {
    // A catalog or object store that does not answer is no missing warehouse: said as what it is.
    const outage = outageOf(error);
    if (outage) throw new Error(`the warehouse's ${outage.service} does not answer (${location.description}): ${outage.message}`, { cause: error });
    return false;
  } finally {
    closeDatabase(db);
  }
}

/** The statements that load the lake's extensions by path (extension-files.ts), for any DuckDB client of the same version. */
export function extensionLoads(location: LakeLocation = lakeLocation('')): string[] {
  return extensionLoadStatements(location.extensions);
}

/**
 * Rows a writer of a lake in the data directory keeps in the catalog instead of a Parquet file, per
 * table and insert (DuckLake's data inlining): a load that adds fewer rows to a table than this
 * writes no file for it, so it needs no fsync of a file and its folder (lake-sync.ts); its rows are
 * durable with the catalog's commit, which SQLite syncs, like the rest of the commit. The
 * maintenance writes them out to Parquet (`ducklake_flush_inlined_data`). 1,000 keeps a daily run's
 * small tables in the catalog and its large ones (the raw answers of a big run) in files.
 * HARVESTER_LAKE_INLINE_ROWS sets another (0: every insert writes a file). A shared lake writes
 * files: its objects cost no fsync, and its PostgreSQL catalog is shared by every machine.
 */
export function inliningRowLimit(env: NodeJS.ProcessEnv = process.env): number {
  const text = env.HARVESTER_LAKE_INLINE_ROWS;
  if (text === undefined || text === '') return DEFAULT_INLINING_ROW_LIMIT;
  const rows = Number(text);
  if (!Number.isInteger(rows) || rows < 0) throw new Error(`HARVESTER_LAKE_INLINE_ROWS must be a whole number of rows, 0 or more; it is ${JSON.stringify(text)}`);
  return rows;
}
const DEFAULT_INLINING_ROW_LIMIT = 1000;

/** Whether the writer of a data directory's lake keeps small writes in the catalog (inliningRowLimit); a shared lake never does. */
export function lakeInlines(dataDir: string): boolean {
  return !lakeLocation(dataDir).shared && inliningRowLimit() > 0;
}

/**
 * The ATTACH statement of a data directory's lake, as `LAKE`. The catalog records the data folder's
 * absolute path when the lake is made; the folder is named again, and overrides it, so a data
 * directory that was moved or copied elsewhere (files are recorded relative to it) still reads.
 */
function lakeAttach(location: LakeLocation, readOnly: boolean, snapshot?: number, catalog = location.catalog): string {
  const options = [
    `DATA_PATH ${sqlString(location.dataPath)}`,
    'OVERRIDE_DATA_PATH true',
    ...(readOnly ? ['READ_ONLY'] : []),
    ...(!readOnly && !location.shared ? [`DATA_INLINING_ROW_LIMIT ${inliningRowLimit()}`] : []),
    ...(snapshot === undefined ? [] : [`SNAPSHOT_VERSION ${Math.trunc(snapshot)}`]),
  ];
  return `ATTACH ${sqlString(catalog)} AS ${LAKE} (${options.join(', ')})`;
}

/**
 * What any DuckDB client of the same version (the DuckDB CLI, Python's duckdb) runs to read the
 * lake: one line of SQL, as the demo prints it.
 */
export function readerSql(dataDir: string): string {
  const location = lakeLocation(dataDir);
  return location.redact([...extensionLoads(location), ...location.credentials, lakeAttach(location, true), `USE ${LAKE}`].join('; '));
}

/**
 * Attaches the data directory's lake to `connection` as its default database, and checks that the
 * files its latest snapshot reads are whole (lake-health.ts; a lake in the data directory): a reader
 * of a damaged lake is refused with a DamagedLakeError naming each file and table, before any query
 * meets them; a writer is told which (to repair them, lake-repair.ts). Returns those files.
 */
async function attachLake(connection: DuckDBConnection, dataDir: string, access: LakeAccess, snapshot?: number, readTimeoutSeconds?: number, checkFiles = true): Promise<DamagedLakeFile[]> {
  const location = lakeLocation(dataDir);
  await prepareFor(connection, location);
  if (location.shared && readTimeoutSeconds !== undefined) {
    // DuckDB's HTTP client does not hear an interrupt: a read of an object store that does not
    // answer ends only at its own timeout (30 s, tried 4 times by default), and the process cannot
    // exit before. A reader with a time limit reads within it, once.
    await connection.run(`SET http_timeout = ${Math.max(1, Math.ceil(readTimeoutSeconds))}`);
    await connection.run('SET http_retries = 0');
  }
  try {
    await connection.run(lakeAttach(location, access !== 'write', snapshot));
  } catch (error) {
    throw new Error(`cannot attach ${location.description}: ${location.redact((error as Error).message)}`);
  }
  await connection.run(`USE ${LAKE}`);
  const damaged = checkFiles ? await damagedOnAttach(connection, location, snapshot, readTimeoutSeconds) : [];
  if (damaged.length > 0 && access !== 'write') throw new DamagedLakeError(damaged);
  if (access === 'sandboxed') {
    // Settings that only tighten, in this order: the lake's data files stay readable (DuckLake reads
    // them through DuckDB's file system), then every other file is switched off, then the settings lock.
    await connection.run(`SET allowed_directories = [${sqlString(location.dataPath)}]`);
    await connection.run('SET enable_external_access = false');
    await connection.run('SET autoload_known_extensions = false');
    await connection.run('SET lock_configuration = true');
  }
  return damaged;
}

/**
 * The referenced files of the latest snapshot that are not whole (lake-health.ts): the data
 * directory's, or a shared lake's objects. A reader of an older snapshot (time travel, an export)
 * reads older files: the latest's are not its concern. A reader bound in time (readTimeoutSeconds:
 * a shared lake's object store may not answer) does not list the store first: its query's own read
 * of a missing object fails, naming it, within its time.
 */
async function damagedOnAttach(connection: DuckDBConnection, location: LakeLocation, snapshot: number | undefined, readTimeoutSeconds: number | undefined): Promise<DamagedLakeFile[]> {
  if (snapshot !== undefined) return [];
  if (!location.shared) return damagedLakeFiles(connection, location.dataPath);
  if (!location.objects || readTimeoutSeconds !== undefined) return [];
  try {
    return await damagedSharedLakeFiles(connection, location.dataPath, location.objects);
  } catch (error) {
    throw new Error(`cannot check the lake's files in ${location.dataPath}: ${location.redact((error as Error).message)}`, { cause: error });
  }
}

/** Loads the location's extensions and gives DuckDB its credentials, before its ATTACH. */
async function prepareFor(connection: DuckDBConnection, location: LakeLocation): Promise<void> {
  for (const statement of extensionLoads(location)) await connection.run(statement);
  await extensionsLoaded(connection, location.extensions);
  for (const statement of location.credentials) {
    try {
      await connection.run(statement);
    } catch (error) {
      throw new Error(`cannot give DuckDB the object store's credentials: ${location.redact((error as Error).message)}`);
    }
  }
}

/** A connection with the lake attached as its default database, and how to let go of it. */
export interface LakeConnection {
  connection: DuckDBConnection;
  /**
   * The connection's own database (the engine's memory, or the loader's file), whose default the
   * lake replaced: statements that name only temporary tables bind there in half the time, since
   * a name looked up from the lake is first looked for in the lake's catalog.
   */
  home: string;
  /** Whether this open made the lake (given its schema by `create`): nothing else can have changed it yet. */
  created: boolean;
  /**
   * A writer of a lake in the data directory: what its commits synced so far (lake-sync.ts, which
   * syncs each transaction's new data and delete files before its COMMIT). Undefined for readers
   * and for a shared lake, whose object store acknowledges each file before the commit.
   */
  synced?: LakeSyncTotals;
  /** A writer's: the files of the latest snapshot that were not whole when it attached (lake-health.ts). */
  damaged: DamagedLakeFile[];
  close(): Promise<void>;
}

/** An engine's own database, in memory, and the name it attaches the loader's file under (for its lock). */
const ENGINE_DATABASE = 'memory';
const LOADER = 'loader';

/** The writer's memory: DuckDB's own limit, so a batch spills rather than grows the process past it. */
const WRITER_MEMORY_LIMIT = '1GB';

// One thread (~40 small statements a load: slower on two beside a busy worker), and what a load freed given back
// past 4 MB, not DuckDB's 128 MB (50–70 MB off the peak, no slower): bench/RESULTS.md, 2026-11-28 20:00Z, 21:54Z.
const LOAD_PROCESS_SETTINGS = { threads: '1', allocator_flush_threshold: '4MB', allocator_bulk_deallocation_flush_threshold: '4MB' };

/**
 * A DuckDB for writing lakes, with the lake's extensions loaded: a process that loads again and
 * again (src/warehouse/load-process.ts) makes it once, before its first load, which keeps the
 * ~0.1 s of loading them off every run's final load.
 */
export async function createLakeEngine(): Promise<DuckDBInstance> {
  const location = lakeLocation('');
  const instance = await DuckDBInstance.create(':memory:', { ...DUCKDB_CONFIG, memory_limit: WRITER_MEMORY_LIMIT, ...LOAD_PROCESS_SETTINGS, ...extensionSettings(location.extensions) });
  const connection = await instance.connect();
  try {
    for (const statement of extensionLoads(location)) await connection.run(statement);
    await extensionsLoaded(connection, location.extensions);
  } finally {
    connection.closeSync();
  }
  return instance;
}

/**
 * A connection to the lake, its default database. A reader's is an in-memory DuckDB with the lake
 * attached read-only, at its latest snapshot or at `snapshot` (time travel: the tables as that
 * load left them). The writer's stages its batches in the loader's own database file, whose
 * DuckDB file lock a second writer of the data directory fails to take ("Could not set lock"); on
 * an `engine` (createLakeEngine), a connection of its own, which attaches that file for the lock
 * and drops the batch's temporary tables when it closes.
 */
export async function openLake(
  dataDir: string,
  access: LakeAccess,
  {
    engine,
    snapshot,
    create,
    readTimeoutSeconds,
    madeIsEnough,
  }: {
    engine?: DuckDBInstance | undefined;
    snapshot?: number | undefined;
    create?: LakeCreation | undefined;
    readTimeoutSeconds?: number | undefined;
    /** A writer that only wants the lake made: one it makes is not attached again (`lake` is then not attached). */
    madeIsEnough?: boolean | undefined;
  } = {},
): Promise<LakeConnection> {
  const location = lakeLocation(dataDir);
  if (access === 'write') {
    mkdirSync(loaderFolder(dataDir), { recursive: true });
    if (!location.shared) mkdirSync(lakeDataFolder(dataDir), { recursive: true });
  } else if (!(await lakeExists(dataDir))) {
    throw new Error(`no warehouse at ${location.description} yet: run a harvest (or a load) first`);
  }
  let lake: Omit<LakeConnection, 'home' | 'created' | 'damaged'>;
  if (access === 'write' && engine) {
    const connection = await engine.connect();
    lake = {
      connection,
      close: async () => {
        try {
          await detachFromEngine(connection);
        } finally {
          connection.closeSync();
        }
      },
    };
  } else {
    const settings = extensionSettings(location.extensions);
    const db = access === 'write' ? await openDatabase(loaderDatabasePath(dataDir), { memoryLimit: WRITER_MEMORY_LIMIT, settings }) : await openDatabase(':memory:', { settings });
    lake = { connection: db.connection, close: async () => closeDatabase(db) };
  }
  try {
    if (access === 'write' && engine) {
      // What an earlier writer of the engine could not let go of (detachFromEngine) goes first.
      await detachFromEngine(lake.connection);
      await lake.connection.run(`ATTACH ${sqlString(loaderDatabasePath(dataDir))} AS ${LOADER}`);
      // A batch's staged tables spill here when they outgrow the memory limit, not into the working directory.
      await lake.connection.run(`SET temp_directory = ${sqlString(loaderSpillFolder(dataDir))}`);
    }
    const home = String((await lake.connection.runAndReadAll('SELECT current_database()')).getRows()[0]?.[0]);
    // A shared lake is made by the writer's first schema transaction: its readers know it by its tables.
    const created = access === 'write' && create !== undefined && !location.shared && !existsSync(lakeCatalogFile(dataDir));
    if (created) await createLake(lake.connection, home, location, create);
    // Attaching the lake just made costs ~50 ms (its catalog read again, and checked for damage,
    // which it cannot have yet): worth it only to a writer that goes on to write.
    if (created && madeIsEnough) return { ...lake, home, created, damaged: [] };
    const damaged = await attachLake(lake.connection, dataDir, access, snapshot, readTimeoutSeconds);
    if (access !== 'write' || location.shared) return { ...lake, home, created, damaged };
    const synced: LakeSyncTotals = { commits: 0, files: 0, folders: 0, catalogSyncs: 0, ms: 0, commitMs: 0 };
    return { ...lake, connection: syncingLakeWrites(lake.connection, dataDir, synced), synced, home, created, damaged };
  } catch (error) {
    await lake.close();
    throw error;
  }
}

/**
 * Lets go of what a writer attached to the engine. Attachments belong to the engine, not the
 * connection: detached, the loader's file is unlocked for the next writer, and the engine is ready
 * for the next load. Each step is tried whatever the one before did: a transaction left open by a
 * failed statement made `USE` throw, which left the loader's file attached, and every later writer
 * of the process failed on it ("Unique file handle conflict"). Throws the first failure once all
 * were tried, and what is still attached is detached by the next writer (openLake) before it attaches.
 */
async function detachFromEngine(connection: DuckDBConnection): Promise<void> {
  const failures: unknown[] = [];
  const attempt = async (statement: string) => {
    try {
      await connection.run(statement);
    } catch (error) {
      failures.push(error);
    }
  };
  // Nothing to roll back is the usual case: its "no transaction is active" is not a failure.
  await connection.run('ROLLBACK').catch(() => undefined);
  await attempt(`USE ${ENGINE_DATABASE}`);
  for (const name of [LAKE, LOADER]) await attempt(`DETACH DATABASE IF EXISTS ${name}`);
  if (failures.length > 0) throw failures[0];
}

/** What a new lake is given before anyone can see it: its tables and views. */
export type LakeCreation = (connection: DuckDBConnection) => Promise<unknown>;

/**
 * Makes a new lake under a name no reader opens, gives it its schema, and only then renames its
 * catalog into place: a reader that finds the catalog finds the tables too (a reader that asked
 * between the catalog's creation and its first tables was told "Table items does not exist").
 * Called by the writer alone, holding the writers' lock.
 */
async function createLake(connection: DuckDBConnection, home: string, location: LakeLocation, create: LakeCreation): Promise<void> {
  const catalog = location.description;
  const draft = `${catalog}.new`;
  // A draft left by a writer that was killed while making it is unfinished: it starts again.
  rmSync(draft, { force: true });
  await prepareFor(connection, location);
  await connection.run(lakeAttach(location, false, undefined, `ducklake:sqlite:${draft}`));
  try {
    await withDefaultDatabase(connection, LAKE, home, () => create(connection));
  } finally {
    await connection.run(`DETACH ${LAKE}`);
  }
  // The catalog's name, and the data folder's (made by openLake), into the lake's folder, and that
  // folder's into the data directory's, before any load can commit to it. SQLite synced the file.
  renameSync(draft, catalog);
  syncDirectory(dirname(catalog));
  syncDirectory(dirname(dirname(catalog)));
}

/**
 * The lake's one writer (the loader, or maintenance). DuckDB's file lock on the loader's database
 * keeps writers apart: a second one waits here until the first closes, up to `waitMs`, and one
 * that was killed holds no lock (the OS drops it).
 */
export async function openLakeWriter(
  dataDir: string,
  waitMs: number,
  { engine, create, madeIsEnough }: { engine?: DuckDBInstance | undefined; create?: LakeCreation; madeIsEnough?: boolean } = {},
): Promise<LakeConnection> {
  const deadline = Date.now() + waitMs;
  for (;;) {
    try {
      return await openLake(dataDir, 'write', { engine, create, madeIsEnough });
    } catch (error) {
      if (!/lock/i.test((error as Error).message) || Date.now() > deadline) throw error;
      await sleep(100);
    }
  }
}

/** The lake's latest snapshot: the one each new query reads. */
export async function latestSnapshot(connection: DuckDBConnection): Promise<number> {
  return scalarOf(connection, `SELECT max(snapshot_id) FROM ducklake_snapshots(${sqlString(LAKE)})`);
}
