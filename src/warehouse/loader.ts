/**
 * A load: landings not loaded yet go, batch by batch, through the three stages, extract (a load
 * package, load-package.ts), normalize (normalize.ts) and merge (merge.ts, a transaction per batch
 * that also records which landings it loaded), and the result is then published for readers as a
 * new file swapped in atomically.
 *
 * Why a published copy: DuckDB lets one process write a database file, and while it has the file
 * open no other process can open it, not even read-only ("could not set lock"). So the loader
 * writes a private database (`.loader/work.duckdb`) and, after each load, copies it to
 * `warehouse.duckdb.publishing` and renames that over `warehouse.duckdb`. Analysts open
 * `warehouse.duckdb` read-only at any time: an open reader keeps the snapshot it opened, the
 * next one sees the new load, and nobody is ever locked out.
 */
import { copyFileSync, closeSync, existsSync, fsyncSync, mkdirSync, openSync, renameSync, rmSync, statSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import type { DuckDBConnection } from '@duckdb/node-api';
import type { Logger } from '../logger.js';
import { closeDatabase, openDatabase } from './duckdb.js';
import { listLandings, quarantineLanding, type UnloadableLanding } from '../store/landing.js';
import { landingFile, loadPackageFolder, loaderFolder, warehousePath, workDatabasePath } from '../store/layout.js';
import { extract, type LoadPackage } from './load-package.js';
import { merge } from './merge.js';
import { normalize, UnloadableLandingsError } from './normalize.js';
import { TABLES_DDL, VIEWS_DDL } from './schema.js';

export interface LoadOptions {
  /** Landings merged per transaction, at most; memory is bounded by the batch, not by the warehouse. */
  batchLandings?: number;
  /** Bytes of landing files per batch, at most (a job's results page is far larger than a list page). */
  batchBytes?: number;
  logger?: Logger;
  /** How long to wait for another loader that holds the work database. */
  lockWaitMs?: number;
  /** Called inside each batch's transaction, just before COMMIT: a crash here must load nothing. */
  beforeCommit?: (batch: number) => void | Promise<void>;
  /** Called after each committed batch: a crash here must lose nothing. */
  afterBatch?: (batch: number) => void | Promise<void>;
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
  /** Of those, how many each run had, by the run's folder name (`pathSegment` of its id). */
  landingsLoadedByRun: Record<string, number>;
  /** Landings that could not be loaded, moved out of the way. */
  quarantined: QuarantinedLanding[];
  rowsLoaded: number;
  batches: number;
  published: boolean;
  durationMs: number;
}

/** Loads every landing not loaded yet, then publishes the warehouse for readers. */
export async function loadLandings(dataDir: string, options: LoadOptions = {}): Promise<LoadResult> {
  const started = Date.now();
  const workPath = workDatabasePath(dataDir);
  mkdirSync(loaderFolder(dataDir), { recursive: true });
  const db = await openWorkDatabase(workPath, options.lockWaitMs ?? 120_000);
  try {
    for (const statement of [...TABLES_DDL, ...VIEWS_DDL]) await db.connection.run(statement);
    let landingsLoaded = 0;
    const landingsLoadedByRun: Record<string, number> = {};
    let rowsLoaded = 0;
    let batches = 0;
    const quarantined: QuarantinedLanding[] = [];
    const quarantine = (landings: UnloadableLanding[]) => {
      for (const { key, reason } of landings) {
        const file = quarantineLanding(dataDir, key, reason);
        quarantined.push({ key, file, reason });
        options.logger?.warn({ landing: landingFile(dataDir, key), quarantinedAs: file, reason }, 'a landing cannot be loaded: quarantined');
      }
    };
    // A landing that cannot be loaded is moved to quarantine/ and the load goes on without it. One
    // the package leaves out is set aside before its batch loads; one that only DuckDB finds fault
    // with stops its batch before it merges, and the load starts over from that batch (batches
    // committed before it stay loaded).
    for (;;) {
      try {
        await loadPending(db.connection, dataDir, options, quarantine, (loaded) => {
          landingsLoaded += loaded.keys.length;
          for (const key of loaded.keys) {
            const run = key.slice(0, key.indexOf('/'));
            landingsLoadedByRun[run] = (landingsLoadedByRun[run] ?? 0) + 1;
          }
          rowsLoaded += loaded.rows;
          batches++;
        });
        break;
      } catch (error) {
        if (!(error instanceof UnloadableLandingsError)) throw error;
        quarantine(error.landings);
      }
    }
    // The published copy is also made again when it cannot be read (replaced, cut short): the
    // work database is the truth, and readers only ever get a copy of it.
    const published = landingsLoaded > 0 || !(await publishedCopyReadable(warehousePath(dataDir)));
    if (published) await publish(db.connection, workPath, warehousePath(dataDir));
    return { landingsLoaded, landingsLoadedByRun, rowsLoaded, batches, published, quarantined, durationMs: Date.now() - started };
  } finally {
    closeDatabase(db);
  }
}

/** Loads the landings not loaded yet, batch by batch, each in its own transaction. */
async function loadPending(
  connection: DuckDBConnection,
  dataDir: string,
  options: LoadOptions,
  quarantine: (landings: UnloadableLanding[]) => void,
  onBatch: (loaded: { keys: readonly string[]; rows: number }) => void,
): Promise<void> {
  const loaded = new Set((await connection.runAndReadAll('SELECT landing FROM loaded_landings')).getRows().map((row) => String(row[0])));
  const pending = listLandings(dataDir).filter((key) => !loaded.has(key));
  const plan = batchesOf(dataDir, pending, options.batchLandings ?? DEFAULT_BATCH.landings, options.batchBytes ?? DEFAULT_BATCH.bytes);
  // Each batch's package is written while the batch before it loads (two package folders take turns).
  const packageOf = (index: number) => guarded(extract(dataDir, plan[index] as string[], loadPackageFolder(dataDir, index % 2)));
  let nextPackage = plan.length > 0 ? packageOf(0) : undefined;
  let batch = 0;
  try {
    for (const index of plan.keys()) {
      const loadPackage = await (nextPackage as Promise<LoadPackage>);
      nextPackage = index + 1 < plan.length ? packageOf(index + 1) : undefined;
      quarantine(loadPackage.rejected);
      if (loadPackage.keys.length === 0) continue;
      batch++;
      await normalize(connection, dataDir, loadPackage);
      const rows = await merge(connection, () => options.beforeCommit?.(batch));
      onBatch({ keys: loadPackage.keys, rows });
      options.logger?.info({ batch, landings: loadPackage.keys.length }, 'loaded a batch of landings');
      await options.afterBatch?.(batch);
    }
  } finally {
    await nextPackage?.catch(() => undefined);
    for (const turn of [0, 1]) rmSync(loadPackageFolder(dataDir, turn), { recursive: true, force: true });
  }
}

async function publishedCopyReadable(path: string): Promise<boolean> {
  if (!existsSync(path)) return false;
  try {
    const db = await openDatabase(path, { readOnly: true });
    try {
      await db.connection.run('SELECT count(*) FROM loaded_landings');
      return true;
    } finally {
      closeDatabase(db);
    }
  } catch {
    return false;
  }
}

/** A promise whose rejection is handled where it is awaited, not reported as unhandled while it waits. */
function guarded<T>(promise: Promise<T>): Promise<T> {
  promise.catch(() => undefined);
  return promise;
}

/**
 * Consecutive batches of landings, each within both the count and the byte bound (at least one
 * landing), and as even as those bounds allow: a small last batch would fall under DuckDB's row
 * group size and have its rows written twice (log, then checkpoint).
 */
function batchesOf(dataDir: string, keys: string[], maxLandings: number, maxBytes: number): string[][] {
  const sizes = keys.map((key) => statSync(landingFile(dataDir, key)).size);
  const totalBytes = sizes.reduce((sum, size) => sum + size, 0);
  const count = Math.max(1, Math.ceil(keys.length / maxLandings), Math.ceil(totalBytes / maxBytes));
  const batches: string[][] = [];
  let current: string[] = [];
  let bytes = 0;
  let landingsBefore = 0;
  let bytesBefore = 0;
  keys.forEach((key, index) => {
    const size = sizes[index] as number;
    // Batch b ends where the first b + 1 shares of all landings (by count or by bytes) end.
    const share = (batches.length + 1) / count;
    const full = landingsBefore + current.length >= keys.length * share || bytesBefore + bytes >= totalBytes * share;
    if (current.length > 0 && (full || current.length >= maxLandings || bytes + size > maxBytes)) {
      batches.push(current);
      landingsBefore += current.length;
      bytesBefore += bytes;
      current = [];
      bytes = 0;
    }
    current.push(key);
    bytes += size;
  });
  if (current.length > 0) batches.push(current);
  return batches;
}

/** Checkpoints the work database and swaps a copy of it in as the readers' warehouse. */
async function publish(connection: DuckDBConnection, workPath: string, target: string): Promise<void> {
  await connection.run('CHECKPOINT');
  // Not `<target>.tmp`: that is the folder where DuckDB spills a reader's large query (its default
  // temp_directory), and copying onto it while a query spills would fail the load.
  const temporary = `${target}.publishing`;
  copyFileSync(workPath, temporary);
  const fd = openSync(temporary, 'r+');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(temporary, target);
}

/**
 * Opens the loader's database. DuckDB's own file lock keeps loaders apart: a second loader waits
 * here until the first closes, and a loader that was killed holds no lock (the OS drops it).
 */
async function openWorkDatabase(path: string, waitMs: number) {
  const deadline = Date.now() + waitMs;
  for (;;) {
    try {
      return await openDatabase(path, { memoryLimit: '1GB' });
    } catch (error) {
      if (!/lock/i.test((error as Error).message) || Date.now() > deadline) throw error;
      await sleep(100);
    }
  }
}
