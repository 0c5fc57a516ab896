import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Client } from '@temporalio/client';
import type { SocialApiClient } from '../../src/api/client.js';
import { summaryText } from '../../src/cli/commands/run.js';
import { queryWarehouse } from '../../src/warehouse/query.js';
import { resumableState } from '../../src/harvest/checkpoint.js';
import type { HarvestInput, HarvestSummary } from '../../workflows/harvest.js';
import { clientFor } from '../support/client.js';
import { q, type TestEmulator } from '../support/emulator.js';
import { startHarvestRig, type HarvestRig } from '../support/harvest-rig.js';
import { landSampleHarvest } from '../support/sample-harvest.js';
import { executeHarvest, harvestFrom, prices, startTestWorker, type TestWorker } from '../support/temporal.js';

const HARVEST_KEY = 'sk_live_harvest';
const VERIFY_KEY = 'sk_live_verify';
let emulator: TestEmulator;
let temporal: Client;
let api: SocialApiClient;
let verify: SocialApiClient;
let catalog: Awaited<ReturnType<TestEmulator['catalog']>>;
let rig: HarvestRig;

beforeAll(async () => {
  rig = await startHarvestRig({ harvest: HARVEST_KEY, verify: VERIFY_KEY }, { jobStepMs: 50 });
  ({ emulator, temporal, api, verify, catalog } = rig);
});
afterAll(async () => {
  await rig.close();
});

async function runHarvest(worker: TestWorker, input: HarvestInput, id = `run-${Math.random().toString(36).slice(2)}`): Promise<HarvestSummary> {
  return executeHarvest(temporal, { taskQueue: worker.taskQueue, workflowId: id, input });
}

async function rows<T = Record<string, unknown>>(dataDir: string, sql: string): Promise<T[]> {
  return (await queryWarehouse(dataDir, sql)).rows as T[];
}

const firstIds: HarvestRig['firstIds'] = (...args) => rig.firstIds(...args);

async function harvestLedger() {
  return emulator.ledger(HARVEST_KEY);
}

