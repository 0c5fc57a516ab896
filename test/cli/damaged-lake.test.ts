/**
 * A lake whose catalog names a torn data file (made by hand: the power loss of an older version, or
 * a disk fault) is reported by `harvester query` and `harvester maintain` with the file and its
 * table named, and `maintain` repairs it from the raw answers, which are whole.
 */
import { mkdtempSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { lakeDataFolder } from '../../src/store/layout.js';
import { openLake } from '../../src/warehouse/lake.js';
import { referencedLakeFiles } from '../../src/warehouse/lake-health.js';
import { runCli } from '../support/cli.js';
import { startTestEmulator, type TestEmulator } from '../support/emulator.js';
import { landedSample } from '../support/sample-harvest.js';

// A torn file needs a file: every insert writes one (no rows inlined in the catalog; lake.ts, inliningRowLimit).
process.env.HARVESTER_LAKE_INLINE_ROWS = '0';

let emulator: TestEmulator;
beforeAll(async () => {
  emulator = await startTestEmulator();
});
afterAll(() => emulator.close());

async function dataFileOf(dataDir: string, table: string): Promise<string> {
  const lake = await openLake(dataDir, 'read');
  try {
    return (await referencedLakeFiles(lake.connection, `${lakeDataFolder(dataDir)}/`)).find((file) => file.table === table && file.kind === 'data')!.path;
  } finally {
    await lake.close();
  }
}

describe('a torn data file of the lake', () => {
  it('query names the file and table and refuses to guess; maintain names them, rebuilds the table from the raw answers, and query answers again', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'cli-torn-'));
    const { expected } = await landedSample(emulator, 'run-cli-torn', dataDir);
    const env = { HARVESTER_DATA_DIR: dataDir, HARVESTER_LAKE_INLINE_ROWS: '0' };
    expect((await runCli(['load'], env)).code).toBe(0);
    const file = await dataFileOf(dataDir, 'item_metrics');
    truncateSync(file, statSync(file).size - 100);

    const query = await runCli(['query', 'SELECT count(*) AS n FROM items', '--format', 'json'], env);
    expect(query.code).not.toBe(0);
    expect(query.stderr).toContain(`table item_metrics: data file ${file} is `);
    expect(query.stderr).toContain('harvester maintain');

    const maintain = await runCli(['maintain'], env);
    expect(maintain.code).toBe(0);
    expect(maintain.stderr).toContain(`table item_metrics: data file ${file} was `);
    expect(maintain.stderr).toContain('rebuilt from them');
    expect(maintain.stderr).not.toContain('LOST');

    const again = await runCli(['query', 'SELECT count(*) AS n FROM item_metrics', '--format', 'json'], env);
    expect(again.code).toBe(0);
    expect(JSON.parse(again.stdout)).toEqual([{ n: expected.metricRows }]);
  });

  it('harvester run repairs a torn file before it reads the lake, and its output and `harvester show` name the file, the table and what was repaired', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cli-torn-run-'));
    const dataDir = join(dir, 'data');
    const config = join(dir, 'harvests.yaml');
    const handle = (await emulator.catalog()).tiktok.handles[2]!;
    writeFileSync(config, `harvests:\n  - name: torn\n    budget: { credits: 100000 }\n    enrich: { stats: true }\n    channels:\n      - { platform: tiktok, handle: ${handle}, content: videos, max_items: 5 }\n`);
    const env = { HARVESTER_DATA_DIR: dataDir, TEMPORAL_ADDRESS: inject('temporalAddress'), SOCIAL_API_BASE_URL: emulator.baseUrl, SOCIAL_API_KEY: emulator.apiKey, LOG_LEVEL: 'error' };
    const first = await runCli(['run', 'torn', '--config', config], env);
    expect(first.code, first.stderr).toBe(0);
    const file = await dataFileOf(dataDir, 'items');
    truncateSync(file, Math.floor(statSync(file).size / 3));

    const second = await runCli(['run', 'torn', '--config', config], env);
    expect(second.code, second.stderr).toBe(0);
    expect(second.stdout).toContain(`warehouse: table items: data file ${file} was `);
    expect(second.stdout).toContain('warehouse: the tables derived from the raw answers were rebuilt from them');
    expect(second.stdout).not.toContain('LOST');
    const runId = /^run (\S+) of torn/m.exec(second.stdout)![1]!;
    const show = await runCli(['show', runId], env);
    expect(show.code, show.stderr).toBe(0);
    expect(show.stdout).toContain(`lake:     table items: data file ${file} was `);
    const items = await runCli(['query', 'SELECT count(*) AS n FROM items', '--format', 'json'], env);
    expect(JSON.parse(items.stdout)).toEqual([{ n: 5 }]);
  });

  it('a torn raw_answers file: maintain reports its rows as lost, with their count', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'cli-torn-raw-'));
    const { expected } = await landedSample(emulator, 'run-cli-torn-raw', dataDir);
    const env = { HARVESTER_DATA_DIR: dataDir, HARVESTER_LAKE_INLINE_ROWS: '0' };
    expect((await runCli(['load'], env)).code).toBe(0);
    truncateSync(await dataFileOf(dataDir, 'raw_answers'), 0);
    const maintain = await runCli(['maintain'], env);
    expect(maintain.code).toBe(0);
    expect(maintain.stderr).toContain(`LOST: ${expected.landings} rows of raw_answers`);
  });
});
