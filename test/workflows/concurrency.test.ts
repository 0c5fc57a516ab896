import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { planHarvestCost } from '../../src/harvest/cost-plan.js';
import { queryWarehouse } from '../../src/warehouse/query.js';
import type { HarvestSummary } from '../../workflows/harvest.js';
import { startHarvestRig, type HarvestRig } from '../support/harvest-rig.js';
import { harvestFrom, prices, startTestWorker } from '../support/temporal.js';

let rig: HarvestRig;

beforeAll(async () => {
  // Every answer takes 40 ms, so targets listed one after another would show in the timings.
  rig = await startHarvestRig({ harvest: 'sk_live_concurrency', verify: 'sk_live_concurrency_verify' }, { latencyMs: 40, jobStepMs: 50 });
});
afterAll(async () => {
  await rig.close();
});

describe('targets in parallel', () => {
  it('land exactly the expected items of every target, enriched once each, and api_calls equals the ledger', async () => {
    const worker = await startTestWorker(rig.api);
    try {
      const handles = rig.catalog.tiktok.handles.slice(0, 6);
      const harvest = harvestFrom(`
harvests:
  - name: parallel
    budget: { credits: 1000000 }
    concurrency: { targets: 6, calls: 12 }
    channels:
${handles.map((handle) => `      - { platform: tiktok, handle: ${handle}, content: videos, max_items: 120 }`).join('\n')}
    enrich: { stats: true }
`);
      const before = (await rig.emulator.ledger('sk_live_concurrency')).length;
      const summary = (await rig.temporal.workflow.execute('harvestWorkflow', { taskQueue: worker.taskQueue, workflowId: `parallel-${Date.now()}`, args: [{ harvest }] })) as HarvestSummary;
      expect(summary.status).toBe('completed');
      expect(summary.targets.map((target) => target.items)).toEqual(handles.map(() => 120));
      for (const handle of handles) {
        const landed = (await queryWarehouse(worker.dataDir, `SELECT item_id FROM items WHERE author_handle = '${handle}' ORDER BY posted_at DESC`)).rows.map((row) => row.item_id);
        expect(landed).toEqual(await rig.firstIds('tiktok', 'channel-videos', { handle }, 120));
      }
      const stats = await queryWarehouse(worker.dataDir, "SELECT count(*) AS n, count(DISTINCT item_id) AS d FROM item_metrics WHERE source_endpoint = 'tiktok/stats'");
      expect(stats.rows[0]).toEqual({ n: '720', d: '720' });

      const ledger = (await rig.emulator.ledger('sk_live_concurrency')).slice(before);
      const calls = (await queryWarehouse(worker.dataDir, 'SELECT request_id, credits FROM api_calls')).rows;
      expect(new Map(calls.map((row) => [row.request_id, Number(row.credits)]))).toEqual(new Map(ledger.map((row) => [row.request_id, row.credits])));
      const spent = ledger.reduce((sum, row) => sum + row.credits, 0);
      expect(spent).toBe(720 * (prices['tiktok/channel-videos'] + prices['tiktok/stats']));
      expect(summary.creditsSpent).toBe(spent);
      expect(summary.callsLost).toBe(0);
    } finally {
      await worker.stop();
    }
  }, 120_000);

  it('a short budget is spent as `harvester plan` forecast it, target by target, and never exceeded', async () => {
    const worker = await startTestWorker(rig.api);
    try {
      const harvest = harvestFrom(`
harvests:
  - name: forecast
    budget: { credits: 2000 }
    job_threshold: 100
    channels:
      - { platform: tiktok, handle: ${rig.catalog.tiktok.handles[7]}, content: videos, max_items: 150 }
      - { platform: instagram, handle: ${rig.catalog.instagram.handles[8]}, content: posts, max_items: 60 }
      - { platform: tiktok, handle: ${rig.catalog.tiktok.handles[8]}, content: videos, max_items: 60 }
    searches:
      - { platform: instagram, query: ${rig.catalog.instagram.queries[0]}, max_results: 40 }
    enrich: { stats: true, download: true }
`);
      const plan = planHarvestCost(harvest, prices);
      expect(plan.budgetCoversWorstCase).toBe(false);
      const before = (await rig.emulator.ledger('sk_live_concurrency')).length;
      const summary = (await rig.temporal.workflow.execute('harvestWorkflow', { taskQueue: worker.taskQueue, workflowId: `forecast-${Date.now()}`, args: [{ harvest }] })) as HarvestSummary;
      const spent = (await rig.emulator.ledger('sk_live_concurrency')).slice(before).reduce((sum, row) => sum + row.credits, 0);
      expect(spent).toBeLessThanOrEqual(2000);
      expect(summary.creditsSpent).toBe(spent);
      expect(summary.status).toBe('budget_exhausted');
      expect(summary.targets.map((target) => target.credits)).toEqual(plan.targets.map((target) => target.expectedCredits));
      expect(spent).toBe(plan.totals.expectedCredits);
    } finally {
      await worker.stop();
    }
  }, 120_000);
});
