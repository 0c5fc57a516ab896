/**
 * A load: landings not loaded yet go, batch by batch, through the three stages, extract (a load
 * package, extract.ts), normalize (normalize.ts) and merge (merge.ts, a transaction per batch
 * that also records which landings it loaded) into the lake (lake.ts). Each batch commits one
 * snapshot of the lake: readers see it on their next query, and nothing is copied.
 *
 * One loader at a time per data directory: the loader's own DuckDB file (`.loader/loader.duckdb`,
 * where batches are staged) is locked by DuckDB while open, so a second loader waits for it, and a
 * loader that was killed holds no lock (the OS drops it).
 */
import { existsSync, renameSync, rmSync, statSync } from 'node:fs';
import type { DuckDBConnection, DuckDBInstance } from '@duckdb/node-api';
import type { Logger } from '../logger.js';
import { inTransaction, scalarOf, sqlString, tableNames } from './duckdb.js';
import type { UnloadableLanding } from '../store/landing.js';
import { LocalStore, type Store } from '../store/store.js';
import { lakeCatalogFile, landingFile, legacyWarehouseFiles, loadPackageFolder } from '../store/layout.js';
import { lakeInlines, lakeLocation, latestSnapshot, openLakeWriter, type LakeConnection } from './lake.js';
import { keepLatestPerKey } from './merge.js';
import { extract, foldersOfEndedRuns, pendingAnswers, type LoadPackage, type PendingAnswer } from './extract.js';
import { archiveJournals, archiveLateRecords } from './journal-archive.js';
import { repairLake, type LakeRepair } from './lake-repair.js';
import { syncCatalogCommit } from './lake-sync.js';
import { merge } from './merge.js';
import { recordDrift } from './schema-drift.js';
import type { SchemaContract, SchemaContracts } from '../harvest/schema-contract.js';
import { normalize, UnloadableLandingsError } from './normalize.js';
import { WAREHOUSE_TABLES } from './schema.js';
import { ensureSchema } from './schema-version.js';
import { StepTimes, type StepTimings } from './step-times.js';

export interface LoadOptions {
  /** Landings merged per transaction, at most; memory is bounded by the batch, not by the warehouse. */
  batchLandings?: number;
  /** Bytes of landing files per batch, at most (a job's results page is far larger than a list page). */
  batchBytes?: number;
  logger?: Logger;
  /** How long to wait for another loader of the same data directory. */
  lockWaitMs?: number;
  /** Called inside each batch's transaction, just before COMMIT: a crash here must load nothing. */
  beforeCommit?: (batch: number) => void | Promise<void>;
  /** Called after each committed batch: a crash here must lose nothing. */
  afterBatch?: (batch: number) => void | Promise<void>;
  /** Called once every batch is committed, before the answers of ended runs leave the data directory: a crash here must load nothing twice. */
  beforeClear?: (batch: number) => void | Promise<void>;
  /** A run whose landings in the lake the result counts, whichever load loaded them. */
  countRun?: string;
  /** A DuckDB with the lake's extensions loaded already (createLakeEngine), for a process that loads often. */
  engine?: DuckDBInstance;
  /** Where the landings are: the data directory by default; a shared store's are staged into it first. */
  store?: Store;
  /** The schema contract of each harvest whose answers may be pending (schema-drift.ts); one not named loads under `evolve`. */
  schemaContracts?: SchemaContracts;
}

/**
 * A batch is one transaction. Large batches load fastest: from about 120k rows (one DuckDB row
 * group) a table's new rows are written straight to the database file instead of twice (log, then
 * checkpoint). Memory grows with the batch (DuckDB reads its package whole), never with the warehouse.
 */
export const DEFAULT_BATCH = { landings: 5000, bytes: 64 << 20 };

export interface QuarantinedLanding {
  key: string;
  /** Where it was moved: under `quarantine/`, with a `.reason` file beside it. */
  file: string;
  reason: string;
}

export interface LoadResult {
  landingsLoaded: number;
  /** Landings that could not be loaded, moved out of the way. */
  quarantined: QuarantinedLanding[];
  rowsLoaded: number;
  batches: number;
  /** The lake's latest snapshot after the load: what a reader's next query reads. Not asked when the load only made the lake. */
  snapshot?: number;
  /** For `countRun`: its landings in the lake after this load, their rows, and the fields its answers carried that no column takes. */
  run?: { landings: number; rows: number; schemaDrift: SchemaDrift[] };
  /** Files of the lake that were not whole when the load began, repaired before it loaded (lake-repair.ts), and what was lost. */
  repair?: LakeRepair;
  durationMs: number;
  /** Where the load's time went, step by step (step-times.ts). */
  steps?: StepTimings;
}

