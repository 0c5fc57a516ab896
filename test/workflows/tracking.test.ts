/**
 * Tracking over time, on the emulated clock: a harvest scheduled every 6 hours for some emulated
 * days observes its items again at the planned ages and each channel's profile once per run, all
 * fresh, within what `harvester plan` forecast, and every credit is in the ledger and api_calls.
 * In the suite, 5 days with a 3-day window (21 runs: the ages up to 3 days and the window's end);
 * TRACKING_TEST_DAYS=10 runs the long check, 10 days with a 7-day window (41 runs, the 7-day age
 * too): `TRACKING_TEST_DAYS=10 npx vitest run test/workflows/tracking.test.ts -t "emulated days"`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { summaryText } from '../../src/cli/commands/run.js';
import { planHarvestCost } from '../../src/harvest/cost-plan.js';
import { planTargets } from '../../src/harvest/targets.js';
import { OBSERVATION_AGES_MS } from '../../src/harvest/tracking.js';
import { forecastTracking } from '../../src/warehouse/known-items.js';
import { queryWarehouse } from '../../src/warehouse/query.js';
import type { HarvestSummary } from '../../workflows/harvest.js';
import { startHarvestRig, type HarvestRig } from '../support/harvest-rig.js';
import { busiestTikTokChannel } from '../support/client.js';
import { harvestFrom, prices, startTestWorker } from '../support/temporal.js';

const HARVEST_KEY = 'sk_live_tracking';
const VERIFY_KEY = 'sk_live_tracking_verify';
const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;
const INTERVAL_MS = 6 * HOUR_MS;
const DAYS = Number(process.env.TRACKING_TEST_DAYS ?? 5);
if (!Number.isInteger(DAYS) || DAYS < 2) throw new Error(`TRACKING_TEST_DAYS must be a whole number of days, 2 or more; it is ${process.env.TRACKING_TEST_DAYS}`);
/** Every 6 hours from day 0 to the last day. */
const RUNS = DAYS * 4 + 1;
/** Tracked for 7 days when the runs go on past them (the 7-day age observed too), else for 3. */
const WINDOW_DAYS = DAYS >= 10 ? 7 : 3;

let rig: HarvestRig;

beforeAll(async () => {
  rig = await startHarvestRig({ harvest: HARVEST_KEY, verify: VERIFY_KEY });
});
afterAll(async () => {
  await rig.close();
});

describe('enrichment coverage', () => {
  it('says per item and enrichment when it was bought, by which run and call, or why not', async () => {
    const worker = await startTestWorker(rig.api);
    try {
      const handle = rig.catalog.tiktok.handles[1]!;
      const harvest = harvestFrom(`
harvests:
  - name: coverage
    budget: { credits: 100000 }
    enrich: { stats: true, download: true }
    channels:
      - { platform: tiktok, handle: ${handle}, content: videos, max_items: 5 }
`);
      const summary = (await rig.temporal.workflow.execute('harvestWorkflow', { taskQueue: worker.taskQueue, workflowId: `coverage-${Date.now()}`, args: [{ harvest }] })) as HarvestSummary;
      expect(summary.status).toBe('completed');
      const coverage = (
        await queryWarehouse(
          worker.dataDir,
          `SELECT c.enrichment, c.why_not, c.run_id, c.bought_at IS NOT NULL AS bought, a.endpoint AS call_endpoint
           FROM enrichment_coverage c LEFT JOIN api_calls a USING (request_id) ORDER BY c.item_id, c.enrichment`,
        )
      ).rows as { enrichment: string; why_not: string | null; run_id: string | null; bought: boolean; call_endpoint: string | null }[];
      expect(coverage).toHaveLength(5 * 5);
      const byEnrichment = (enrichment: string) => coverage.filter((row) => row.enrichment === enrichment);
      // Stats: bought by this run, and the call behind it is the item's stats call.
      expect(byEnrichment('stats').every((row) => row.bought && row.why_not === null && row.run_id === summary.runId && row.call_endpoint === 'tiktok/stats')).toBe(true);
      // TikTok downloads: asked, but the API offers none.
      expect(byEnrichment('download').map((row) => row.why_not)).toEqual(Array(5).fill('unavailable'));
      for (const enrichment of ['comments', 'transcript', 'summary']) expect(byEnrichment(enrichment).map((row) => row.why_not)).toEqual(Array(5).fill('not asked'));
    } finally {
      await worker.stop();
    }
  }, 120_000);
});

