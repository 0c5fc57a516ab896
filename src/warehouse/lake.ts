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
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api';
import { TOOLS_DIR } from '../config/project-paths.js';
import { lakeCatalogFile, lakeDataFolder, loaderDatabasePath, loaderFolder, loaderSpillFolder } from '../store/layout.js';
import { DUCKDB_CONFIG, closeDatabase, openDatabase, scalarOf, sqlString } from './duckdb.js';

/** The name the lake is attached under; the readers' and the loader's default database. */
export const LAKE = 'lake';

/** Where `npm run setup` puts the DuckDB extensions, by the name DuckDB knows each by. */
const EXTENSIONS_DIR = join(TOOLS_DIR, 'duckdb-extensions');
const LAKE_EXTENSIONS = ['ducklake', 'sqlite_scanner'] as const;

/**
 * How a connection uses the lake:
 * - `write`: the loader, which alone creates tables and commits snapshots;
 * - `read`: the program's own readers, read-only;
 * - `sandboxed`: a user's SQL, read-only, with no file but the lake's data files readable and every
 *   setting locked (see src/warehouse/query.ts).
 */
export type LakeAccess = 'write' | 'read' | 'sandboxed';

export function lakeExists(dataDir: string): boolean {
  return existsSync(lakeCatalogFile(dataDir));
}

/** The statements that load the lake's extensions by path, for any DuckDB client of the same version (the tests' Python too). */
export function extensionLoads(): string[] {
  return LAKE_EXTENSIONS.map((name) => {
    const file = join(EXTENSIONS_DIR, `${name}.duckdb_extension`);
    if (!existsSync(file)) throw new Error(`no DuckDB extension ${name} at ${file}: run \`npm run setup\`, which installs it from PyPI's duckdb-extension wheels`);
    return `LOAD ${sqlString(file)}`;
  });
}

/**
 * The ATTACH statement of a data directory's lake, as `LAKE`. The catalog records the data folder's
 * absolute path when the lake is made; the folder is named again, and overrides it, so a data
 * directory that was moved or copied elsewhere (files are recorded relative to it) still reads.
 */
function lakeAttach(dataDir: string, readOnly: boolean, snapshot?: number, catalogFile = lakeCatalogFile(dataDir)): string {
  const options = [
    `DATA_PATH ${sqlString(`${lakeDataFolder(dataDir)}/`)}`,
    'OVERRIDE_DATA_PATH true',
    ...(readOnly ? ['READ_ONLY'] : []),
    ...(snapshot === undefined ? [] : [`SNAPSHOT_VERSION ${Math.trunc(snapshot)}`]),
  ];
  return `ATTACH ${sqlString(`ducklake:sqlite:${catalogFile}`)} AS ${LAKE} (${options.join(', ')})`;
}

/**
 * What any DuckDB client of the same version (the DuckDB CLI, Python's duckdb) runs to read the
 * lake: one line of SQL, as the demo prints it.
 */
export function readerSql(dataDir: string): string {
  return [...extensionLoads(), lakeAttach(dataDir, true), `USE ${LAKE}`].join('; ');
}

/** Attaches the data directory's lake to `connection` as its default database. */
async function attachLake(connection: DuckDBConnection, dataDir: string, access: LakeAccess, snapshot?: number): Promise<void> {
  for (const statement of extensionLoads()) await connection.run(statement);
  await connection.run(lakeAttach(dataDir, access !== 'write', snapshot));
  await connection.run(`USE ${LAKE}`);
  if (access === 'sandboxed') {
    // Settings that only tighten, in this order: the lake's data files stay readable (DuckLake reads
    // them through DuckDB's file system), then every other file is switched off, then the settings lock.
    await connection.run(`SET allowed_directories = [${sqlString(`${lakeDataFolder(dataDir)}/`)}]`);
    await connection.run('SET enable_external_access = false');
    await connection.run('SET autoload_known_extensions = false');
    await connection.run('SET lock_configuration = true');
  }
}

/** A connection with the lake attached as its default database, and how to let go of it. */
export interface LakeConnection {
  connection: DuckDBConnection;
  close(): Promise<void>;
}

/** An engine's own database, in memory, and the name it attaches the loader's file under (for its lock). */
const ENGINE_DATABASE = 'memory';
const LOADER = 'loader';

/** The writer's memory: DuckDB's own limit, so a batch spills rather than grows the process past it. */
const WRITER_MEMORY_LIMIT = '1GB';