/** Loads every landing not loaded yet into the lake, a snapshot per batch. */
export async function loadLandings(dataDir: string, options: LoadOptions = {}): Promise<LoadResult> {
  const store = options.store ?? new LocalStore(dataDir);
  return store.asLakeWriter(() => loadAsWriter(dataDir, store, options));
}

/**
 * Makes the lake with this version's schema, if it is not made, and loads nothing: a run's start on
 * a new data directory, so its final load does not make it (a lake found made is left to the next
 * load, which brings its schema up to date).
 */
export async function makeLake(dataDir: string, options: Pick<LoadOptions, 'engine' | 'store' | 'lockWaitMs'> = {}): Promise<LoadResult> {
  const started = Date.now();
  const store = options.store ?? new LocalStore(dataDir);
  return store.asLakeWriter(async () => {
    const db = await openLakeWriter(dataDir, options.lockWaitMs ?? 120_000, { engine: options.engine, create: ensureSchema, madeIsEnough: true });
    try {
      if (db.created) {
        // Just made (and not attached again): nothing to repair, and its first snapshots are its schema's.
        schemaCheckedIn.add(lakeKey(dataDir));
        return { landingsLoaded: 0, quarantined: [], rowsLoaded: 0, batches: 0, durationMs: Date.now() - started };
      }
      const repair = await repairBeforeWriting(db, dataDir, undefined);
      return { landingsLoaded: 0, quarantined: [], rowsLoaded: 0, batches: 0, snapshot: await latestSnapshot(db.connection), durationMs: Date.now() - started, ...(repair ? { repair } : {}) };
    } finally {
      await db.close();
    }
  });
}

async function loadAsWriter(dataDir: string, store: Store, options: LoadOptions): Promise<LoadResult> {
  const started = Date.now();
  const steps = new StepTimes();
  const db = await steps.time('open', () => openLakeWriter(dataDir, options.lockWaitMs ?? 120_000, { engine: options.engine, create: ensureSchema }));
  let loaded: Omit<LoadResult, 'durationMs' | 'steps'>;
  try {
    loaded = await loadIntoLake(db, dataDir, store, options, steps);
  } finally {
    await steps.time('close', () => db.close());
  }
  return { ...loaded, durationMs: Date.now() - started, steps: steps.toJSON() };
}

async function loadIntoLake(db: LakeConnection, dataDir: string, store: Store, options: LoadOptions, steps: StepTimes): Promise<Omit<LoadResult, 'durationMs' | 'steps'>> {
  const repair = await steps.time('repair check', () => repairBeforeWriting(db, dataDir, options.logger));
  // A lake made by an earlier version: its schema is brought up to date, and the duplicate rows
  // that version's loads may have left (docs/ducklake-merge-duplicates.md) are repaired once.
  const lake = lakeKey(dataDir);
  if (!db.created && !schemaCheckedIn.has(lake)) {
    await steps.time('schema check', async () => {
      if (!(await ensureSchema(db.connection))) return;
      const removed = await keepLatestPerKey(db.connection);
      if (Object.values(removed).some((rows) => rows > 0)) options.logger?.warn({ removed }, 'removed duplicate rows of latest-state tables, keeping each key\'s latest version');
    });
  }
  schemaCheckedIn.add(lake);
  await steps.time('legacy check', () => migrateLegacyWarehouse(db.connection, dataDir, options.logger));
  let landingsLoaded = 0;
  let rowsLoaded = 0;
  let batches = 0;
  const quarantined: QuarantinedLanding[] = [];
  const quarantine = async (landings: UnloadableLanding[]) => {
    for (const { key, reason } of landings) {
      const file = await store.quarantineLanding(key, reason);
      quarantined.push({ key, file, reason });
      options.logger?.warn({ landing: landingFile(dataDir, key), quarantinedAs: file, reason }, 'a landing cannot be loaded: quarantined');
    }
  };
  // A landing that cannot be loaded is moved to quarantine/ and the load goes on without it. One
  // the package leaves out is set aside before its batch loads; one that only DuckDB finds fault
  // with stops its batch before it merges, and the load starts over from that batch (batches
  // committed before it stay loaded).
  /** The run's landings in the lake, counted inside the last batch's transaction (see loadPending), if it had one. */
  let counted: RunInLake | undefined;
  for (;;) {
    try {
      counted = await loadPending(db, dataDir, store, options, quarantine, steps, (loaded) => {
        landingsLoaded += loaded.keys.length;
        rowsLoaded += loaded.rows;
        batches++;
      });
      break;
    } catch (error) {
      if (!(error instanceof UnloadableLandingsError)) throw error;
      await quarantine(error.landings);
    }
  }
  if (db.synced && db.synced.commits > 0) {
    steps.add('of which: sync new files', db.synced.ms);
    steps.add('of which: COMMIT', db.synced.commitMs);
    options.logger?.info({ lakeSync: db.synced }, 'synced the lake\'s new files before each commit');
  }
  const snapshot = await steps.time('snapshot', () => latestSnapshot(db.connection));
  const countRun = options.countRun;
  const run = countRun === undefined ? undefined : (counted ?? (await steps.time('count run', () => landingsOfRun(db.connection, countRun))));
  return { landingsLoaded, rowsLoaded, batches, snapshot, ...(run ? { run } : {}), ...(repair ? { repair } : {}), quarantined };
}