describe('the harvest workflow', () => {
  it('lands exactly the expected items of several targets, and its credits equal the ledger', async () => {
    const worker = await startTestWorker(api);
    try {
      const handle = catalog.tiktok.handles[0]!;
      const reels = catalog.instagram.handles[1]!;
      const video = (await verify.page('tiktok', 'channel-videos', { handle: catalog.tiktok.handles[2]!, limit: 30 })).items.find((item) => (item.metrics.comments ?? 0) > 80)!;
      const harvest = harvestFrom(`
harvests:
  - name: several
    budget: { credits: 100000 }
    channels:
      - { platform: tiktok, handle: ${handle}, content: videos, max_items: 120 }
      - { platform: instagram, handle: ${reels}, content: reels, max_items: 60 }
    searches:
      - { platform: tiktok, query: yoga, max_results: 80 }
    comments:
      - { url: "${video.url}", max_items: 70 }
`);
      const before = (await harvestLedger()).length;
      const summary = await runHarvest(worker, { harvest });
      expect(summary.status).toBe('completed');
      expect(summary.targets.map((target) => [target.key, target.items])).toEqual([
        [`channel:tiktok:${handle}:videos`, 120],
        [`channel:instagram:${reels}:reels`, 60],
        ['search:tiktok:keyword:yoga', 80],
        [`comments:tiktok:${video.url}`, 70],
      ]);
      const dataDir = worker.dataDir;
      const landedVideos = (await rows<{ item_id: string }>(dataDir, `SELECT item_id FROM items WHERE platform = 'tiktok' AND author_handle = '${handle}' ORDER BY posted_at DESC`)).map((row) => row.item_id);
      expect(landedVideos).toEqual(await firstIds('tiktok', 'channel-videos', { handle }, 120));
      const landedReels = (await rows<{ item_id: string }>(dataDir, `SELECT item_id FROM items WHERE platform = 'instagram' ORDER BY posted_at DESC`)).map((row) => row.item_id);
      expect(landedReels).toEqual(await firstIds('instagram', 'channel-reels', { handle: reels }, 60));
      const hits = (await rows<{ item_id: string }>(dataDir, `SELECT item_id FROM search_hits ORDER BY rank`)).map((row) => row.item_id);
      expect(hits).toEqual(await firstIds('tiktok', 'search', { query: 'yoga' }, 80));
      const comments = (await rows<{ comment_id: string }>(dataDir, `SELECT comment_id FROM comments ORDER BY posted_at DESC, comment_id DESC`)).map((row) => row.comment_id);
      expect(new Set(comments)).toEqual(new Set(await firstIds('tiktok', 'comments', { url: video.url }, 70)));
      // Credits: the run's own count, the warehouse's api_calls and the emulator's ledger agree.
      const ledger = (await harvestLedger()).slice(before);
      const ledgerCredits = ledger.reduce((sum, row) => sum + row.credits, 0);
      expect(summary.creditsSpent).toBe(ledgerCredits);
      const calls = await rows<{ n: string; credits: string }>(dataDir, 'SELECT count(*) AS n, sum(credits) AS credits FROM api_calls');
      expect(Number(calls[0]!.credits)).toBe(ledgerCredits);
      expect(Number(calls[0]!.n)).toBe(ledger.length);
      expect(ledgerCredits).toBe(120 * prices['tiktok/channel-videos'] + 60 * prices['instagram/channel-reels'] + 80 * prices['tiktok/search'] + 70 * prices['tiktok/comments']);
      const run = await rows<{ status: string; credits_spent: string }>(dataDir, 'SELECT status, credits_spent FROM harvest_runs');
      expect(run).toEqual([{ status: 'completed', credits_spent: String(ledgerCredits) }]);
    } finally {
      await worker.stop();
    }
  });

  it("on a data directory other runs share, counts only its own landings as loaded, though its load loads theirs too", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'shared-'));
    const other = await landSampleHarvest(verify, emulator, dataDir, 'another-run');
    const worker = await startTestWorker(api, { dataDir });
    try {
      const harvest = harvestFrom(`
harvests:
  - name: own
    budget: { credits: 100000 }
    channels:
      - { platform: instagram, handle: ${catalog.instagram.handles[2]!}, content: reels, max_items: 60 }
`);
      const summary = await runHarvest(worker, { harvest });
      expect(summary.status).toBe('completed');
      // Its two pages, and its two status landings (running, then completed).
      expect(summary.pagesLanded).toBe(2);
      expect(summary.landingsLoaded).toBe(4);
      const loaded = await rows<{ run_id: string; n: string }>(dataDir, 'SELECT run_id, count(*) AS n FROM loaded_landings GROUP BY run_id ORDER BY run_id');
      expect(loaded).toEqual([
        { run_id: 'another-run', n: String(other.landings) },
        { run_id: summary.runId, n: '4' },
      ]);
    } finally {
      await worker.stop();
    }
  });

  it('never spends beyond its budget, and stops cleanly as budget_exhausted', async () => {
    const worker = await startTestWorker(api);
    try {
      const harvest = harvestFrom(`
harvests:
  - name: capped
    budget: { credits: 500 }
    channels:
      - { platform: tiktok, handle: ${catalog.tiktok.handles[3]}, content: videos, max_items: 400 }
    enrich: { stats: true }
`);
      const before = (await harvestLedger()).length;
      const summary = await runHarvest(worker, { harvest });
      expect(summary.status).toBe('budget_exhausted');
      const spent = (await harvestLedger()).slice(before).reduce((sum, row) => sum + row.credits, 0);
      expect(spent).toBeLessThanOrEqual(500);
      expect(summary.creditsSpent).toBe(spent);
      // Items are listed only while their enrichment fits too, and the last page's limit is
      // shrunk to fit: 500 credits buy 83 videos at 3 plus their stats at 3, every one enriched.
      expect(summary.targets[0]!.items).toBe(83);
      expect(summary.enrichment).toMatchObject({ calls: 83, failed: 0 });
      expect(spent).toBe(83 * (prices['tiktok/channel-videos'] + prices['tiktok/stats']));
      expect(summary.creditsReserved).toBe(0);
    } finally {
      await worker.stop();
    }
  });

  it('an incremental re-run after the clock moves buys only the new items, plus a small bounded overfetch', async () => {
    const worker = await startTestWorker(api);
    try {
      const handle = catalog.tiktok.handles[5]!;
      const harvest = harvestFrom(`
harvests:
  - name: incremental
    budget: { credits: 100000 }
    channels:
      - { platform: tiktok, handle: ${handle}, content: videos, max_items: 200 }
`);
      const first = await runHarvest(worker, { harvest });
      expect(first.itemsLanded).toBe(200);
      const newestBefore = (await firstIds('tiktok', 'channel-videos', { handle }, 1))[0]!;
      await emulator.admin('clock', { advance_seconds: 3 * 86_400 });
      const listing = await firstIds('tiktok', 'channel-videos', { handle }, 200);
      const newItems = listing.indexOf(newestBefore);
      expect(newItems).toBeGreaterThanOrEqual(3);
      const before = (await harvestLedger()).length;
      const second = await runHarvest(worker, { harvest });
      const bought = (await harvestLedger()).slice(before).reduce((sum, row) => sum + row.units, 0);
      expect(second.status).toBe('completed');
      expect(bought).toBeGreaterThanOrEqual(newItems);
      // Overfetch: at most the page that showed the first known item, sized from the posting rate.
      expect(bought - newItems).toBeLessThanOrEqual(Math.max(5, Math.ceil(newItems * 0.5)));
      const count = await rows<{ n: string }>(worker.dataDir, `SELECT count(*) AS n FROM items WHERE author_handle = '${handle}'`);
      expect(Number(count[0]!.n)).toBe(200 + newItems);
    } finally {
      await worker.stop();
    }
  });

  it('a 404 is recorded against its target with the request id; the other targets still complete', async () => {
    const worker = await startTestWorker(api);
    try {
      const harvest = harvestFrom(`
harvests:
  - name: with-a-deleted-video
    budget: { credits: 10000 }
    channels:
      - { platform: instagram, handle: ${catalog.instagram.handles[2]}, content: posts, max_items: 30 }
    comments:
      - { url: "https://www.tiktok.com/@${catalog.tiktok.handles[0]}/video/7000000000000999999", max_items: 10 }
`);
      const summary = await runHarvest(worker, { harvest });
      expect(summary.status).toBe('completed_with_errors');
      expect(summary.targets[0]).toMatchObject({ status: 'done', items: 30 });
      expect(summary.targets[1]).toMatchObject({ status: 'failed', error: { type: 'NotFoundError' } });
      expect(summary.targets[1]!.error!.requestId).toMatch(/^req_/);
    } finally {
      await worker.stop();
    }
  });

  it('a target whose listing finds nothing ends empty, with a warning in the summary, and the run still completes', async () => {
    const worker = await startTestWorker(api);
    try {
      const harvest = harvestFrom(`
harvests:
  - name: with-an-empty-search
    budget: { credits: 10000 }
    channels:
      - { platform: instagram, handle: ${catalog.instagram.handles[3]}, content: reels, max_items: 10 }
    searches:
      - { platform: tiktok, query: no such topic anywhere, max_results: 50 }
`);
      const summary = await runHarvest(worker, { harvest });
      expect(summary.status).toBe('completed');
      expect(summary.targets[0]).toMatchObject({ status: 'done', items: 10 });
      expect(summary.targets[0]!.warning).toBeUndefined();
      expect(summary.targets[1]).toMatchObject({ key: 'search:tiktok:keyword:no such topic anywhere', status: 'empty', items: 0, pages: 1, warning: 'the API listed no items for it: check the query (no such topic anywhere)' });
      expect(summary.targets[1]!.error).toBeUndefined();
      const text = summaryText(summary, 1000);
      expect(text).toMatch(/^search:tiktok:keyword:no such topic anywhere +empty +0 +1 +0$/m);
      expect(text).toMatch(/^ +warning: the API listed no items for it: check the query \(no such topic anywhere\)$/m);
      // A retry leaves it empty: there is nothing to list again.
      expect(resumableState(summary.checkpoint, 100).targets[1]!.status).toBe('empty');
    } finally {
      await worker.stop();
    }
  });

  it('a 402 pauses the run and its schedule instead of retrying', async () => {
    await emulator.admin('keys', { api_key: 'sk_live_nearly_broke', credits: 100 });
    const broke = clientFor(emulator, { apiKey: 'sk_live_nearly_broke' });
    const paused: string[] = [];
    const worker = await startTestWorker(broke, { pauseSchedule: async (harvest, note) => void paused.push(`${harvest}: ${note}`) });
    try {
      const harvest = harvestFrom(`
harvests:
  - name: over-plan
    budget: { credits: 100000 }
    channels:
      - { platform: tiktok, handle: ${catalog.tiktok.handles[6]}, content: videos, max_items: 200 }
`);
      const summary = await runHarvest(worker, { harvest });
      expect(summary.status).toBe('paused');
      expect(summary.reason).toMatch(/insufficient/);
      expect(summary.targets[0]!.status).toBe('paused');
      expect(paused).toEqual([expect.stringMatching(/^over-plan: insufficient_credits/)]);
      // 100 credits bought two pages of 20 (60 + ... ) until the third page's worst case did not fit.
      const spent = (await emulator.ledger('sk_live_nearly_broke')).reduce((sum, row) => sum + row.credits, 0);
      expect(spent).toBeLessThanOrEqual(100);
      expect(summary.creditsSpent).toBe(spent);
    } finally {
      await worker.stop();
      await broke.close();
    }
  });

  it('enriches landed items: stats, transcripts and downloads (TikTok downloads recorded as skipped)', async () => {
    const worker = await startTestWorker(api);
    try {
      const harvest = harvestFrom(`
harvests:
  - name: enriched
    budget: { credits: 100000 }
    channels:
      - { platform: tiktok, handle: ${catalog.tiktok.handles[7]}, content: videos, max_items: 6 }
    enrich: { stats: true, transcript: true, download: true, comments: { max_per_item: 5 } }
`);
      const summary = await runHarvest(worker, { harvest });
      expect(summary.status).toBe('completed');
      expect(summary.enrichment).toMatchObject({ skipped: 6, failed: 0, pending: 0 });
      const dataDir = worker.dataDir;
      expect(Number((await rows<{ n: string }>(dataDir, 'SELECT count(*) AS n FROM transcripts'))[0]!.n)).toBe(6);
      expect(Number((await rows<{ n: string }>(dataDir, "SELECT count(*) AS n FROM item_metrics WHERE source_endpoint = 'tiktok/stats'"))[0]!.n)).toBe(6);
      expect(Number((await rows<{ n: string }>(dataDir, 'SELECT count(*) AS n FROM downloads'))[0]!.n)).toBe(0);
      const ledgerByEndpoint = new Map<string, number>();
      for (const row of await harvestLedger()) ledgerByEndpoint.set(row.endpoint, (ledgerByEndpoint.get(row.endpoint) ?? 0) + 1);
      expect(ledgerByEndpoint.get('tiktok/download')).toBeUndefined();
      void q;
    } finally {
      await worker.stop();
    }
  });
});

