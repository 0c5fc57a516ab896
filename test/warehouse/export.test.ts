/**
 * The Parquet export, read by an outside reader (Python's pyarrow and duckdb): every table has a
 * directory readable as a dataset, an empty one included, with its schema; files are few (one per
 * partition, or files of about the target size for a large partition); JSON columns are text.
 */
import { mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { landingOfCall } from '../../activities/page-landing.js';
import { closeDatabase, openDatabase } from '../../src/warehouse/duckdb.js';
import { EXPORTED_TABLES, exportParquet } from '../../src/warehouse/export.js';
import { loadLandings } from '../../src/warehouse/loader.js';
import { openLake } from '../../src/warehouse/lake.js';
import { TABLES_DDL } from '../../src/warehouse/schema.js';
import { clientFor } from '../support/client.js';
import { startTestEmulator, type TestEmulator } from '../support/emulator.js';
import { runPython } from '../support/python.js';
import { landSampleHarvest } from '../support/sample-harvest.js';
import { landAnswer } from '../support/landed.js';

let emulator: TestEmulator;
beforeAll(async () => {
  emulator = await startTestEmulator();
});
afterAll(() => emulator.close());

interface ReadTable {
  /** Rows read as a pyarrow dataset (hive partitioning). */
  rows: number;
  /** Rows read by duckdb over the glob `<table>/**\/*.parquet`. */
  globRows: number;
  columns: string[];
  types: Record<string, string>;
  /** Parquet logical type of each column, over all the table's files. */
  logical: Record<string, string[]>;
  files: string[];
  /** Rows of each file, in the order of `files`. */
  fileRows: number[];
}

/** Every table of the export read from outside: pyarrow datasets, duckdb globs, the Parquet schemas. */
const READ_EXPORT = `
import duckdb, glob, json, os, sys
import pyarrow.dataset as ds, pyarrow.parquet as pq
out, tables = sys.argv[1], json.loads(sys.argv[2])
result = {}
for table in tables:
    root = os.path.join(out, table)
    dataset = ds.dataset(root, format="parquet", partitioning="hive")
    read = dataset.to_table()
    files = sorted(glob.glob(os.path.join(root, "**", "*.parquet"), recursive=True))
    logical = {}
    for file in files:
        schema = pq.ParquetFile(file).schema
        for i in range(len(schema)):
            column = schema.column(i)
            logical.setdefault(column.name, [])
            if str(column.logical_type) not in logical[column.name]:
                logical[column.name].append(str(column.logical_type))
    glob_rows = duckdb.sql(f"select count(*) from read_parquet('{root}/**/*.parquet', hive_partitioning = true)").fetchone()[0]
    result[table] = {"rows": read.num_rows, "globRows": glob_rows, "columns": read.column_names, "types": {field.name: str(field.type) for field in dataset.schema},
                     "logical": logical, "files": [os.path.relpath(file, root) for file in files],
                     "fileRows": [pq.ParquetFile(file).metadata.num_rows for file in files]}
print(json.dumps(result))`;

function readExport(out: string): Record<string, ReadTable> {
  const python = runPython(READ_EXPORT, [out, JSON.stringify(EXPORTED_TABLES)]);
  expect(python.stderr).toBe('');
  expect(python.code).toBe(0);
  return JSON.parse(python.stdout) as Record<string, ReadTable>;
}

/** Each table's own columns, from the schema. */
async function tableColumns(): Promise<Map<string, string[]>> {
  const db = await openDatabase(':memory:');
  try {
    for (const statement of TABLES_DDL) await db.connection.run(statement);
    const rows = (await db.connection.runAndReadAll('SELECT table_name, column_name FROM information_schema.columns ORDER BY table_name, ordinal_position')).getRows() as [string, string][];
    const columns = new Map<string, string[]>();
    for (const [table, column] of rows) columns.set(table, [...(columns.get(table) ?? []), column]);
    return columns;
  } finally {
    closeDatabase(db);
  }
}

async function scalar(dataDir: string, sql: string): Promise<number> {
  const db = await openLake(dataDir, 'read');
  try {
    return Number((await db.connection.runAndReadAll(sql)).getRows()[0]![0]);
  } finally {
    await db.close();
  }
}

describe('harvester export', () => {
  it('gives every table a directory an outside reader opens as a dataset, an empty table its schema and no rows', async () => {
    // One listing page: items, their metrics and the call; every other table stays empty.
    const dataDir = mkdtempSync(join(tmpdir(), 'export-empty-'));
    const client = clientFor(emulator);
    const handle = (await emulator.catalog()).tiktok.handles[4]!;
    const page = await client.page('tiktok', 'channel-videos', { handle, limit: 20 });
    await landAnswer(dataDir, landingOfCall({ runId: 'run-one-page', harvest: 'one-page', target: `channel:tiktok:${handle}:videos`, page: 1, params: { handle } }, page, page.items));
    await client.close();
    await loadLandings(dataDir);
    const out = join(dataDir, 'export');
    const result = await exportParquet(dataDir, out);

    expect(readdirSync(out).sort()).toEqual([...EXPORTED_TABLES].sort());
    const read = readExport(out);
    const columns = await tableColumns();
    const empty = EXPORTED_TABLES.filter((table) => result.tables[table] === 0);
    expect(empty).toEqual(expect.arrayContaining(['accounts', 'comments', 'transcripts', 'transcript_segments', 'harvest_runs']));
    for (const table of EXPORTED_TABLES) {
      expect(read[table]!.rows, table).toBe(result.tables[table]);
      expect(read[table]!.globRows, table).toBe(result.tables[table]);
      // The table's columns, and the partition columns a partitioned export reads back as columns.
      expect(read[table]!.columns, table).toEqual(expect.arrayContaining(columns.get(table)!));
    }
    for (const table of empty) {
      expect(read[table]!.files, table).toEqual(['data_0.parquet']);
      expect(result.files[table], table).toBe(1);
    }
    expect(read.accounts!.columns).toEqual([...columns.get('accounts')!, 'date']);
    expect(read.transcript_segments!.columns).toEqual(columns.get('transcript_segments'));
    expect(read.harvest_runs!.columns).toEqual([...columns.get('harvest_runs')!, 'date']);
    expect(read.items!.rows).toBe(20);
  });

  it('writes one file per platform and day, however many days the items were posted on, and JSON columns as text', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'export-files-'));
    const client = clientFor(emulator);
    await landSampleHarvest(client, emulator, dataDir, 'run-files');
    await client.close();
    await loadLandings(dataDir);
    const postedDays = await scalar(dataDir, "SELECT count(DISTINCT (platform, CAST(timezone('UTC', posted_at) AS DATE))) FROM items");
    // The items were posted over many days: one file per day of posting was a file of a few rows each.
    expect(postedDays).toBeGreaterThan(20);
    const out = join(dataDir, 'export');
    const result = await exportParquet(dataDir, out);
    const read = readExport(out);

    for (const table of EXPORTED_TABLES) {
      expect(read[table]!.rows, table).toBe(result.tables[table]);
      expect(read[table]!.globRows, table).toBe(result.tables[table]);
      expect(read[table]!.files.length, table).toBe(result.files[table]);
      // One file per partition directory.
      const directories = read[table]!.files.map((file) => file.split('/').slice(0, -1).join('/'));
      expect(new Set(directories).size, table).toBe(directories.length);
      // No JSON, no binary: every text column is a UTF-8 string.
      for (const [column, logical] of Object.entries(read[table]!.logical)) expect(logical, `${table}.${column}`).not.toContain('JSON');
      for (const [column, type] of Object.entries(read[table]!.types)) expect(type, `${table}.${column}`).not.toMatch(/binary/);
    }
    const itemPartitions = await scalar(dataDir, "SELECT count(DISTINCT (platform, CAST(timezone('UTC', first_seen_at) AS DATE))) FROM items");
    expect(read.items!.files).toHaveLength(itemPartitions);
    expect(itemPartitions).toBeLessThanOrEqual(4);
    expect(read.api_calls!.types.params).toBe('string');
    expect(read.api_calls!.logical.params).toEqual(['String']);
    const params = runPython(
      `import json, sys, pyarrow.dataset as ds\nprint(json.dumps(ds.dataset(sys.argv[1], format="parquet", partitioning="hive").to_table(columns=["params"]).column("params").to_pylist()[0]))`,
      [join(out, 'api_calls')],
    );
    expect(JSON.parse(JSON.parse(params.stdout) as string)).toEqual(expect.any(Object));
  });

  it('splits a partition larger than the target into files of about the target size, and replaces an earlier export', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'export-large-'));
    const client = clientFor(emulator);
    await landSampleHarvest(client, emulator, dataDir, 'run-large');
    await client.close();
    await loadLandings(dataDir);
    const out = join(dataDir, 'export');
    await exportParquet(dataDir, out);
    // 300,000 more observations today, on one platform: a partition of several MB.
    const db = await openLake(dataDir, 'write');
    try {
      await db.connection.run(
        "INSERT INTO item_metrics SELECT 'tiktok', (7000000000000000000 + i)::VARCHAR, now(), i * 7, i * 3, i, i % 100, false, 'tiktok/stats', 'req_' || md5(i::VARCHAR), 'run-large' FROM range(300000) r(i)",
      );
    } finally {
      await db.close();
    }
    const target = 1 << 20;
    const result = await exportParquet(dataDir, out, { targetFileBytes: target });
    const read = readExport(out);
    expect(read.item_metrics!.rows).toBe(result.tables.item_metrics);
    expect(read.item_metrics!.globRows).toBe(result.tables.item_metrics);
    const large = read.item_metrics!.files.filter((file) => file.startsWith('platform=tiktok/'));
    expect(large.length).toBeGreaterThan(1);
    expect(large.length).toBeLessThanOrEqual(10);
    expect(large.every((file) => /^platform=tiktok\/date=\d{4}-\d{2}-\d{2}\/data_\d+\.parquet$/.test(file))).toBe(true);
    // Every file holds rows: none is left empty by the split.
    expect(read.item_metrics!.fileRows.every((rows) => rows > 0)).toBe(true);
    // Small partitions keep one file each.
    const small = read.item_metrics!.files.filter((file) => file.startsWith('platform=instagram/'));
    expect(small).toHaveLength(new Set(small.map((file) => file.split('/').slice(0, -1).join('/'))).size);
    // Nothing of the earlier export is left beside the new one.
    expect(readdirSync(out).sort()).toEqual([...EXPORTED_TABLES].sort());
  });
});
