/**
 * The load stage: landed pages are normalized and merged into the warehouse tables exactly once,
 * a batch per transaction that also records which landings it loaded, and the result is then
 * published for readers as a new file swapped in atomically.
 *
 * Why a published copy: DuckDB lets one process write a database file, and while it has the file
 * open no other process can open it, not even read-only ("could not set lock"). So the loader
 * writes a private database (`.loader/work.duckdb`) and, after each load, copies it to
 * `warehouse.duckdb.publishing` and renames that over `warehouse.duckdb`. Analysts open
 * `warehouse.duckdb` read-only at any time: an open reader keeps the snapshot it opened, the
 * next one sees the new load, and nobody is ever locked out.
 */
import { copyFileSync, closeSync, existsSync, fsyncSync, mkdirSync, openSync, renameSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { DuckDBConnection } from '@duckdb/node-api';
import type { Logger } from '../logger.js';
import { closeDatabase, openDatabase } from './duckdb.js';
import { landingFile, listLandings, notJsonReason, quarantineLanding, type UnloadableLanding } from '../store/landing.js';
import { extract, type LoadPackage } from './load-package.js';
import { CHECK_SQL, LANDING_ROWS_SQL, STAGE_SQL, STAGED_TABLES, readPackageSql, type StagedTable } from './normalize.js';
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

export function warehousePath(dataDir: string): string {
  return join(dataDir, 'warehouse.duckdb');
}

export function workDatabasePath(dataDir: string): string {
  return join(dataDir, '.loader', 'work.duckdb');
}

/** For upserts: take the newer observation's value, falling back to what is known. */
function newer(table: string, column: string, seenColumn = 'last_seen_at'): string {
  return `${column} = CASE WHEN s.${seenColumn} >= ${table}.${seenColumn} THEN coalesce(s.${column}, ${table}.${column}) ELSE coalesce(${table}.${column}, s.${column}) END`;
}
const seenRange = (table: string) => `first_seen_at = least(${table}.first_seen_at, s.first_seen_at), last_seen_at = greatest(${table}.last_seen_at, s.last_seen_at)`;
/** The latest non-null value of a column within a batch. */
const latest = (column: string, order = 'seen_at') => `arg_max(${column}, ${order}) FILTER (WHERE ${column} IS NOT NULL) AS ${column}`;
/**
 * One row per key of a staged latest-state table, as MERGE needs: each column's latest non-null
 * value in the batch, and when the key was first and last seen. Keys seen once in the batch (nearly
 * all of them) skip the aggregation, which costs more than the merge itself for string columns.
 */
function onePerKey(stage: string, keys: string[], anyColumns: string[], latestColumns: string[]): string {
  const keyList = keys.join(', ');
  return `WITH repeated AS (SELECT ${keyList} FROM ${stage} GROUP BY ${keyList} HAVING count(*) > 1)
    SELECT ${[...keys, ...anyColumns, ...latestColumns].join(', ')}, seen_at AS first_seen_at, seen_at AS last_seen_at FROM ${stage} ANTI JOIN repeated USING (${keyList})
    UNION ALL
    SELECT ${[keyList, ...anyColumns.map((column) => `any_value(${column}) AS ${column}`), ...latestColumns.map((column) => latest(column))].join(', ')},
      min(seen_at) AS first_seen_at, max(seen_at) AS last_seen_at
    FROM ${stage} SEMI JOIN repeated USING (${keyList}) GROUP BY ${keyList}`;
}
/** One row per key within the batch, so a merge never meets the same key twice. */
const distinctBy = (keys: string) => `QUALIFY row_number() OVER (PARTITION BY ${keys}) = 1`;
/** Latest state: rows of `source` (one per key) update the row with their key, or are inserted. */
const upsert = (table: string, keys: string[], source: string, updates: string) => [
  `MERGE INTO ${table} USING (${source}) AS s ON ${keys.map((key) => `${table}.${key} = s.${key}`).join(' AND ')}
   WHEN MATCHED THEN UPDATE SET ${updates} WHEN NOT MATCHED THEN INSERT BY NAME`,
];
/**
 * A latest-state table seen over time (accounts, items, comments): each key's newest non-null
 * values win, and its first and last sightings widen. `fixedColumns` never change for a key.
 */
const latestState = (table: StagedTable, keys: string[], fixedColumns: string[], latestColumns: string[]) =>
  upsert(
    table,
    keys,
    onePerKey(`stage_${table}`, keys, fixedColumns, latestColumns),
    `${latestColumns.map((column) => newer(table, column)).join(', ')}, ${seenRange(table)}`,
  );
const append = (table: StagedTable) => `INSERT INTO ${table} BY NAME SELECT * EXCLUDE (_landing) FROM stage_${table}`;

/**
 * How each staged table merges into its warehouse table: latest state is upserted (newer
 * observations win), history is appended.
 */
const MERGES: Record<StagedTable, string[]> = {
  accounts: latestState('accounts', ['platform', 'handle'], [], ['name', 'bio', 'verified', 'followers', 'following', 'posts']),
  account_metrics: [append('account_metrics')],
  items: latestState('items', ['platform', 'item_id'], ['kind'], ['url', 'caption', 'author_handle', 'posted_at']),
  item_metrics: [append('item_metrics')],
  comments: latestState('comments', ['platform', 'comment_id'], ['item_id'], ['text', 'author_handle', 'likes', 'posted_at']),
  search_hits: [append('search_hits')],
  transcripts: upsert(
    'transcripts',
    ['platform', 'item_id'],
    'SELECT * EXCLUDE (_landing) FROM stage_transcripts QUALIFY row_number() OVER (PARTITION BY platform, item_id ORDER BY fetched_at DESC) = 1',
    `${['language', 'source', 'text', 'request_id'].map((column) => newer('transcripts', column, 'fetched_at')).join(', ')}, fetched_at = greatest(transcripts.fetched_at, s.fetched_at)`,
  ),
  transcript_segments: [
    // A transcript's segments are replaced whole, so a shorter new transcript leaves no stale tail.
    `DELETE FROM transcript_segments WHERE (platform, item_id) IN (SELECT DISTINCT platform, item_id FROM stage_transcript_segments)`,
    `INSERT INTO transcript_segments BY NAME SELECT * EXCLUDE (_landing) FROM stage_transcript_segments ${distinctBy('platform, item_id, seq')}`,
  ],
  summaries: upsert(
    'summaries',
    ['platform', 'item_id'],
    'SELECT * EXCLUDE (_landing) FROM stage_summaries QUALIFY row_number() OVER (PARTITION BY platform, item_id ORDER BY fetched_at DESC) = 1',
    `${['language', 'summary', 'request_id'].map((column) => newer('summaries', column, 'fetched_at')).join(', ')}, fetched_at = greatest(summaries.fetched_at, s.fetched_at)`,
  ),
  downloads: [append('downloads')],
  api_calls: [append('api_calls')],
  harvest_runs: upsert(
    'harvest_runs',
    ['run_id'],
    `SELECT * EXCLUDE (_landing, seq) FROM stage_harvest_runs QUALIFY row_number() OVER (PARTITION BY run_id ORDER BY seq DESC) = 1`,
    'status = s.status, finished_at = s.finished_at, budget_credits = s.budget_credits, credits_spent = s.credits_spent, items_landed = s.items_landed, error = s.error',
  ),
};

/** Loads every landing not loaded yet, then publishes the warehouse for readers. */
export async function loadLandings(dataDir: string, options: LoadOptions = {}): Promise<LoadResult> {
  const started = Date.now();
  const workPath = workDatabasePath(dataDir);
  mkdirSync(join(dataDir, '.loader'), { recursive: true });
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
    // with rolls its batch back, and the load starts over from that batch (batches committed
    // before it stay loaded).
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
  const packageOf = (index: number) => guarded(extract(dataDir, plan[index] as string[], packageDir(dataDir, index % 2)));
  let nextPackage = plan.length > 0 ? packageOf(0) : undefined;
  let batch = 0;
  try {
    for (const index of plan.keys()) {
      const loadPackage = await (nextPackage as Promise<LoadPackage>);
      nextPackage = index + 1 < plan.length ? packageOf(index + 1) : undefined;
      quarantine(loadPackage.rejected);
      if (loadPackage.keys.length === 0) continue;
      batch++;
      const rows = await loadBatch(connection, dataDir, loadPackage, () => options.beforeCommit?.(batch));
      onBatch({ keys: loadPackage.keys, rows });
      options.logger?.info({ batch, landings: loadPackage.keys.length }, 'loaded a batch of landings');
      await options.afterBatch?.(batch);
    }
  } finally {
    await nextPackage?.catch(() => undefined);
    for (const turn of [0, 1]) rmSync(packageDir(dataDir, turn), { recursive: true, force: true });
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

function packageDir(dataDir: string, turn: number): string {
  return join(dataDir, '.loader', `package-${turn}`);
}

/** A promise whose rejection is handled where it is awaited, not reported as unhandled while it waits. */
function guarded<T>(promise: Promise<T>): Promise<T> {
  promise.catch(() => undefined);
  return promise;
}

async function loadBatch(connection: DuckDBConnection, dataDir: string, loadPackage: LoadPackage, beforeCommit: () => void | Promise<void>): Promise<number> {
  await connection.run('BEGIN TRANSACTION');
  let unreadable: Error | undefined;
  try {
    try {
      for (const statement of readPackageSql(loadPackage.files)) await connection.run(statement);
    } catch (error) {
      unreadable = error as Error;
      throw error;
    }
    for (const statement of STAGE_SQL) await connection.run(statement);
    const problems = (await connection.runAndReadAll(CHECK_SQL)).getRowObjectsJson();
    if (problems.length > 0) throw new UnloadableLandingsError(problems.map((problem) => ({ key: String(problem._landing), reason: `${String(problem.problem)} (${String(problem.endpoint)})` })));
    for (const table of STAGED_TABLES) for (const statement of MERGES[table]) await connection.run(statement);
    await connection.run(`CREATE OR REPLACE TEMP TABLE landing_rows AS ${LANDING_ROWS_SQL}`);
    await connection.run('INSERT INTO loaded_landings SELECT landing, run_id, rows, now() FROM landing_rows');
    const rows = Number((await connection.runAndReadAll('SELECT coalesce(sum(rows), 0) FROM landing_rows')).getRows()[0]?.[0] ?? 0);
    await beforeCommit();
    await connection.run('COMMIT');
    return rows;
  } catch (error) {
    await connection.run('ROLLBACK');
    if (unreadable) throw await unreadableLandings(connection, dataDir, loadPackage.keys, unreadable);
    throw error;
  }
}

/** Landings that cannot be loaded; the batch that met them was rolled back. */
class UnloadableLandingsError extends Error {
  override name = 'UnloadableLandingsError';
  constructor(readonly landings: UnloadableLanding[]) {
    super(landings.map((landing) => `landing ${landing.key} cannot be loaded: ${landing.reason}`).join('; '));
  }
}

/**
 * DuckDB could not read a batch's package: finds the landings at fault by reading halves of the
 * batch (each in a package of its own) until each failing part is one landing. A landing at fault
 * costs about two more reads of the batch, only when a batch fails, and nothing depends on how
 * DuckDB words its errors or numbers the package's lines.
 * When no landing fails alone (memory ran out, say), the batch's error is reported as it is.
 */
async function unreadableLandings(connection: DuckDBConnection, dataDir: string, keys: string[], error: Error): Promise<Error> {
  const directory = join(dataDir, '.loader', 'check');
  const readFails = async (part: string[]): Promise<string | undefined> => {
    const loadPackage = await extract(dataDir, part, directory);
    try {
      for (const statement of readPackageSql(loadPackage.files)) await connection.run(statement);
      return undefined;
    } catch (partError) {
      return (partError as Error).message;
    }
  };
  const halves = (part: string[]) => [part.slice(0, Math.ceil(part.length / 2)), part.slice(Math.ceil(part.length / 2))];
  const find = async (part: string[]): Promise<UnloadableLanding[]> => {
    const failure = await readFails(part);
    if (failure === undefined) return [];
    const key = part[0] as string;
    if (part.length === 1) return [{ key, reason: notJsonReason(dataDir, key) ?? duckdbReason(failure) }];
    const found: UnloadableLanding[] = [];
    for (const side of halves(part)) found.push(...(await find(side)));
    return found;
  };
  try {
    // The whole batch is known to fail: its halves are where the search starts.
    const landings: UnloadableLanding[] = [];
    for (const part of keys.length === 1 ? [keys] : halves(keys)) landings.push(...(await find(part)));
    if (landings.length > 0) return new UnloadableLandingsError(landings);
    return new Error(`landings ${keys[0]} to ${keys.at(-1)} (${keys.length}) cannot be loaded: ${error.message}`, { cause: error });
  } finally {
    rmSync(directory, { recursive: true, force: true });
  }
}

/** DuckDB's reason for not reading a one-landing package, without the package's file name and line. */
function duckdbReason(message: string): string {
  return (message.split('\n')[0] ?? '').replace(/ in file "[^"]*",?/, '').replace(/,? (at byte \d+ )?in line \d+/, '');
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