/**
 * Loads the answers not loaded yet, batch by batch, each in its own transaction with the record of
 * how far it loaded each segment; then clears from the data directory the answers of runs that are
 * over and wholly in the lake.
 */
async function loadPending(
  lake: LakeConnection,
  dataDir: string,
  store: Store,
  options: LoadOptions,
  quarantine: (landings: UnloadableLanding[]) => Promise<void>,
  steps: StepTimes,
  onBatch: (loaded: { keys: readonly string[]; rows: number }) => void,
): Promise<RunInLake | undefined> {
  const { connection } = lake;
  await steps.time('stage', () => store.stageLandings());
  const pending = await steps.time('find new', () => pendingAnswers(connection, dataDir));
  const plan = batchesOf(pending.answers, options.batchLandings ?? DEFAULT_BATCH.landings, options.batchBytes ?? DEFAULT_BATCH.bytes);
  // Each batch's package is written while the batch before it loads (two package folders take turns).
  const packageOf = (index: number) => guarded(extract((plan[index] as PendingAnswer[]).filter((answer) => !answer.skip), loadPackageFolder(dataDir, index % 2), options.schemaContracts));
  let nextPackage = plan.length > 0 ? packageOf(0) : undefined;
  let batch = 0;
  let counted: RunInLake | undefined;
  /**
   * The runs over for good whose answers are all in the lake now, and those of them whose journals
   * were copied there: found, and copied, in the last batch's transaction, so its commit is theirs.
   */
  let ending: { folders: string[]; journaled: string[] } | undefined;
  const endRuns = async (folders: string[]) => {
    ending = { folders, journaled: await steps.time('archive journals', () => archiveJournals(connection, dataDir, store, folders.flatMap((folder) => pending.runFolders.get(folder) ?? []))) };
  };
  try {
    for (const [index, answers] of plan.entries()) {
      const loadPackage = await steps.time('extract', () => nextPackage as Promise<LoadPackage>);
      nextPackage = index + 1 < plan.length ? packageOf(index + 1) : undefined;
      await quarantine(loadPackage.rejected);
      const segments = segmentsLoadedBy(answers);
      if (loadPackage.keys.length === 0 && segments.length === 0 && loadPackage.drift.length === 0) continue;
      batch++;
      if (loadPackage.keys.length > 0) await steps.time('normalize', () => normalize(lake, dataDir, loadPackage));
      const rows = await merge(connection, loadPackage.keys.length > 0, lakeInlines(dataDir), steps, async () => {
        await steps.time('record segments', () => recordSegments(connection, segments));
        await steps.time('record drift', () => recordDrift(connection, loadPackage.drift));
        if (index === plan.length - 1) {
          await endRuns(await steps.time('find ended runs', () => foldersOfEndedRuns(connection, pending.runFolders, dataDir)));
          // Counted here, where the batch's rows are visible and the tables' metadata is at hand:
          // after the commit, each table's first statement asks the catalog anew (~15 ms).
          const { countRun } = options;
          if (countRun !== undefined) counted = await steps.time('count run', () => landingsOfRun(connection, countRun));
        }
        await options.beforeCommit?.(batch);
      });
      onBatch({ keys: loadPackage.keys, rows });
      options.logger?.info({ batch, landings: loadPackage.keys.length }, 'loaded a batch of landings');
      await options.afterBatch?.(batch);
    }
  } finally {
    await nextPackage?.catch(() => undefined);
    for (const turn of [0, 1]) rmSync(loadPackageFolder(dataDir, turn), { recursive: true, force: true });
  }
  // No batch to ride (nothing new, or the last had nothing to load): a transaction of their own, when any run ended.
  if (!ending) {
    const folders = await steps.time('find ended runs', () => foldersOfEndedRuns(connection, pending.runFolders, dataDir));
    if (folders.length > 0) await steps.time('end runs', () => inTransaction(connection, () => endRuns(folders)));
  }
  if (ending && ending.folders.length > 0) {
    await options.beforeClear?.(1);
    // The commit that holds them is on disk before the run's answers and journals leave the data directory.
    await steps.time('sync catalog', () => syncCatalogCommit(dataDir, lakeLocation(dataDir).shared));
    const { folders, journaled } = ending;
    await steps.time('clear answers', async () => {
      for (const runFolder of folders) await store.removeRunAnswers(runFolder);
      await store.journals.removeRunJournals(journaled);
    });
  }
  // Late records of ended runs (issue 39): into the lake with their runs' corrections, then, once
  // that commit is on the disk, out of the store.
  const late = await steps.time('late records', () => store.journals.lateLogs());
  if (late.length > 0) {
    const archived = await inTransaction(connection, () => archiveLateRecords(connection, dataDir, late));
    await syncCatalogCommit(dataDir, lakeLocation(dataDir).shared);
    await store.journals.removeLateLogs(archived);
  }
  return counted;
}

