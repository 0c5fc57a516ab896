import { mkdirSync, readdirSync, renameSync, rmSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import type { DuckDBConnection } from '@duckdb/node-api';
import { scalarOf, sqlIdentifier, sqlString, tableNames } from './duckdb.js';
import { LAKE, latestSnapshot, openLake, type LakeConnection } from './lake.js';

/**
 * How each table is partitioned on export: hive-style by platform and date, the date being the UTC
 * day of a column that says when the harvester had the row: when it observed it (observations,
 * search hits, calls), fetched it, or first saw it (latest-state tables). Not `posted_at`: items
 * and comments posted over years made a partition, and a file of a few rows, per day of posting
 * (~2,000 items became 391 files). Tables without a platform of their own derive it (api calls) or
 * go by date alone (harvest runs); transcript segments go by platform alone.
 */
const PARTITIONS: Record<string, { platform?: string; date?: string }> = {
  accounts: { platform: 'platform', date: 'first_seen_at' },
  account_metrics: { platform: 'platform', date: 'observed_at' },
  items: { platform: 'platform', date: 'first_seen_at' },
  item_metrics: { platform: 'platform', date: 'observed_at' },
  comments: { platform: 'platform', date: 'first_seen_at' },
  search_hits: { platform: 'platform', date: 'observed_at' },
  transcripts: { platform: 'platform', date: 'fetched_at' },
  transcript_segments: { platform: 'platform' },
  summaries: { platform: 'platform', date: 'fetched_at' },
  downloads: { platform: 'platform', date: 'observed_at' },
  api_calls: { platform: "split_part(endpoint, '/', 1)", date: 'called_at' },
  harvest_runs: { date: 'started_at' },
  failed_calls: { platform: "split_part(endpoint, '/', 1)", date: 'failed_at' },
};

/** The tables `harvester export` writes, in order (every table but the loader's bookkeeping). */
export const EXPORTED_TABLES = Object.keys(PARTITIONS);

/** A partition's file is split into files of about this size once it is half as big again. */
export const TARGET_FILE_BYTES = 64 * 1024 * 1024;

/** The file an empty table's directory holds: no rows, the table's columns. */
export const EMPTY_TABLE_FILE = 'data_0.parquet';

export interface ExportOptions {
  /** Size of the files a large partition is split into (TARGET_FILE_BYTES). */
  targetFileBytes?: number;
  /** The lake's snapshot to export (`ducklake_snapshots`), instead of the latest. */
  snapshot?: number;
}

export interface ExportResult {
  directory: string;
  /** Rows per table. */
  tables: Record<string, number>;
  /** Parquet files per table. */
  files: Record<string, number>;
  /** The lake's snapshot that every table was exported from. */
  snapshot: number;
}

function parquetFiles(dir: string): string[] {
  const files: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) files.push(...parquetFiles(path));
    else if (entry.name.endsWith('.parquet')) files.push(path);
  }
  return files.sort();
}

/**
 * What a table exports: its columns, JSON ones as text (Parquet readers took DuckDB's JSON for
 * binary: polars read `params` as Binary), and the partition columns it lacks.
 */
async function exportSelect(connection: DuckDBConnection, table: string, partition: { platform?: string; date?: string }): Promise<string> {
  const reader = await connection.runAndReadAll(`SELECT column_name, data_type FROM information_schema.columns WHERE table_catalog = ${sqlString(LAKE)} AND table_name = ${sqlString(table)} ORDER BY ordinal_position`);
  const columns = (reader.getRows() as [string, string][]).map(([name, type]) => (type === 'JSON' ? `CAST(${sqlIdentifier(name)} AS VARCHAR) AS ${sqlIdentifier(name)}` : sqlIdentifier(name)));
  const extra = [
    ...(partition.platform && partition.platform !== 'platform' ? [`${partition.platform} AS platform`] : []),
    // Dates are UTC days, whatever the session's time zone.
    ...(partition.date ? [`CAST(timezone('UTC', ${partition.date}) AS DATE) AS date`] : []),
  ];
  return `SELECT ${[...columns, ...extra].join(', ')} FROM ${sqlIdentifier(table)}`;
}

/**
 * Splits a partition's file that grew beyond half as big again as the target into files of about
 * the target size, in the same directory. DuckDB writes one file per partition, and cannot rotate
 * files while it partitions.
 */