describe('tracking under faults', () => {
  it('observes every due item once through 500s on 30 % of requests, and every credit is in the run and api_calls', async () => {
    const worker = await startTestWorker(rig.api);
    try {
      const handle = rig.catalog.tiktok.handles[4]!;
      const harvest = harvestFrom(`
harvests:
  - name: tracked-faults
    budget: { credits: 100000 }
    track: { items: { days: 7 } }
    channels:
      - { platform: tiktok, handle: ${handle}, content: videos, max_items: 40 }
`);
      const run = (id: string) => rig.temporal.workflow.execute('harvestWorkflow', { taskQueue: worker.taskQueue, workflowId: id, args: [{ harvest }] }) as Promise<HarvestSummary>;
      const first = await run(`tracked-faults-a-${Date.now()}`);
      expect(first.status).toBe('completed');
      await rig.emulator.admin('clock', { advance_seconds: 2 * 86_400 });
      const before = (await rig.emulator.ledger(HARVEST_KEY)).length;
      await rig.emulator.admin('faults', { fault_rate: 0.3 });
      let second: HarvestSummary;
      try {
        second = await run(`tracked-faults-b-${Date.now()}`);
      } finally {
        await rig.emulator.admin('faults', { fault_rate: 0 });
      }
      expect(second.status).toBe('completed');
      expect(second.trackedItems!.due).toBeGreaterThan(0);
      expect(second.trackedItems!.observed).toBe(second.trackedItems!.due);
      const charged = (await rig.emulator.ledger(HARVEST_KEY)).slice(before);
      expect(second.creditsSpent).toBe(charged.reduce((sum, row) => sum + row.credits, 0));
      // Each due item observed once in the run: one stats call each, all in api_calls, none paid twice.
      expect(charged.filter((row) => row.endpoint === 'tiktok/stats')).toHaveLength(second.trackedItems!.due);
      const calls = await queryWarehouse(worker.dataDir, `SELECT count(*) AS calls, count(DISTINCT params->>'url') AS items, sum(credits) AS credits FROM api_calls WHERE run_id = '${second.runId}' AND endpoint = 'tiktok/stats'`);
      expect(calls.rows[0]).toEqual({ calls: String(second.trackedItems!.due), items: String(second.trackedItems!.due), credits: String(second.trackedItems!.due * prices['tiktok/stats']) });
    } finally {
      await worker.stop();
    }
  }, 180_000);
});