/**
 * Repairs the files of the lake that were not whole when the writer attached (lake-repair.ts), so
 * no load merges into a table it cannot read; a repaired lake's schema (a table made again lost
 * its comment, the schema's mark) is asked again.
 */
async function repairBeforeWriting(db: LakeConnection, dataDir: string, logger: Logger | undefined): Promise<LakeRepair | undefined> {
  const repair = await repairLake(db, dataDir, { logger });
  if (repair) {
    schemaCheckedIn.delete(lakeKey(dataDir));
    await ensureSchema(db.connection);
  }
  return repair;
}

/** How far a batch loads each segment it reads: the end of its last frame there. */
function segmentsLoadedBy(answers: readonly PendingAnswer[]): { id: string; runId: string; end: number }[] {
  const ends = new Map<string, { id: string; runId: string; end: number }>();
  for (const answer of answers) if (answer.segment) ends.set(answer.segment.id, answer.segment);
  return [...ends.values()];
}

async function recordSegments(connection: DuckDBConnection, segments: { id: string; runId: string; end: number }[]): Promise<void> {
  if (segments.length === 0) return;
  const rows = segments.map((segment) => `(${sqlString(segment.id)}, ${sqlString(segment.runId)}, ${segment.end}, now())`);
  await connection.run(`INSERT INTO loaded_segments VALUES ${rows.join(', ')}`);
}

/** A promise whose rejection is handled where it is awaited, not reported as unhandled while it waits. */
function guarded<T>(promise: Promise<T>): Promise<T> {
  promise.catch(() => undefined);
  return promise;
}

/**
 * Consecutive batches of answers, each within both the count and the byte bound (at least one
 * answer), and as even as those bounds allow: a small last batch would fall under DuckDB's row
 * group size and have its rows written twice (log, then checkpoint). Answers already loaded ride
 * along in their batch (unpackaged) so the batch records its segments' progress past them.
 */
function batchesOf(answers: PendingAnswer[], maxLandings: number, maxBytes: number): PendingAnswer[][] {
  const totalBytes = answers.reduce((sum, answer) => sum + answer.length, 0);
  const count = Math.max(1, Math.ceil(answers.length / maxLandings), Math.ceil(totalBytes / maxBytes));
  const batches: PendingAnswer[][] = [];
  let current: PendingAnswer[] = [];
  let bytes = 0;
  let landingsBefore = 0;
  let bytesBefore = 0;
  for (const answer of answers) {
    const size = answer.length;
    // Batch b ends where the first b + 1 shares of all answers (by count or by bytes) end.
    const share = (batches.length + 1) / count;
    const full = landingsBefore + current.length >= answers.length * share || bytesBefore + bytes >= totalBytes * share;
    if (current.length > 0 && (full || current.length >= maxLandings || bytes + size > maxBytes)) {
      batches.push(current);
      landingsBefore += current.length;
      bytesBefore += bytes;
      current = [];
      bytes = 0;
    }
    current.push(answer);
    bytes += size;
  }
  if (current.length > 0) batches.push(current);
  return batches;
}

