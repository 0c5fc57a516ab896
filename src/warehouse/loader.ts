/**
 * The load stage: landed pages are normalized and merged into the warehouse tables exactly once,
 * a batch per transaction that also records which landings it loaded, and the result is then
 * published for readers as a new file swapped in atomically.
 *
 * Why a published copy: DuckDB lets one process write a database file, and while it has the file
 * open no other process can open it, not even read-only ("could not set lock"). So the loader
 * writes a private database (`.loader/work.duckdb`) and, after each load, copies it to
 * `warehouse.duckdb.tmp` and renames that over `warehouse.duckdb`. Analysts open
 * `warehouse.duckdb` read-only at any time: an open reader keeps the snapshot it opened, the
 * next one sees the new load, and nobody is ever locked out.
 */
import { copyFileSync, closeSync, existsSync, fsyncSync, mkdirSync, openSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { DuckDBConnection } from '@duckdb/node-api';
import type { Logger } from '../logger.js';
import { closeDatabase, openDatabase, sqlString } from './duckdb.js';
import { landingRoot, listLandings, readLanding } from './landing.js';
import { emptyRows, normalizeLanding, type StagedRows, type StagedTable } from './normalize.js';
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

export interface LoadResult {
  landingsLoaded: number;
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

/** Column types of each staged table, for DuckDB's JSON reader. */
const STAGE_COLUMNS: Record<StagedTable, Record<string, string>> = {
  accounts: { platform: 'VARCHAR', handle: 'VARCHAR', name: 'VARCHAR', bio: 'VARCHAR', verified: 'BOOLEAN', followers: 'BIGINT', following: 'BIGINT', posts: 'BIGINT', seen_at: 'TIMESTAMPTZ' },
  account_metrics: { platform: 'VARCHAR', handle: 'VARCHAR', observed_at: 'TIMESTAMPTZ', followers: 'BIGINT', following: 'BIGINT', posts: 'BIGINT', from_cache: 'BOOLEAN', request_id: 'VARCHAR', run_id: 'VARCHAR' },
  items: { platform: 'VARCHAR', item_id: 'VARCHAR', kind: 'VARCHAR', url: 'VARCHAR', caption: 'VARCHAR', author_handle: 'VARCHAR', posted_at: 'TIMESTAMPTZ', seen_at: 'TIMESTAMPTZ' },
  item_metrics: { platform: 'VARCHAR', item_id: 'VARCHAR', observed_at: 'TIMESTAMPTZ', views: 'BIGINT', likes: 'BIGINT', comments: 'BIGINT', shares: 'BIGINT', from_cache: 'BOOLEAN', source_endpoint: 'VARCHAR', request_id: 'VARCHAR', run_id: 'VARCHAR' },
  comments: { platform: 'VARCHAR', comment_id: 'VARCHAR', item_id: 'VARCHAR', text: 'VARCHAR', author_handle: 'VARCHAR', likes: 'BIGINT', posted_at: 'TIMESTAMPTZ', seen_at: 'TIMESTAMPTZ' },
  search_hits: { platform: 'VARCHAR', query: 'VARCHAR', kind: 'VARCHAR', rank: 'INTEGER', item_id: 'VARCHAR', observed_at: 'TIMESTAMPTZ', request_id: 'VARCHAR', run_id: 'VARCHAR' },
  transcripts: { platform: 'VARCHAR', item_id: 'VARCHAR', language: 'VARCHAR', source: 'VARCHAR', text: 'VARCHAR', fetched_at: 'TIMESTAMPTZ', request_id: 'VARCHAR' },
  transcript_segments: { platform: 'VARCHAR', item_id: 'VARCHAR', seq: 'INTEGER', start_seconds: 'DOUBLE', end_seconds: 'DOUBLE', text: 'VARCHAR' },
  summaries: { platform: 'VARCHAR', item_id: 'VARCHAR', language: 'VARCHAR', summary: 'VARCHAR', fetched_at: 'TIMESTAMPTZ', request_id: 'VARCHAR' },
  downloads: { platform: 'VARCHAR', item_id: 'VARCHAR', media_url: 'VARCHAR', mime_type: 'VARCHAR', expires_at: 'TIMESTAMPTZ', observed_at: 'TIMESTAMPTZ', request_id: 'VARCHAR' },
  api_calls: { request_id: 'VARCHAR', run_id: 'VARCHAR', harvest: 'VARCHAR', target: 'VARCHAR', endpoint: 'VARCHAR', params: 'JSON', units: 'BIGINT', credits: 'BIGINT', cache_status: 'VARCHAR', job_id: 'VARCHAR', called_at: 'TIMESTAMPTZ' },
  harvest_runs: { run_id: 'VARCHAR', harvest: 'VARCHAR', status: 'VARCHAR', seq: 'BIGINT', started_at: 'TIMESTAMPTZ', finished_at: 'TIMESTAMPTZ', budget_credits: 'BIGINT', credits_spent: 'BIGINT', items_landed: 'BIGINT', error: 'VARCHAR' },
};

/** For upserts: take the newer observation's value, falling back to what is known. */
function newer(table: string, column: string, seenColumn = 'last_seen_at'): string {
  return `${column} = CASE WHEN excluded.${seenColumn} >= ${table}.${seenColumn} THEN coalesce(excluded.${column}, ${table}.${column}) ELSE coalesce(${table}.${column}, excluded.${column}) END`;
}
const seenRange = (table: string) =>
  `first_seen_at = least(${table}.first_seen_at, excluded.first_seen_at), last_seen_at = greatest(${table}.last_seen_at, excluded.last_seen_at)`;
/** The latest non-null value of a column within a batch. */
const latest = (column: string, order = 'seen_at') => `arg_max(${column}, ${order}) FILTER (WHERE ${column} IS NOT NULL)`;
/** One row per key within the batch, so an upsert never meets the same key twice. */
const distinctBy = (keys: string) => `QUALIFY row_number() OVER (PARTITION BY ${keys}) = 1`;

/**
 * How each staged table merges into its warehouse table: latest state is upserted (newer
 * observations win), history is appended.
 */
const MERGES: Record<StagedTable, string[]> = {
  accounts: [
    `INSERT INTO accounts SELECT platform, handle, ${latest('name')}, ${latest('bio')}, ${latest('verified')}, ${latest('followers')}, ${latest('following')}, ${latest('posts')}, min(seen_at), max(seen_at)
     FROM stage_accounts GROUP BY platform, handle
     ON CONFLICT (platform, handle) DO UPDATE SET ${['name', 'bio', 'verified', 'followers', 'following', 'posts'].map((column) => newer('accounts', column)).join(', ')}, ${seenRange('accounts')}`,
  ],
  account_metrics: ['INSERT INTO account_metrics SELECT * FROM stage_account_metrics'],
  items: [
    `INSERT INTO items SELECT platform, item_id, any_value(kind), ${latest('url')}, ${latest('caption')}, ${latest('author_handle')}, ${latest('posted_at')}, min(seen_at), max(seen_at)
     FROM stage_items GROUP BY platform, item_id
     ON CONFLICT (platform, item_id) DO UPDATE SET ${['url', 'caption', 'author_handle', 'posted_at'].map((column) => newer('items', column)).join(', ')}, ${seenRange('items')}`,
  ],
  item_metrics: ['INSERT INTO item_metrics SELECT * FROM stage_item_metrics'],
  comments: [
    `INSERT INTO comments SELECT platform, comment_id, any_value(item_id), ${latest('text')}, ${latest('author_handle')}, ${latest('likes')}, ${latest('posted_at')}, min(seen_at), max(seen_at)
     FROM stage_comments GROUP BY platform, comment_id
     ON CONFLICT (platform, comment_id) DO UPDATE SET ${['text', 'author_handle', 'likes', 'posted_at'].map((column) => newer('comments', column)).join(', ')}, ${seenRange('comments')}`,
  ],
  search_hits: ['INSERT INTO search_hits SELECT * FROM stage_search_hits'],
  transcripts: [
    `INSERT INTO transcripts SELECT * FROM stage_transcripts QUALIFY row_number() OVER (PARTITION BY platform, item_id ORDER BY fetched_at DESC) = 1
     ON CONFLICT (platform, item_id) DO UPDATE SET ${['language', 'source', 'text', 'request_id'].map((column) => newer('transcripts', column, 'fetched_at')).join(', ')}, fetched_at = greatest(transcripts.fetched_at, excluded.fetched_at)`,
  ],
  transcript_segments: [
    // A transcript's segments are replaced whole, so a shorter new transcript leaves no stale tail.
    `DELETE FROM transcript_segments WHERE (platform, item_id) IN (SELECT DISTINCT platform, item_id FROM stage_transcript_segments)`,
    `INSERT INTO transcript_segments SELECT * FROM stage_transcript_segments ${distinctBy('platform, item_id, seq')}`,
  ],
  summaries: [
    `INSERT INTO summaries SELECT * FROM stage_summaries QUALIFY row_number() OVER (PARTITION BY platform, item_id ORDER BY fetched_at DESC) = 1
     ON CONFLICT (platform, item_id) DO UPDATE SET ${['language', 'summary', 'request_id'].map((column) => newer('summaries', column, 'fetched_at')).join(', ')}, fetched_at = greatest(summaries.fetched_at, excluded.fetched_at)`,
  ],
  downloads: ['INSERT INTO downloads SELECT * FROM stage_downloads'],
  api_calls: ['INSERT INTO api_calls SELECT * FROM stage_api_calls'],
  harvest_runs: [
    `INSERT INTO harvest_runs SELECT run_id, harvest, status, started_at, finished_at, budget_credits, credits_spent, items_landed, error
     FROM stage_harvest_runs QUALIFY row_number() OVER (PARTITION BY run_id ORDER BY seq DESC) = 1
     ON CONFLICT (run_id) DO UPDATE SET status = excluded.status, finished_at = excluded.finished_at, budget_credits = excluded.budget_credits,
       credits_spent = excluded.credits_spent, items_landed = excluded.items_landed, error = excluded.error`,
  ],
};

/** Loads every landing not loaded yet, then publishes the warehouse for readers. */
export async function loadLandings(dataDir: string, options: LoadOptions = {}): Promise<LoadResult> {
  const started = Date.now();
  const workPath = workDatabasePath(dataDir);
  mkdirSync(join(dataDir, '.loader'), { recursive: true });
  const db = await openWorkDatabase(workPath, options.lockWaitMs ?? 120_000);
  try {
    for (const statement of [...TABLES_DDL, ...VIEWS_DDL]) await db.connection.run(statement);
    const loaded = new Set((await db.connection.runAndReadAll('SELECT landing FROM loaded_landings')).getRows().map((row) => String(row[0])));
    const pending = listLandings(dataDir).filter((key) => !loaded.has(key));
    let rowsLoaded = 0;
    let batches = 0;
    for (const batch of batchesOf(dataDir, pending, options.batchLandings ?? 500, options.batchBytes ?? 16 << 20)) {
      batches++;
      rowsLoaded += await loadBatch(db.connection, dataDir, batch, () => options.beforeCommit?.(batches));
      options.logger?.info({ batch: batches, landings: batch.length }, 'loaded a batch of landings');
      await options.afterBatch?.(batches);
    }
    const published = pending.length > 0 || !existsSync(warehousePath(dataDir));
    if (published) await publish(db.connection, workPath, warehousePath(dataDir));
    return { landingsLoaded: pending.length, rowsLoaded, batches, published, durationMs: Date.now() - started };
  } finally {
    closeDatabase(db);
  }
}

async function loadBatch(connection: DuckDBConnection, dataDir: string, keys: string[], beforeCommit: () => void | Promise<void>): Promise<number> {
  const rows: StagedRows = emptyRows();
  const landed: { key: string; runId: string; rows: number }[] = [];
  for (const key of keys) {
    const landing = readLanding(dataDir, key);
    landed.push({ key, runId: landing.run_id, rows: normalizeLanding(landing, rows) });
  }
  const stagingDir = join(dataDir, '.loader', 'staging');
  rmSync(stagingDir, { recursive: true, force: true });
  mkdirSync(stagingDir, { recursive: true });
  const tables = (Object.keys(rows) as StagedTable[]).filter((table) => rows[table].length > 0);
  for (const table of tables) {
    // NDJSON, read back by DuckDB's JSON reader: parsing in C++ is what makes loads fast.
    writeFileSync(join(stagingDir, `${table}.jsonl`), `${rows[table].map((row) => JSON.stringify(row)).join('\n')}\n`);
  }
  const landingsFile = join(stagingDir, 'loaded_landings.jsonl');
  writeFileSync(landingsFile, `${landed.map((entry) => JSON.stringify({ landing: entry.key, run_id: entry.runId, rows: entry.rows })).join('\n')}\n`);
  await connection.run('BEGIN TRANSACTION');
  try {
    for (const table of tables) {
      const columns = Object.entries(STAGE_COLUMNS[table]).map(([name, type]) => `${name}: '${type}'`).join(', ');
      await connection.run(
        `CREATE OR REPLACE TEMP TABLE stage_${table} AS SELECT * FROM read_json(${sqlString(join(stagingDir, `${table}.jsonl`))}, format = 'newline_delimited', columns = {${columns}})`,
      );
      for (const statement of MERGES[table]) await connection.run(statement);
      await connection.run(`DROP TABLE stage_${table}`);
    }
    await connection.run(
      `INSERT INTO loaded_landings SELECT landing, run_id, rows, now() FROM read_json(${sqlString(landingsFile)}, format = 'newline_delimited', columns = {landing: 'VARCHAR', run_id: 'VARCHAR', rows: 'BIGINT'})`,
    );
    await beforeCommit();
    await connection.run('COMMIT');
  } catch (error) {
    await connection.run('ROLLBACK');
    throw error;
  } finally {
    rmSync(stagingDir, { recursive: true, force: true });
  }
  return landed.reduce((sum, entry) => sum + entry.rows, 0);
}

/** Consecutive batches of landings, each within both the count and the byte bound (at least one landing). */
function batchesOf(dataDir: string, keys: string[], maxLandings: number, maxBytes: number): string[][] {
  const batches: string[][] = [];
  let current: string[] = [];
  let bytes = 0;
  for (const key of keys) {
    const size = statSync(join(landingRoot(dataDir), ...key.split('/'))).size;
    if (current.length > 0 && (current.length >= maxLandings || bytes + size > maxBytes)) {
      batches.push(current);
      current = [];
      bytes = 0;
    }
    current.push(key);
    bytes += size;
  }
  if (current.length > 0) batches.push(current);
  return batches;
}

/** Checkpoints the work database and swaps a copy of it in as the readers' warehouse. */
async function publish(connection: DuckDBConnection, workPath: string, target: string): Promise<void> {
  await connection.run('CHECKPOINT');
  const temporary = `${target}.tmp`;
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
