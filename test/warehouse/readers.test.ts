import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exportParquet } from '../../src/warehouse/export.js';
import { loadLandings } from '../../src/warehouse/loader.js';
import { readerSql } from '../../src/warehouse/lake.js';
import { queryWarehouse } from '../../src/warehouse/query.js';
import { clientFor } from '../support/client.js';
import { startTestEmulator, waitFor, type TestEmulator } from '../support/emulator.js';
import { runPython, TEST_PYTHON_DIR } from '../support/python.js';
import { landSampleHarvest } from '../support/sample-harvest.js';

let emulator: TestEmulator;
beforeAll(async () => {
  emulator = await startTestEmulator();
});
afterAll(() => emulator.close());

/**
 * A reader in another process (Python's duckdb), as a notebook holds one: a single connection,
 * opened once, that queries in a loop and prints each new count of observations it sees.
 */
const READER = `
import duckdb, os, sys, time
attach, stop = sys.argv[1], sys.argv[2]
con = duckdb.connect()
con.execute(attach)
queries = errors = 0
last = None
while not os.path.exists(stop):
    try:
        count = con.execute('select count(*) from item_metrics').fetchone()[0]
        queries += 1
        if count != last:
            print('count', count, flush=True)
            last = count
    except Exception as error:
        errors += 1
        print('ERROR', error, file=sys.stderr, flush=True)
    time.sleep(0.005)
print('done', queries, errors, flush=True)
`;

describe('readers of the warehouse', () => {
  it('a long-lived connection in another process queries through 10 loads without an error, and sees each load without reconnecting', { tags: ['long'], timeout: 180_000 }, async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'readers-'));
    const client = clientFor(emulator);
    let total = (await landSampleHarvest(client, emulator, dataDir, 'run-0')).metricRows;
    await loadLandings(dataDir);
    const stop = join(dataDir, 'stop');
    const reader = spawn('python3', ['-c', READER, readerSql(dataDir), stop], { env: { ...process.env, PYTHONPATH: TEST_PYTHON_DIR } });
    let out = '';
    let err = '';
    reader.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    reader.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
    const seen = (count: number) => out.split('\n').includes(`count ${count}`);
    await waitFor(() => (seen(total) ? true : undefined), 30_000, 'the reader to read the first load');
    for (let run = 1; run <= 10; run++) {
      total += (await landSampleHarvest(client, emulator, dataDir, `run-${run}`, { fresh: true })).metricRows;
      const load = await loadLandings(dataDir);
      expect(load.landingsLoaded).toBeGreaterThan(0);
      // The same connection, still open, sees this load's rows on one of its next queries.
      await waitFor(() => (seen(total) ? true : undefined), 10_000, `the reader to see load ${run} (${total} observations)`);
    }
    writeFileSync(stop, '');
    const code = await new Promise((resolve) => reader.once('exit', resolve));
    await client.close();
    expect(err).toBe('');
    expect(code).toBe(0);
    const [, queries, errors] = out.trim().split('\n').at(-1)!.split(' ');
    expect(Number(errors)).toBe(0);
    expect(Number(queries)).toBeGreaterThan(10);
    // Every count it saw was a whole load's: never half a batch.
    const counts = out.split('\n').filter((line) => line.startsWith('count ')).map((line) => Number(line.slice(6)));
    expect(counts.length).toBe(11);
  });

  it('a Parquet export, partitioned by platform and date, reads back in Python with the same row counts', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'export-'));
    const client = clientFor(emulator);
    await landSampleHarvest(client, emulator, dataDir, 'run-x');
    await client.close();
    await loadLandings(dataDir);
    const out = join(dataDir, 'export');
    const result = await exportParquet(dataDir, out);
    expect(readdirSync(join(out, 'item_metrics')).sort()).toEqual(['platform=instagram', 'platform=tiktok']);
    expect(readdirSync(join(out, 'item_metrics', 'platform=tiktok'))[0]).toMatch(/^date=\d{4}-\d{2}-\d{2}$/);
    const script = `
import duckdb, json, sys, pyarrow.dataset as ds
out, tables = sys.argv[1], json.loads(sys.argv[2])
counts = {}
for table in tables:
    counts[table] = duckdb.sql(f"select count(*) from read_parquet('{out}/{table}/**/*.parquet', hive_partitioning = true)").fetchone()[0]
arrow = ds.dataset(f"{out}/item_metrics", format="parquet", partitioning="hive").to_table()
print(json.dumps({"duckdb": counts, "arrow_item_metrics": arrow.num_rows, "arrow_columns": arrow.column_names}))`;
    const exported = Object.entries(result.tables).filter(([, rows]) => rows > 0).map(([table]) => table);
    const python = runPython(script, [out, JSON.stringify(exported)]);
    expect(python.stderr).toBe('');
    const read = JSON.parse(python.stdout) as { duckdb: Record<string, number>; arrow_item_metrics: number; arrow_columns: string[] };
    for (const table of exported) expect(read.duckdb[table], table).toBe(result.tables[table]);
    const warehouseCount = Number(Object.values((await queryWarehouse(dataDir, 'SELECT count(*) FROM item_metrics')).rows[0]!)[0]);
    expect(read.arrow_item_metrics).toBe(warehouseCount);
    expect(read.arrow_columns).toEqual(expect.arrayContaining(['item_id', 'views', 'platform', 'date']));
  });
});