async function splitLargeFile(connection: DuckDBConnection, file: string, targetBytes: number, scratch: string): Promise<number> {
  rmSync(scratch, { recursive: true, force: true });
  // hive_partitioning off: the file's own columns, not the partition's path read back as columns.
  await connection.run(`COPY (SELECT * FROM read_parquet(${sqlString(file)}, hive_partitioning = false)) TO ${sqlString(scratch)} (FORMAT parquet, FILE_SIZE_BYTES ${targetBytes})`);
  // DuckDB may end a rotation with a file of no rows: it is dropped.
  const parts: string[] = [];
  for (const part of parquetFiles(scratch)) {
    const rows = await scalarOf(connection, `SELECT num_rows FROM parquet_file_metadata(${sqlString(part)})`);
    if (rows > 0) parts.push(part);
  }
  rmSync(file);
  for (const [index, part] of parts.entries()) renameSync(part, join(dirname(file), `data_${index}.parquet`));
  rmSync(scratch, { recursive: true, force: true });
  return parts.length;
}

/** The lake read-only at `snapshot` (the latest when undefined), or an error naming the snapshots it has. */
async function openSnapshot(dataDir: string, snapshot: number | undefined): Promise<LakeConnection> {
  try {
    return await openLake(dataDir, 'read', { snapshot });
  } catch (error) {
    if (snapshot === undefined || !/snapshot/i.test((error as Error).message)) throw error;
    const latest = await openLake(dataDir, 'read');
    try {
      throw new Error(`the warehouse has no snapshot ${snapshot}: its snapshots run up to ${await latestSnapshot(latest.connection)} (older ones expire with harvester maintain)`, { cause: error });
    } finally {
      await latest.close();
    }
  }
}

/**
 * Writes every table as Parquet under `outDir/<table>/platform=…/date=…/`, replacing earlier
 * exports: one file per partition, or files of about `targetFileBytes` for a partition larger
 * than that. Every table gets its directory, an empty one a file with its columns and no rows, so
 * a reader globbing `<table>/**\/*.parquet` finds its schema.
 */
export async function exportParquet(dataDir: string, outDir: string, options: ExportOptions = {}): Promise<ExportResult> {
  const targetBytes = options.targetFileBytes ?? TARGET_FILE_BYTES;
  const directory = resolve(outDir);
  mkdirSync(directory, { recursive: true });
  const db = await openSnapshot(dataDir, options.snapshot);
  const tables: Record<string, number> = {};
  const files: Record<string, number> = {};
  let snapshot: number;
  try {
    // One transaction reads one snapshot of the lake: a load that commits meanwhile is not half in the export.
    await db.connection.run('BEGIN TRANSACTION');
    snapshot = options.snapshot ?? (await latestSnapshot(db.connection));
    // A snapshot from before a table was added has no such table: there is nothing of it to export.
    const existing = await tableNames(db.connection, LAKE);
    for (const [table, partition] of Object.entries(PARTITIONS).filter(([name]) => existing.has(name))) {
      const tableDir = join(directory, table);
      rmSync(tableDir, { recursive: true, force: true });
      const select = await exportSelect(db.connection, table, partition);
      const count = await scalarOf(db.connection, `SELECT count(*) FROM ${sqlIdentifier(table)}`);
      tables[table] = count;
      if (count === 0) {
        mkdirSync(tableDir, { recursive: true });
        await db.connection.run(`COPY (${select} LIMIT 0) TO ${sqlString(join(tableDir, EMPTY_TABLE_FILE))} (FORMAT parquet)`);
        files[table] = 1;
        continue;
      }
      const by = [...(partition.platform ? ['platform'] : []), ...(partition.date ? ['date'] : [])];
      await db.connection.run(`COPY (${select}) TO ${sqlString(tableDir)} (FORMAT parquet, PARTITION_BY (${by.join(', ')}))`);
      let written = 0;
      for (const file of parquetFiles(tableDir)) {
        written += statSync(file).size > targetBytes * 1.5 ? await splitLargeFile(db.connection, file, targetBytes, join(directory, `.split-${table}`)) : 1;
      }
      files[table] = written;
    }
    await db.connection.run('COMMIT');
  } finally {
    await db.close();
  }
  return { directory, tables, files, snapshot };
}
