import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { lakeCatalogFile, lakeDataFolder } from '../../src/store/layout.js';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXPORTED_TABLES } from '../../src/warehouse/export.js';
import { extensionFile } from '../../src/warehouse/extension-files.js';
import type { PageLanding } from '../../src/store/landing.js';
import { landAnswer, landedKeys, landedLanding } from '../support/landed.js';
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
    expect(JSON.parse(json.stdout)).toEqual([{ n: expected.itemIds.size }]);
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
    expect(JSON.parse(json.stdout)).toEqual([{ n: expected.itemIds.size }]);
  });

  it('query reads only the warehouse: no file written (not even over the warehouse), none read, no database attached, no extension installed or loaded, no setting changed', async () => {
    const env = { HARVESTER_DATA_DIR: dataDir };
    const catalog = lakeCatalogFile(dataDir);
    const catalogBytes = readFileSync(catalog);
    const dataFile = join(lakeDataFolder(dataDir), 'overwritten.parquet');
    const secret = join(dataDir, 'outside.txt');
    writeFileSync(secret, 'not for queries');
    const other = join(dataDir, 'other.duckdb');
    const refusals: [string, string][] = [
      [`COPY (SELECT 'x') TO '${catalog}'`, 'the query would write a file'],
      [`COPY (SELECT 'x') TO '${dataFile}'`, 'the query would write a file'],
      [`SELECT * FROM read_text('${secret}')`, `the query would read or write the file ${secret}`],
      [`ATTACH '${other}' AS other`, 'the query would attach a database'],
      // The lake's own catalog, read-write, would let a query drop the warehouse's tables.
      [`ATTACH 'ducklake:sqlite:${catalog}' AS writable; DROP TABLE writable.items`, 'the query would attach a database'],
      // DuckLake's maintenance writes and deletes the lake's files, even with the lake attached read-only;
      // by name, or by a name built at run time.
      ["SELECT * FROM ducklake_cleanup_old_files('lake', cleanup_all => true)", 'the query would change the lake (ducklake_cleanup_old_files; harvester maintain does that)'],
      ["SELECT * FROM query('SELECT * FROM ducklake_' || 'cleanup_old_files(''lake'', cleanup_all => true)')", 'the query would change the lake (ducklake_cleanup_old_files; harvester maintain does that)'],
      ["EXPLAIN ANALYZE SELECT * FROM ducklake_expire_snapshots('lake', older_than => now())", 'EXPLAIN ANALYZE runs the query; plain EXPLAIN shows its plan'],
      ['SELECT 1; SELECT 2', 'the query has 2 statements: run one at a time'],
      ['CHECKPOINT lake', 'the query would call a procedure (CALL, CHECKPOINT); for a table function, SELECT * FROM it'],
      ['INSTALL httpfs', 'the query would install an extension'],
      ['LOAD httpfs', 'the query would load an extension'],
      // The sandbox's DuckDB skips the signatures of extension files it already checked (extension-files.ts): no LOAD by path either.
      [`LOAD '${extensionFile('httpfs')}'`, 'the query would load an extension'],
      ['SET enable_external_access = true', 'the query would change the setting enable_external_access'],
    ];
    for (const [sql, refused] of refusals) {
      const result = await runCli(['query', sql], env);
      expect(result.code, sql).toBe(1);
      // One line that says what was refused, and why.
      expect(result.stderr, sql).toMatch(/^harvester: refused: [^\n]*\n$/);
      expect(result.stderr, sql).toContain(`refused: ${refused}; queries read only the warehouse's tables`);
      expect(result.stdout, sql).not.toContain('not for queries');
    }
    expect(readFileSync(catalog).equals(catalogBytes)).toBe(true);
    expect(existsSync(other)).toBe(false);
    expect(existsSync(dataFile)).toBe(false);
    const json = await runCli(['query', 'SELECT count(*) AS n FROM items', '--format', 'json'], env);
    expect(JSON.parse(json.stdout)).toEqual([{ n: expected.itemIds.size }]);
  });

  it('export --snapshot writes the warehouse as an earlier load left it; maintain merges the small files of many loads and expires old snapshots; the data stays the same', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cli-maintain-'));
    // Small files to merge: every load's insert writes one (no rows kept in the catalog; lake.ts, inliningRowLimit).
    const env = { HARVESTER_DATA_DIR: dir, HARVESTER_LAKE_INLINE_ROWS: '0' };
    const client = clientFor(emulator);
    let observations = 0;
    const loads: { snapshot: number; observations: number }[] = [];
    for (let run = 0; run < 4; run++) {
      observations += (await landSampleHarvest(client, emulator, dir, `run-m${run}`, { fresh: true })).metricRows;
      const load = await runCli(['load'], env);
      expect(load.code).toBe(0);
      loads.push({ snapshot: Number(/ at snapshot (\d+)$/m.exec(load.stderr)![1]), observations });
    }
    await client.close();
    // Time travel: the first load's snapshot has the first run's observations only.
    const past = await runCli(['export', '--out', join(dir, 'past'), '--snapshot', String(loads[0]!.snapshot)], env);
    expect(past.code, past.stderr).toBe(0);
    expect(past.stdout).toContain(`item_metrics\t${loads[0]!.observations}\n`);
    expect(past.stderr).toContain(`(snapshot ${loads[0]!.snapshot})`);
    const future = await runCli(['export', '--out', join(dir, 'future'), '--snapshot', '9999'], env);
    expect(future.code).toBe(1);
    expect(future.stderr).toContain(`the warehouse has no snapshot 9999: its snapshots run up to ${loads[3]!.snapshot}`);
    const count = async () => JSON.parse((await runCli(['query', 'SELECT count(*) AS n FROM item_metrics', '--format', 'json'], env)).stdout) as unknown;
    expect(await count()).toEqual([{ n: observations }]);
    // Only maintain merges them: a query that would is refused, and writes no file.
    const merging = await runCli(['query', "SELECT * FROM ducklake_merge_adjacent_files('lake')"], env);
    expect(merging.code).toBe(1);
    expect(merging.stderr).toContain('refused: the query would change the lake (ducklake_compaction; harvester maintain does that)');
    const maintain = await runCli(['maintain', '--keep-hours', '0'], env);
    expect(maintain.code, maintain.stderr).toBe(0);
    const [, filesBefore, filesAfter, snapshotsBefore, snapshotsAfter] = /^data files (\d+) -> (\d+); snapshots (\d+) -> (\d+);/.exec(maintain.stderr)!.map(Number);
    expect(filesAfter).toBeLessThan(filesBefore!);
    expect(snapshotsAfter).toBeLessThan(snapshotsBefore!);
    expect(await count()).toEqual([{ n: observations }]);
    // The merged-away files stay on disk until the next maintenance (a query on an old snapshot may be reading them).
    const onDisk = () => readdirSync(lakeDataFolder(dir), { recursive: true, withFileTypes: true }).filter((entry) => entry.isFile()).length;
    const kept = onDisk();
    expect(kept).toBeGreaterThan(filesAfter!);
    const again = await runCli(['maintain', '--keep-hours', '0'], env);
    const deleted = Number(/; (\d+) unread files deleted;/.exec(again.stderr)![1]);
    expect(deleted).toBeGreaterThan(0);
    expect(onDisk()).toBe(kept - deleted);
    expect(await count()).toEqual([{ n: observations }]);
    // Expired: the first load's snapshot is gone; the latest stays.
    const expired = await runCli(['export', '--out', join(dir, 'past'), '--snapshot', String(loads[0]!.snapshot)], env);
    expect(expired.code).toBe(1);
    expect(expired.stderr).toContain(`the warehouse has no snapshot ${loads[0]!.snapshot}`);
  });

  it('export writes hive-partitioned Parquet and lists row counts', async () => {
    const out = join(dataDir, 'parquet');
    const result = await runCli(['export', '--out', out], { HARVESTER_DATA_DIR: dataDir });
    expect(result.code).toBe(0);
    expect(result.stdout).toContain(`items\t${expected.itemIds.size}`);
    expect(existsSync(join(out, 'items', 'platform=tiktok'))).toBe(true);
    // Every table has its directory, an empty one too.
    for (const table of EXPORTED_TABLES) expect(existsSync(join(out, table)), table).toBe(true);
    expect(result.stderr).toMatch(new RegExp(`^exported ${EXPORTED_TABLES.length} tables in \\d+ files to ${out} \\(snapshot \\d+\\)\n$`));
  });

  it('with no warehouse yet, query says so', async () => {
    const result = await runCli(['query', 'SELECT 1'], { HARVESTER_DATA_DIR: mkdtempSync(join(tmpdir(), 'empty-')) });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('no warehouse at');
  });
});

