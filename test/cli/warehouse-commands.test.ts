import { existsSync, mkdtempSync } from 'node:fs';
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
