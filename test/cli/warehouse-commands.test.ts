import { existsSync, mkdtempSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clientFor } from '../support/client.js';
import { runCli } from '../support/cli.js';
import { startTestEmulator, type TestEmulator } from '../support/emulator.js';
import { landSampleHarvest, type SampleExpectation } from '../support/sample-harvest.js';

let emulator: TestEmulator;
let dataDir: string;
let expected: SampleExpectation;
beforeAll(async () => {
  emulator = await startTestEmulator();
  dataDir = mkdtempSync(join(tmpdir(), 'cli-warehouse-'));
  const client = clientFor(emulator);
  expected = await landSampleHarvest(client, emulator, dataDir, 'run-cli');
  await client.close();
});
afterAll(() => emulator.close());

describe('harvester load, query and export', () => {
  it('load, then query as table, CSV and JSON', async () => {
    const env = { HARVESTER_DATA_DIR: dataDir };
    const load = await runCli(['load'], env);
    expect(load.code).toBe(0);
    expect(load.stderr).toContain(`loaded ${expected.landings} landings`);
    const json = await runCli(['query', 'SELECT count(*) AS n FROM items', '--format', 'json'], env);
    expect(JSON.parse(json.stdout)).toEqual([{ n: String(expected.itemIds.size) }]);
    const csv = await runCli(['query', 'SELECT platform, count(*) AS n FROM items GROUP BY platform ORDER BY platform', '--format', 'csv'], env);
    expect(csv.stdout.split('\r\n')[0]).toBe('platform,n');
    const table = await runCli(['query', 'SELECT harvest, status FROM harvest_runs'], env);
    expect(table.stdout).toMatch(/^harvest\s+status\n-+\s+-+\nsample\s+completed\n\(1 row\)\n$/);
  });

  it('the warehouse is read-only to query: a write is refused with a clear message', async () => {
    const result = await runCli(['query', 'DELETE FROM items'], { HARVESTER_DATA_DIR: dataDir });
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/read-only/i);
    const json = await runCli(['query', 'SELECT count(*) AS n FROM items', '--format', 'json'], { HARVESTER_DATA_DIR: dataDir });
    expect(JSON.parse(json.stdout)).toEqual([{ n: String(expected.itemIds.size) }]);
  });

  it('query reads only the warehouse: no file written (not even over the warehouse), none read, no extension installed', async () => {
    const env = { HARVESTER_DATA_DIR: dataDir };
    const warehouse = join(dataDir, 'warehouse.duckdb');
    const size = statSync(warehouse).size;
    const secret = join(dataDir, 'outside.txt');
    writeFileSync(secret, 'not for queries');
    for (const sql of [`COPY (SELECT 'x') TO '${warehouse}'`, `SELECT * FROM read_text('${secret}')`, 'INSTALL httpfs', 'SET enable_external_access = true', `ATTACH '${join(dataDir, 'other.duckdb')}' AS other`]) {
      const result = await runCli(['query', sql], env);
      expect(result.code, sql).toBe(1);
      expect(result.stderr, sql).toMatch(/^harvester: refused: queries read only the warehouse's tables \(/);
      expect(result.stdout, sql).not.toContain('not for queries');
    }
    expect(statSync(warehouse).size).toBe(size);
    expect(existsSync(join(dataDir, 'other.duckdb'))).toBe(false);
    const json = await runCli(['query', 'SELECT count(*) AS n FROM items', '--format', 'json'], env);
    expect(JSON.parse(json.stdout)).toEqual([{ n: String(expected.itemIds.size) }]);
  });

  it('load repairs a published warehouse that was damaged, from the work database', async () => {
    const env = { HARVESTER_DATA_DIR: dataDir };
    writeFileSync(join(dataDir, 'warehouse.duckdb'), 'x\n');
    const broken = await runCli(['query', 'SELECT count(*) AS n FROM items'], env);
    expect(broken.code).toBe(1);
    const load = await runCli(['load'], env);
    expect(load.code).toBe(0);
    const json = await runCli(['query', 'SELECT count(*) AS n FROM items', '--format', 'json'], env);
    expect(JSON.parse(json.stdout)).toEqual([{ n: String(expected.itemIds.size) }]);
  });

  it('export writes hive-partitioned Parquet and lists row counts', async () => {
    const out = join(dataDir, 'parquet');
    const result = await runCli(['export', '--out', out], { HARVESTER_DATA_DIR: dataDir });
    expect(result.code).toBe(0);
    expect(result.stdout).toContain(`items\t${expected.itemIds.size}`);
    expect(existsSync(join(out, 'items', 'platform=tiktok'))).toBe(true);
  });

  it('with no warehouse yet, query says so', async () => {
    const result = await runCli(['query', 'SELECT 1'], { HARVESTER_DATA_DIR: mkdtempSync(join(tmpdir(), 'empty-')) });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('no warehouse at');
  });
});