/**
 * A DuckDB for writing lakes, with the lake's extensions loaded: a process that loads again and
 * again (src/warehouse/load-process.ts) makes it once, before its first load, which keeps the
 * ~0.1 s of loading them off every run's final load.
 */
export async function createLakeEngine(): Promise<DuckDBInstance> {
  const instance = await DuckDBInstance.create(':memory:', { ...DUCKDB_CONFIG, memory_limit: WRITER_MEMORY_LIMIT });
  const connection = await instance.connect();
  try {
    for (const statement of extensionLoads()) await connection.run(statement);
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
  { engine, snapshot, create }: { engine?: DuckDBInstance | undefined; snapshot?: number | undefined; create?: LakeCreation | undefined } = {},
): Promise<LakeConnection> {
  if (access === 'write') {
    mkdirSync(loaderFolder(dataDir), { recursive: true });
    mkdirSync(lakeDataFolder(dataDir), { recursive: true });
  } else if (!lakeExists(dataDir)) {
    throw new Error(`no warehouse at ${lakeCatalogFile(dataDir)} yet: run a harvest (or a load) first`);
  }
  let lake: LakeConnection;
  if (access === 'write' && engine) {
    const connection = await engine.connect();
    lake = {
      connection,
      close: async () => {
        try {
          // Attachments belong to the engine, not the connection: detached, the loader's file is
          // unlocked for the next writer, and the engine is ready for the next load.
          await connection.run(`USE ${ENGINE_DATABASE}`);
          for (const name of [LAKE, LOADER]) await connection.run(`DETACH DATABASE IF EXISTS ${name}`);
        } finally {
          connection.closeSync();
        }
      },
    };
  } else {
    const db = access === 'write' ? await openDatabase(loaderDatabasePath(dataDir), { memoryLimit: WRITER_MEMORY_LIMIT }) : await openDatabase(':memory:');
    lake = { connection: db.connection, close: async () => closeDatabase(db) };
  }
  try {
    if (access === 'write' && engine) {
      await lake.connection.run(`ATTACH ${sqlString(loaderDatabasePath(dataDir))} AS ${LOADER}`);
      // A batch's staged tables spill here when they outgrow the memory limit, not into the working directory.
      await lake.connection.run(`SET temp_directory = ${sqlString(loaderSpillFolder(dataDir))}`);
    }
    if (access === 'write' && create && !lakeExists(dataDir)) await createLake(lake.connection, dataDir, create);
    await attachLake(lake.connection, dataDir, access, snapshot);
    return lake;
  } catch (error) {
    await lake.close();
    throw error;
  }
}

/** What a new lake is given before anyone can see it: its tables and views. */
export type LakeCreation = (connection: DuckDBConnection) => Promise<void>;

/**
 * Makes a new lake under a name no reader opens, gives it its schema, and only then renames its
 * catalog into place: a reader that finds the catalog finds the tables too (a reader that asked
 * between the catalog's creation and its first tables was told "Table items does not exist").
 * Called by the writer alone, holding the writers' lock.
 */
async function createLake(connection: DuckDBConnection, dataDir: string, create: LakeCreation): Promise<void> {
  const catalog = lakeCatalogFile(dataDir);
  const draft = `${catalog}.new`;
  // A draft left by a writer that was killed while making it is unfinished: it starts again.
  rmSync(draft, { force: true });
  for (const statement of extensionLoads()) await connection.run(statement);
  const home = String((await connection.runAndReadAll('SELECT current_database()')).getRows()[0]?.[0]);
  await connection.run(lakeAttach(dataDir, false, undefined, draft));
  try {
    await connection.run(`USE ${LAKE}`);
    await create(connection);
  } finally {
    await connection.run(`USE "${home}"`);
    await connection.run(`DETACH ${LAKE}`);
  }
  renameSync(draft, catalog);
}

/**
 * The lake's one writer (the loader, or maintenance). DuckDB's file lock on the loader's database
 * keeps writers apart: a second one waits here until the first closes, up to `waitMs`, and one
 * that was killed holds no lock (the OS drops it).
 */
export async function openLakeWriter(dataDir: string, waitMs: number, { engine, create }: { engine?: DuckDBInstance | undefined; create?: LakeCreation } = {}): Promise<LakeConnection> {
  const deadline = Date.now() + waitMs;
  for (;;) {
    try {
      return await openLake(dataDir, 'write', { engine, create });
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
