/**
 * The daily maintenance runs in the load process after a load's answer, while the next load may
 * already be asked for: it must wait its turn, never write the lake at the same time (issue "Daily
 * use keeps the data true": a run's final load failed 5 times of 5 with "database is locked" and
 * "Unique file handle conflict" while maintenance spun).
 */
import { rmSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalStore } from '../../src/store/store.js';
import { createLakeEngine, openLakeWriter } from '../../src/warehouse/lake.js';
import { loadLandings } from '../../src/warehouse/loader.js';
import { queryWarehouse } from '../../src/warehouse/query.js';
import { WarmLoader } from '../../src/warehouse/warm-loader.js';
import { startTestEmulator, waitFor, type TestEmulator } from '../support/emulator.js';
import { landedSample } from '../support/sample-harvest.js';

let emulator: TestEmulator;
const dataDirs: string[] = [];
beforeAll(async () => {
  emulator = await startTestEmulator();
});
afterAll(async () => {
  await emulator.close();
  for (const dataDir of dataDirs) rmSync(dataDir, { recursive: true, force: true });
});

describe('maintenance due while loads come', () => {
  it('loads every time, one writer after the other, and maintains the lake once', async () => {
    const loader = new WarmLoader();
    try {
      const { dataDir, expected } = await landedSample(emulator, 'run-0');
      dataDirs.push(dataDir);
      const itemIds = new Set(expected.itemIds);
      let landings = expected.landings;
      // Many loads: many small files and snapshots, so maintenance has something to merge.
      await loader.load(dataDir);
      for (let run = 1; run <= 12; run++) {
        const sample = await landedSample(emulator, `run-${run}`, dataDir);
        for (const id of sample.expected.itemIds) itemIds.add(id);
        landings += sample.expected.landings;
        await loader.load(dataDir);
      }
      // The mark a day and more old: maintenance is due.
      const store = new LocalStore(dataDir);
      const backdated = Date.now() - 2 * 24 * 3_600_000;
      await store.markLakeMaintained(backdated);
      const due = await landedSample(emulator, 'run-due', dataDir);
      for (const id of due.expected.itemIds) itemIds.add(id);
      landings += due.expected.landings;
      // A run's final load (it counts the run): its answer starts the maintenance.
      await loader.load(dataDir, undefined, 'run-due');
      // Loads asked at once, while it runs, and again with new landings: each loads, none fails.
      expect((await loader.load(dataDir)).landingsLoaded).toBe(0);
      for (let run = 1; run <= 3; run++) {
        const sample = await landedSample(emulator, `run-after-${run}`, dataDir);
        for (const id of sample.expected.itemIds) itemIds.add(id);
        landings += sample.expected.landings;
        expect((await loader.load(dataDir)).landingsLoaded).toBe(sample.expected.landings);
      }
      // Maintenance finished (its mark moved), and the lake holds every landing and item once.
      await waitFor(async () => ((await store.lakeMaintainedAt())! > backdated ? true : undefined), 120_000, 'the maintenance to finish');
      const counts = (await queryWarehouse(dataDir, 'SELECT (SELECT count(*) FROM loaded_landings) AS landings, (SELECT count(*) FROM items) AS items')).rows[0]!;
      expect({ landings: Number(counts.landings), items: Number(counts.items) }).toEqual({ landings, items: itemIds.size });
      // And the next load still finds the engine ready (nothing left attached).
      expect((await loader.load(dataDir)).landingsLoaded).toBe(0);
    } finally {
      loader.close();
    }
  }, 240_000);
});

describe("a writer's engine after a failed transaction", () => {
  it('lets go of the lake and the loader file, so the next writer of the engine attaches them again', async () => {
    const { dataDir } = await landedSample(emulator, 'run-detach');
    dataDirs.push(dataDir);
    const engine = await createLakeEngine();
    try {
      await loadLandings(dataDir, { engine });
      const writer = await openLakeWriter(dataDir, 10_000, { engine });
      // A statement that fails inside a transaction leaves it aborted: every statement but ROLLBACK fails.
      await writer.connection.run('BEGIN TRANSACTION');
      await expect(writer.connection.run("SELECT error('a failed statement')")).rejects.toThrow(/a failed statement/);
      await writer.close();
      // The next writer of the same engine opens, reads and loads.
      const sample = await landedSample(emulator, 'run-detach-2', dataDir);
      expect((await loadLandings(dataDir, { engine })).landingsLoaded).toBe(sample.expected.landings);
    } finally {
      engine.closeSync();
    }
  }, 120_000);
});