describe(`tracking over ${DAYS} emulated days`, () => {
  it('observes each item at its planned ages within one schedule interval, each profile once per run, all fresh, as planned, ledger = api_calls', { tags: ['long'], timeout: 600_000 }, async () => {
    const worker = await startTestWorker(rig.api);
    try {
      const handle = await busiestTikTokChannel(rig.verify, rig.catalog.tiktok.handles);
      const harvest = harvestFrom(`
harvests:
  - name: tracked
    budget: { credits: 100000 }
    track: { items: { days: ${WINDOW_DAYS} }, accounts: true }
    enrich: { stats: true }
    channels:
      - { platform: tiktok, handle: ${handle}, content: videos, max_items: 10 }
`);
      const startMs = (await rig.api.serverTime()).getTime();
      const ledgerBefore = (await rig.emulator.ledger(HARVEST_KEY)).length;
      const summaries: HarvestSummary[] = [];
      let lastRunMs = startMs;
      for (let run = 0; run < RUNS; run++) {
        if (run > 0) await rig.emulator.admin('clock', { advance_seconds: INTERVAL_MS / 1000 });
        lastRunMs = (await rig.api.serverTime()).getTime();
        const tracking = await forecastTracking(worker.dataDir, planTargets(harvest), WINDOW_DAYS, lastRunMs, prices);
        const plan = planHarvestCost(harvest, prices, { tracking });
        const summary = (await rig.temporal.workflow.execute('harvestWorkflow', { taskQueue: worker.taskQueue, workflowId: `tracked-${run}-${Date.now()}`, args: [{ harvest }] })) as HarvestSummary;
        expect(summary.status, summary.reason).toBe('completed');
        // The run observes what the plan forecast for it, no more and no less.
        const forecast = plan.targets.reduce((sum, target) => sum + (target.tracked?.expected.items ?? 0), 0);
        expect(summary.trackedItems).toEqual({ due: forecast, observed: forecast });
        if (forecast > 0) expect(summaryText(summary, 0)).toContain(`tracked:    ${forecast} of ${forecast} due items observed again`);
        summaries.push(summary);
      }
      expect(summaries.some((summary) => (summary.trackedItems?.observed ?? 0) > 0)).toBe(true);

      const rows = async <T>(sql: string) => (await queryWarehouse(worker.dataDir, sql)).rows as T[];
      // Every stats observation, with the item's age at it, on the API's clock.
      const observations = await rows<{ item_id: string; posted: string; ages: number[] }>(
        `SELECT i.item_id, epoch_ms(i.posted_at) AS posted, list(epoch_ms(m.observed_at) - epoch_ms(i.posted_at) ORDER BY m.observed_at) AS ages
         FROM items i JOIN item_metrics m USING (platform, item_id)
         WHERE m.source_endpoint = 'tiktok/stats' GROUP BY ALL`,
      );
      const postedInWindow = observations.filter((item) => Number(item.posted) > startMs);
      expect(postedInWindow.length).toBeGreaterThan(10);
      for (const item of postedInWindow) {
        const ages = item.ages.map(Number);
        for (const planned of OBSERVATION_AGES_MS.filter((age) => age <= WINDOW_DAYS * DAY_MS)) {
          // Only ages whose interval has passed by the last run can have been observed.
          if (Number(item.posted) + planned + INTERVAL_MS > lastRunMs) continue;
          expect(ages.some((age) => age >= planned && age < planned + INTERVAL_MS), `item ${item.item_id} at ${planned / HOUR_MS} h: ${ages.map((age) => (age / HOUR_MS).toFixed(1))}`).toBe(true);
        }
        // Observed no more often than planned: once when listed, then once per planned age at most.
        expect(ages.length).toBeLessThanOrEqual(1 + OBSERVATION_AGES_MS.filter((age) => age <= WINDOW_DAYS * DAY_MS).length);
        expect(Math.max(...ages)).toBeLessThan(WINDOW_DAYS * DAY_MS + INTERVAL_MS);
      }

      // Every stats call, tracking's included, was answered fresh: no credit paid for a cached answer.
      const cache = await rows<{ cache_status: string; calls: string }>(`SELECT cache_status, count(*) AS calls FROM api_calls WHERE endpoint = 'tiktok/stats' GROUP BY ALL`);
      expect(cache.map((row) => row.cache_status)).toEqual(['MISS']);

      // Followers over time: one row per run for the channel.
      const followers = await rows<{ runs: string; observations: string }>(`SELECT count(DISTINCT run_id) AS runs, count(*) AS observations FROM account_followers WHERE handle = '${handle}'`);
      expect(followers[0]).toEqual({ runs: String(RUNS), observations: String(RUNS) });

      // Metrics at fixed ages lie between two real observations, never beyond the last one.
      const atAge = await rows<{ item_id: string; age: string; inside: boolean; between: boolean }>(
        `SELECT a.item_id, a.age, observed_before <= aged_at AND aged_at <= observed_after AS inside,
           a.views BETWEEN least(b.views, f.views) AND greatest(b.views, f.views) AS between
         FROM item_metrics_at_age a
         JOIN item_metrics b ON b.item_id = a.item_id AND b.observed_at = a.observed_before
         JOIN item_metrics f ON f.item_id = a.item_id AND f.observed_at = a.observed_after`,
      );
      expect(atAge.filter((row) => row.age === '1d').length).toBeGreaterThan(10);
      expect(atAge.every((row) => row.inside && row.between)).toBe(true);
      const young = postedInWindow.filter((item) => Number(item.posted) + 7 * DAY_MS > lastRunMs).map((item) => item.item_id);
      expect(atAge.filter((row) => row.age === '7d' && young.includes(row.item_id))).toEqual([]);

      // Every credit the API charged is in the runs' figures and in api_calls.
      const charged = (await rig.emulator.ledger(HARVEST_KEY)).slice(ledgerBefore).reduce((sum, row) => sum + row.credits, 0);
      expect(summaries.reduce((sum, summary) => sum + summary.creditsSpent, 0)).toBe(charged);
      const calls = await rows<{ credits: string }>(`SELECT sum(credits) AS credits FROM api_calls`);
      expect(Number(calls[0]!.credits)).toBe(charged);
    } finally {
      await worker.stop();
    }
  });
});