describe('a long harvest', () => {
  it('continues-as-new when its history grows long, carrying its checkpoint, and lands everything once', async () => {
    const worker = await startTestWorker(api);
    try {
      const harvest = harvestFrom(`
harvests:
  - name: long
    budget: { credits: 100000 }
    concurrency: { targets: 1 }
    channels:
      - { platform: instagram, handle: ${catalog.instagram.handles[6]}, content: posts, max_items: 200 }
      - { platform: instagram, handle: ${catalog.instagram.handles[7]}, content: posts, max_items: 200 }
    enrich: { stats: true }
`);
      const workflowId = `long-${Date.now()}`;
      const before = (await harvestLedger()).length;
      // One target at a time, and a new execution once the history passes 10 events: the chain
      // continues as new between the two targets, with the first one's work in its checkpoint.
      const summary = (await temporal.workflow.execute('harvestWorkflow', { taskQueue: worker.taskQueue, workflowId, args: [{ harvest, pageSize: 10, historyLimit: 10 }] })) as HarvestSummary;
      expect(summary.status).toBe('completed');
      expect(summary.targets.map((target) => target.items)).toEqual([200, 200]);
      const runs: string[] = [];
      for await (const execution of temporal.workflow.list({ query: `WorkflowId = '${workflowId}'` })) runs.push(execution.status.name);
      expect(runs.filter((status) => status === 'CONTINUED_AS_NEW').length).toBeGreaterThanOrEqual(1);
      const items = await queryWarehouse(worker.dataDir, "SELECT count(*) AS n, count(DISTINCT item_id) AS d FROM items");
      expect(items.rows[0]).toEqual({ n: '400', d: '400' });
      const stats = await queryWarehouse(worker.dataDir, "SELECT count(*) AS n FROM item_metrics WHERE source_endpoint = 'instagram/stats'");
      expect(stats.rows[0]).toEqual({ n: '400' });
      // The budget carried across runs of the chain counts every credit the ledger charged.
      const spent = (await harvestLedger()).slice(before).reduce((sum, row) => sum + row.credits, 0);
      expect(summary.creditsSpent).toBe(spent);
      expect(spent).toBe(400 * prices['instagram/channel-posts'] + 400 * prices['instagram/stats']);
    } finally {
      await worker.stop();
    }
  }, 120_000);
  it("observes each tracked account's profile once per run, fresh: followers over time gets one row per run and channel", async () => {
    const worker = await startTestWorker(api);
    try {
      const tiktok = catalog.tiktok.handles[3]!;
      const instagram = catalog.instagram.handles[3]!;
      const harvest = harvestFrom(`
harvests:
  - name: tracked-accounts
    budget: { credits: 100000 }
    track: { accounts: true }
    channels:
      - { platform: tiktok, handle: ${tiktok}, content: videos, max_items: 20 }
      - { platform: instagram, handle: ${instagram}, content: posts, max_items: 10 }
      - { platform: instagram, handle: ${instagram}, content: reels, max_items: 10 }
`);
      const before = (await harvestLedger()).length;
      const first = await runHarvest(worker, { harvest });
      expect(first.status).toBe('completed');
      await emulator.admin('clock', { advance_seconds: 3600 });
      const second = await runHarvest(worker, { harvest });
      expect(second.status).toBe('completed');

      const observations = await rows<{ platform: string; handle: string; run_id: string; from_cache: boolean }>(
        worker.dataDir,
        `SELECT platform, handle, run_id, from_cache FROM account_metrics WHERE handle IN ('${tiktok}', '${instagram}') ORDER BY run_id, platform`,
      );
      const runs = [first.runId, second.runId].sort();
      expect(observations.map((row) => [row.run_id, row.platform, row.handle])).toEqual(
        runs.flatMap((run) => [
          [run, 'instagram', instagram],
          [run, 'tiktok', tiktok],
        ]),
      );
      expect(observations.every((row) => row.from_cache === false)).toBe(true);
      // Every credit the API charged is in the runs' figures and in api_calls, tracking's too.
      const charged = (await harvestLedger()).slice(before);
      const credits = charged.reduce((sum, row) => sum + row.credits, 0);
      expect(first.creditsSpent + second.creditsSpent).toBe(credits);
      const calls = await rows<{ credits: string }>(worker.dataDir, `SELECT sum(credits) AS credits FROM api_calls WHERE run_id IN ('${first.runId}', '${second.runId}')`);
      expect(Number(calls[0]!.credits)).toBe(credits);
      expect(charged.filter((row) => row.endpoint.endsWith('/channel-stats'))).toHaveLength(4);
    } finally {
      await worker.stop();
    }
  }, 120_000);
});