describe('harvester load with a landing it cannot load', () => {
  it('quarantines it, loads the rest, names it with its reason, and exits 3; the next load loads nothing again', async () => {
    const badDir = mkdtempSync(join(tmpdir(), 'cli-quarantine-'));
    const client = clientFor(emulator);
    const sample = await landSampleHarvest(client, emulator, badDir, 'run-cli-bad');
    await client.close();
    const key = landedKeys(badDir).find((name) => name.includes('videos'))!;
    const landing = landedLanding(badDir, key) as PageLanding;
    const badKey = await landAnswer(badDir, { ...landing, run_id: 'run-cli-corrupt', data: (landing.data as Record<string, unknown>[]).map((item) => ({ ...item, metrics: { views: 'many' } })) });
    const env = { HARVESTER_DATA_DIR: badDir };

    const load = await runCli(['load'], env);
    expect(load.code).toBe(3);
    const quarantined = join(badDir, 'quarantine', ...badKey.split('/'));
    expect(load.stderr).toContain(`loaded ${sample.landings} landings`);
    expect(load.stderr).toContain('; 1 quarantined (not loaded); warehouse:');
    expect(load.stderr).toContain(`quarantined ${quarantined}: Invalid Input Error: JSON transform error: Failed to cast value to numerical: "many"\n`);
    expect(readFileSync(`${quarantined}.reason`, 'utf8')).toContain('Failed to cast value to numerical: "many"');
    const items = await runCli(['query', 'SELECT count(*) AS n FROM items', '--format', 'json'], env);
    expect(JSON.parse(items.stdout)).toEqual([{ n: sample.itemIds.size }]);

    const again = await runCli(['load'], env);
    expect(again.code).toBe(0);
    expect(again.stderr).toContain('loaded 0 landings (0 rows)');
    const loaded = await runCli(['query', 'SELECT count(*) AS n FROM loaded_landings', '--format', 'json'], env);
    expect(JSON.parse(loaded.stdout)).toEqual([{ n: sample.landings }]);
  });
});
