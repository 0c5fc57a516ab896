import { mkdtempSync, statSync, utimesSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { maintenanceMarkFile } from '../../src/store/layout.js';
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
  });
});
