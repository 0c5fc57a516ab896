import { mkdtempSync, statSync, utimesSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { lakeDataFolder, maintenanceMarkFile } from '../../src/store/layout.js';
import { openLake } from '../../src/warehouse/lake.js';
import { referencedLakeFiles } from '../../src/warehouse/lake-health.js';
import { queryWarehouse } from '../../src/warehouse/query.js';
import { loadLandings } from '../../src/warehouse/loader.js';
import { MAINTENANCE_INTERVAL_MS, maintainIfDue } from '../../src/warehouse/maintenance.js';
import { clientFor } from '../support/client.js';
import { startTestEmulator, type TestEmulator } from '../support/emulator.js';
import { landSampleHarvest } from '../support/sample-harvest.js';

let emulator: TestEmulator;
beforeAll(async () => {
  emulator = await startTestEmulator();
});
afterAll(() => emulator.close());

describe('the scheduled maintenance after a run', () => {
  it('waits a day from the lake\'s first load, then merges the files of the loads since and marks the time', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'maintain-'));
    // Files to merge: every insert writes one (no rows kept in the catalog; lake.ts, inliningRowLimit).
    process.env.HARVESTER_LAKE_INLINE_ROWS = '0';
    const client = clientFor(emulator);
    try {
      for (let run = 0; run < 3; run++) {
        await landSampleHarvest(client, emulator, dataDir, `run-${run}`, { fresh: true });
        await loadLandings(dataDir);
      }
    } finally {
      await client.close();
    }
    // Never maintained: marked now, not done (a young lake has little to merge).
    expect(await maintainIfDue(dataDir)).toBeUndefined();
    const marked = statSync(maintenanceMarkFile(dataDir)).mtimeMs;
    expect(await maintainIfDue(dataDir, marked + MAINTENANCE_INTERVAL_MS - 60_000)).toBeUndefined();
    // A day later it is due.
    const dayAgo = new Date(Date.now() - MAINTENANCE_INTERVAL_MS - 60_000);
    utimesSync(maintenanceMarkFile(dataDir), dayAgo, dayAgo);
    const done = await maintainIfDue(dataDir);
    expect(done).toBeDefined();
    expect(done!.dataFilesAfter).toBeLessThan(done!.dataFilesBefore);
    expect(statSync(maintenanceMarkFile(dataDir)).mtimeMs).toBeGreaterThan(dayAgo.getTime() + 60_000);
    expect(await maintainIfDue(dataDir)).toBeUndefined();
    delete process.env.HARVESTER_LAKE_INLINE_ROWS;
  });

  it('writes the rows small loads kept in the catalog out to Parquet files, losing none', async () => {
    delete process.env.HARVESTER_LAKE_INLINE_ROWS;
    const dataDir = mkdtempSync(join(tmpdir(), 'maintain-inlined-'));
    const client = clientFor(emulator);
    let expected;
    try {
      expected = await landSampleHarvest(client, emulator, dataDir, 'run-inlined', { fresh: true });
      await loadLandings(dataDir);
    } finally {
      await client.close();
    }
    const itemFiles = async () => {
      const lake = await openLake(dataDir, 'read');
      try {
        return (await referencedLakeFiles(lake.connection, `${lakeDataFolder(dataDir)}/`)).filter((file) => file.table === 'items');
      } finally {
        await lake.close();
      }
    };
    // The sample's items are fewer than the limit: in the catalog, in no file.
    expect(await itemFiles()).toEqual([]);
    expect(await maintainIfDue(dataDir)).toBeUndefined();
    const dayAgo = new Date(Date.now() - MAINTENANCE_INTERVAL_MS - 60_000);
    utimesSync(maintenanceMarkFile(dataDir), dayAgo, dayAgo);
    expect(await maintainIfDue(dataDir)).toBeDefined();
    expect((await itemFiles()).length).toBeGreaterThan(0);
    const { rows } = await queryWarehouse(dataDir, 'SELECT count(*) AS n FROM items');
    expect(Number(rows[0]!.n)).toBe(expected.itemIds.size);
  });
});