/** A field the answers of an endpoint carried and no column takes (schema_drift), over a run. */
export interface SchemaDrift {
  endpoint: string;
  field: string;
  answers: number;
  firstSeenAt: string;
  lastSeenAt: string;
  /** What the loads did with it: kept (evolve), set the answers aside (freeze), or dropped it (discard). */
  contract: SchemaContract;
}

/** A run's landings in the lake, the rows they made, and the fields beyond the schema its answers carried. */
interface RunInLake {
  landings: number;
  rows: number;
  schemaDrift: SchemaDrift[];
}

async function landingsOfRun(connection: DuckDBConnection, runId: string): Promise<RunInLake> {
  const row = (await connection.runAndReadAll(`SELECT count(*), coalesce(sum(rows), 0) FROM loaded_landings WHERE run_id = ${sqlString(runId)}`)).getRows()[0];
  const drift = await connection.runAndReadAll(
    `SELECT endpoint, field_path, sum(answers), strftime(min(first_seen_at), '%Y-%m-%dT%H:%M:%SZ'), strftime(max(last_seen_at), '%Y-%m-%dT%H:%M:%SZ'), coalesce(contract, 'evolve')
    FROM schema_drift WHERE run_id = ${sqlString(runId)} GROUP BY ALL ORDER BY 1, 2, 6`,
  );
  const schemaDrift = drift.getRows().map(([endpoint, field, answers, first, last, contract]) => ({
    endpoint: String(endpoint),
    field: String(field),
    answers: Number(answers),
    firstSeenAt: String(first),
    lastSeenAt: String(last),
    contract: String(contract) as SchemaContract,
  }));
  return { landings: Number(row?.[0] ?? 0), rows: Number(row?.[1] ?? 0), schemaDrift };
}

/**
 * The lakes this process made, or found with this version's schema: a warm load process asks a
 * lake once, not at each load (the question reads every table of the catalog, about 25 ms of a
 * short run's final load of 250). A local lake made again under the same path is another file,
 * so another key.
 */
const schemaCheckedIn = new Set<string>();

/** As a process starting anew: every lake's schema is asked again at its next load (tests of an upgrade in place). */
export function forgetCheckedSchemas(): void {
  schemaCheckedIn.clear();
}

function lakeKey(dataDir: string): string {
  const { catalog, shared } = lakeLocation(dataDir);
  if (shared) return catalog;
  const file = statSync(lakeCatalogFile(dataDir), { throwIfNoEntry: false });
  return `${catalog}#${file?.ino ?? 0}:${file?.birthtimeMs ?? 0}`;
}

/**
 * Moves the history of a warehouse made before the lake (`.loader/work.duckdb`, the loader's copy
 * and the truth, or else the published `warehouse.duckdb`) into the lake, in one snapshot, and then
 * renames the old files to `*.migrated`, kept until the user deletes them. A migration cut short
 * before the rename is known by its landings, already in the lake, and is not done twice.
 */
async function migrateLegacyWarehouse(connection: DuckDBConnection, dataDir: string, logger: Logger | undefined): Promise<void> {
  const legacy = legacyWarehouseFiles(dataDir);
  const source = [legacy.work, legacy.published].find((file) => existsSync(file));
  if (!source) return;
  await connection.run(`ATTACH ${sqlString(source)} AS legacy (READ_ONLY)`);
  try {
    const legacyTables = await tableNames(connection, 'legacy');
    const moved = legacyTables.has('loaded_landings') ? await scalarOf(connection, 'SELECT count(*) FROM loaded_landings WHERE landing IN (SELECT landing FROM legacy.loaded_landings)') : 0;
    if (moved === 0) {
      await inTransaction(connection, async () => {
        // BY NAME: an older warehouse lacks the columns added since, which stay null.
        for (const table of WAREHOUSE_TABLES) if (legacyTables.has(table)) await connection.run(`INSERT INTO ${table} BY NAME SELECT * FROM legacy.${table}`);
      });
      logger?.info({ from: source }, 'moved the warehouse into the lake');
    }
  } finally {
    await connection.run('DETACH legacy');
  }
  for (const file of [legacy.work, legacy.published]) if (existsSync(file)) renameSync(file, `${file}.migrated`);
}

