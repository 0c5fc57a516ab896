/**
 * A run on a lake whose catalog names a torn file (made by hand: an older version's power loss):
 * its start reads the items it knows, is refused naming the file, has the load process repair the
 * lake from the raw answers, reads again and completes; nothing of the run before is lost.
 */
import { statSync, truncateSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { lakeDataFolder } from '../../src/store/layout.js';
import { openLake } from '../../src/warehouse/lake.js';
import { referencedLakeFiles } from '../../src/warehouse/lake-health.js';
import { queryWarehouse } from '../../src/warehouse/query.js';
import type { HarvestSummary } from '../../workflows/harvest.js';
import { startHarvestRig, type HarvestRig } from '../support/harvest-rig.js';
import { harvestFrom, startTestWorker } from '../support/temporal.js';

// A torn file needs a file: every insert writes one (no rows inlined in the catalog; lake.ts, inliningRowLimit).
process.env.HARVESTER_LAKE_INLINE_ROWS = '0';

let rig: HarvestRig;
beforeAll(async () => {
  rig = await startHarvestRig({ harvest: 'sk_live_damaged_lake', verify: 'sk_live_damaged_lake_verify' });
});
afterAll(() => rig.close());

const count = async (dataDir: string, sql: string) => Number(Object.values((await queryWarehouse(dataDir, sql)).rows[0]!)[0]);

describe('a run on a damaged lake', () => {
  it('repairs it before it reads the items it knows, completes, and loses nothing of the run before', async () => {
    const worker = await startTestWorker(rig.api);
    try {
      const harvest = harvestFrom(`
harvests:
  - name: damaged
    budget: { credits: 100000 }
    enrich: { stats: true }
    channels:
      - { platform: tiktok, handle: ${rig.catalog.tiktok.handles[2]!}, content: videos, max_items: 5 }
`);
      const run = async (day: number) =>
        (await rig.temporal.workflow.execute('harvestWorkflow', { taskQueue: worker.taskQueue, workflowId: `damaged-${day}-${Date.now()}`, args: [{ harvest }] })) as HarvestSummary;
      const first = await run(1);
      expect(first.status).toBe('completed');
      const lake = await openLake(worker.dataDir, 'read');
      const files = await referencedLakeFiles(lake.connection, `${lakeDataFolder(worker.dataDir)}/`).finally(() => lake.close());
      const items = files.find((file) => file.table === 'items' && file.kind === 'data')!;
      truncateSync(items.path, Math.floor(statSync(items.path).size / 3));
      await expect(queryWarehouse(worker.dataDir, 'SELECT 1')).rejects.toThrow(`table items: data file ${items.path}`);

      const second = await run(2);
      expect(second.status).toBe('completed');
      expect(await count(worker.dataDir, 'SELECT count(*) FROM items')).toBe(5);
      expect(await count(worker.dataDir, 'SELECT sum(credits) FROM api_calls')).toBe(first.creditsSpent + second.creditsSpent);
      expect(await count(worker.dataDir, 'SELECT count(DISTINCT run_id) FROM harvest_runs')).toBe(2);
    } finally {
      await worker.stop();
    }
  }, 180_000);
});
