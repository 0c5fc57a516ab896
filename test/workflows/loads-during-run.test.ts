/**
 * The warehouse fills while a run buys: the worker loads what its running runs landed every
 * `loadEveryMs`, each load a snapshot of the lake, and the run's final load has only the rest.
 * A reader polls the warehouse while the run goes on.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Client } from '@temporalio/client';
import type { SocialApiClient } from '../../src/api/client.js';
import { LocalStore } from '../../src/store/store.js';
import { lakeExists } from '../../src/warehouse/lake.js';
import { queryWarehouse } from '../../src/warehouse/query.js';
import type { HarvestSummary } from '../../workflows/harvest.js';
import { waitFor, type TestEmulator } from '../support/emulator.js';
import { startHarvestRig, type HarvestRig } from '../support/harvest-rig.js';
import { harvestFrom, startTestWorker } from '../support/temporal.js';

const HARVEST_KEY = 'sk_live_loads';
let emulator: TestEmulator;
let temporal: Client;
let api: SocialApiClient;
let catalog: HarvestRig['catalog'];
let rig: HarvestRig;

beforeAll(async () => {
  // Every answer takes 100 ms: the run lasts several seconds, long enough for loads during it.
  rig = await startHarvestRig({ harvest: HARVEST_KEY, verify: 'sk_live_loads_verify' }, { latencyMs: 100 });
  ({ emulator, temporal, api, catalog } = rig);
});
afterAll(async () => {
  await rig.close();
});

async function count(dataDir: string, sql: string): Promise<number> {
  return Number(Object.values((await queryWarehouse(dataDir, sql)).rows[0]!)[0]);
}

describe('loads during a run', () => {
  it('a reader sees the items of a run in the warehouse before the run ends, each once, and the run counts all its landings', async () => {
    const worker = await startTestWorker(api, { loadEveryMs: 500 });
    try {
      const harvest = harvestFrom(`
harvests:
  - name: filling
    budget: { credits: 100000 }
    concurrency: { targets: 1, calls: 4 }
    channels:
      - { platform: tiktok, handle: ${catalog.tiktok.handles[0]}, content: videos, max_items: 150 }
      - { platform: tiktok, handle: ${catalog.tiktok.handles[1]}, content: videos, max_items: 150 }
    enrich: { stats: true }
`);
      const handle = await temporal.workflow.start('harvestWorkflow', { taskQueue: worker.taskQueue, workflowId: `loads-${Date.now()}`, args: [{ harvest }] });
      let running = true;
      const result = handle.result().finally(() => (running = false)) as Promise<HarvestSummary>;
      // What a reader saw while the run was still going: item counts, in the order it saw them.
      const seenWhileRunning: number[] = [];
      while (running) {
        if (await lakeExists(worker.dataDir)) {
          const items = await count(worker.dataDir, 'SELECT count(*) FROM items');
          if (running) seenWhileRunning.push(items);
        }
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
      const summary = await result;
      expect(summary.status).toBe('completed');
      expect(summary.itemsLanded).toBe(300);
      // Items were in the warehouse before the run ended, and more of them as it went on.
      const partial = seenWhileRunning.filter((items) => items > 0 && items < 300);
      expect(partial.length).toBeGreaterThan(0);
      expect(seenWhileRunning).toEqual([...seenWhileRunning].sort((a, b) => a - b));
      // Whichever load took them: each landing once, every item once, and the run counts all its landings.
      expect(await count(worker.dataDir, 'SELECT count(*) FROM items')).toBe(300);
      expect(await count(worker.dataDir, 'SELECT count(DISTINCT item_id) FROM items')).toBe(300);
      expect(await count(worker.dataDir, 'SELECT count(*) - count(DISTINCT landing) FROM loaded_landings')).toBe(0);
      expect(summary.landingsLoaded).toBe(await count(worker.dataDir, `SELECT count(*) FROM loaded_landings WHERE run_id = '${handle.workflowId}'`));
      expect(await count(worker.dataDir, "SELECT count(*) FROM api_calls WHERE endpoint = 'tiktok/stats'")).toBe(300);
      expect(await count(worker.dataDir, 'SELECT sum(credits) FROM api_calls')).toBe(summary.creditsSpent);
      const ledger = (await emulator.ledger(HARVEST_KEY)).reduce((sum, entry) => sum + entry.credits, 0);
      expect(ledger).toBe(summary.creditsSpent);
    } finally {
      await worker.stop();
    }
  }, 120_000);
  it('with the daily maintenance due at every run, runs in sequence each end completed with their data loaded, each item once', { tags: ['long'], timeout: 240_000 }, async () => {
    // The case: maintenance starts after a run's first load, while the loads during the run
    // and its final load come; on the old load process they wrote the lake at once and the run failed.
    const worker = await startTestWorker(api, { loadEveryMs: 200 });
    const store = new LocalStore(worker.dataDir);
    try {
      let backdated = 0;
      for (const [run, handle] of catalog.tiktok.handles.slice(0, 5).entries()) {
        const harvest = harvestFrom(`
harvests:
  - name: daily-${run}
    budget: { credits: 100000 }
    concurrency: { targets: 1, calls: 2 }
    channels:
      - { platform: tiktok, handle: ${handle}, content: videos, max_items: 60 }
    enrich: { stats: true }
`);
        // Due at each run after the first (which makes the lake): maintenance starts after its final
        // load, as the next run's loads come.
        if (run > 0) {
          backdated = Date.now() - 2 * 24 * 3_600_000;
          await store.markLakeMaintained(backdated);
        }
        const started = await temporal.workflow.start('harvestWorkflow', { taskQueue: worker.taskQueue, workflowId: `maintained-${run}-${Date.now()}`, args: [{ harvest }] });
        const summary = (await started.result()) as HarvestSummary;
        expect({ run, status: summary.status }).toEqual({ run, status: 'completed' });
        expect(summary.landingsLoaded).toBe(await count(worker.dataDir, `SELECT count(*) FROM loaded_landings WHERE run_id = '${started.workflowId}'`));
      }
      // The last maintenance finishes (the loads did not keep it from its turn), and no item is there twice.
      await waitFor(async () => ((await store.lakeMaintainedAt())! > backdated ? true : undefined), 120_000, 'the maintenance after the last run');
      expect(await count(worker.dataDir, 'SELECT count(*) FROM items')).toBe(300);
      expect(await count(worker.dataDir, 'SELECT count(DISTINCT item_id) FROM items')).toBe(300);
      expect(await count(worker.dataDir, 'SELECT count(*) FROM item_metrics')).toBe(600);
    } finally {
      await worker.stop();
    }
  });
});
