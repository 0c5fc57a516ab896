import { afterAll, describe, expect, it } from 'vitest';
import type { Client } from '@temporalio/client';
import { type Corruption, type ProxiedCall } from '../../src/emulator/corrupting-proxy.js';
import { queryWarehouse } from '../../src/warehouse/query.js';
import { resumableState } from '../../src/harvest/checkpoint.js';
import type { HarvestInput, HarvestSummary } from '../../workflows/harvest.js';
import { channelWithStats as channelHarvest, ledgerCredits as ledgerOf, startCorruptedRig } from '../support/corrupted-rig.js';
import { executeHarvest, harvestFrom, prices, type TestWorker } from '../support/temporal.js';

const HARVEST_KEY = 'sk_live_answer_faults';
const VERIFY_KEY = 'sk_live_answer_faults_verify';
const cleanups: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

/** A harvest rig whose worker reaches the emulator through a proxy that spoils the answers `choose` picks. */
function setup(choose: (call: ProxiedCall) => Corruption | undefined) {
  return startCorruptedRig({ harvest: HARVEST_KEY, verify: VERIFY_KEY }, choose, cleanups);
}

function execute(temporal: Client, worker: TestWorker, input: HarvestInput, id = `answers-${Math.random().toString(36).slice(2)}`): Promise<HarvestSummary> {
  return executeHarvest(temporal, { taskQueue: worker.taskQueue, workflowId: id, input });
}

const channelWithStats = (handle: string, maxItems: number) => channelHarvest('answers', handle, maxItems);

function ledgerCredits(rig: { emulator: { ledger(key: string): Promise<{ credits: number }[]> } }): Promise<number> {
  return ledgerOf(rig.emulator, HARVEST_KEY);
}

async function itemCounts(worker: TestWorker, handle: string) {
  const [row] = (
    await queryWarehouse(
      worker.dataDir,
      `SELECT count(*) AS items, count(DISTINCT item_id) AS distinct_items,
         (SELECT count(DISTINCT m.item_id) FROM item_metrics m JOIN items i USING (platform, item_id) WHERE i.author_handle = '${handle}' AND m.source_endpoint = 'tiktok/stats') AS with_stats
       FROM items WHERE author_handle = '${handle}'`,
    )
  ).rows;
  return { items: Number(row!.items), distinct: Number(row!.distinct_items), withStats: Number(row!.with_stats) };
}

describe('answers lost on the way back', () => {
  it('cut bodies are bought again, and the run counts every charged attempt: its credits equal the ledger', async () => {
    // Every 9th content call's body is cut after the API charged it.
    const rig = await setup((call) => (call.number % 9 === 0 ? { kind: 'cut_body' } : undefined));
    const handle = rig.catalog.tiktok.handles[1]!;
    const summary = await execute(rig.temporal, rig.worker, { harvest: channelWithStats(handle, 120) });
    expect(summary.status).toBe('completed');
    expect(summary.targets[0]).toMatchObject({ status: 'done', items: 120 });
    expect(rig.proxy.spoiled.cut_body).toBeGreaterThan(5);
    expect(summary.callsLost).toBe(rig.proxy.spoiled.cut_body);
    expect(summary.creditsSpent).toBe(await ledgerCredits(rig));
    expect(await itemCounts(rig.worker, handle)).toEqual({ items: 120, distinct: 120, withStats: 120 });
  }, 120_000);
});

describe('a job start whose answer is lost', () => {
  it('is not sent again, since a second start could make a second job: the target fails as JobLost at its worst case', async () => {
    const rig = await setup((call) => (call.endpoint === 'tiktok/channel-videos' && Number(call.query.get('limit')) > 50 ? { kind: 'cut_body' } : undefined));
    const handle = rig.catalog.tiktok.handles[5]!;
    const harvest = { ...channelWithStats(handle, 600), job_threshold: 500 };
    const summary = await execute(rig.temporal, rig.worker, { harvest });
    expect(rig.proxy.spoiled.cut_body).toBe(1);
    expect(rig.proxy.forwarded).toBe(1);
    expect(summary.targets[0]).toMatchObject({ status: 'failed', error: { type: 'JobLost' } });
    expect(summary.targets[0]!.error!.message).toMatch(/the answer to starting this target's job was lost .*; it was not sent again, so a job of up to 600 items may exist/);
    expect(summary.creditsSpent).toBe(600 * prices['tiktok/channel-videos']);
    expect(summary.callsLost).toBe(1);
  }, 120_000);
});

describe('answers that come too late', () => {
  it('a page and a stats call held past the deadline are bought again by the retried activity, and stay counted as lost when the page is read back', async () => {
    // Page 2 is held past the deadline once; after it is bought again, one stats call of its items
    // is too, so the next attempt reads page 2 back from disk with the first attempt's intent open.
    let pagesWithCursor = 0;
    let statsHeld = false;
    const rig = await setup((call) => {
      if (call.endpoint === 'tiktok/channel-videos' && call.query.has('cursor')) {
        pagesWithCursor++;
        return pagesWithCursor === 1 ? { kind: 'slow_headers', ms: 1_500 } : undefined;
      }
      // The first stats call after page 2 was bought again is for one of its items.
      if (call.endpoint === 'tiktok/stats' && pagesWithCursor >= 2 && !statsHeld) {
        statsHeld = true;
        return { kind: 'slow_headers', ms: 1_500 };
      }
      return undefined;
    });
    const handle = rig.catalog.tiktok.handles[4]!;
    const harvest = { ...channelWithStats(handle, 100), call_deadline_seconds: 1 };
    const summary = await execute(rig.temporal, rig.worker, { harvest });
    expect(rig.proxy.spoiled.slow_headers).toBe(2);
    expect(summary.status).toBe('completed');
    expect(summary.targets[0]).toMatchObject({ status: 'done', items: 100 });
    expect(summary.creditsSpent).toBe(await ledgerCredits(rig));
    expect(summary.callsLost).toBe(2);
    expect(await itemCounts(rig.worker, handle)).toEqual({ items: 100, distinct: 100, withStats: 100 });
  }, 120_000);
});

describe('a work that moves on between failures', () => {
  it('a listing is tried again past five failed attempts while each lands pages: the run completes', async () => {
    // The first request for each of pages 2 to 8 is held past the deadline: each attempt of the
    // target's listing activity lands and enriches a page, then fails on the next one. Counted
    // over the activity's life, its fifth failure failed the target (seen in the fault matrix's
    // proxy-slow-headers, where held stats calls did the same).
    const cursorsSeen = new Set<string>();
    const rig = await setup((call) => {
      const cursor = call.endpoint === 'tiktok/channel-videos' ? call.query.get('cursor') : null;
      if (cursor === null || cursorsSeen.has(cursor) || cursorsSeen.size >= 7) return undefined;
      cursorsSeen.add(cursor);
      return { kind: 'slow_headers', ms: 1_500 };
    });
    const handle = rig.catalog.tiktok.handles[7]!;
    const harvest = { ...channelWithStats(handle, 450), call_deadline_seconds: 1 };
    const workflowId = `answers-listing-progress-${Math.random().toString(36).slice(2)}`;
    const summary = await execute(rig.temporal, rig.worker, { harvest }, workflowId);
    const history = await rig.temporal.workflow.getHandle(workflowId).fetchHistory();
    const attempts = (history.events ?? []).flatMap((event) => (event.activityTaskStartedEventAttributes?.attempt ? [event.activityTaskStartedEventAttributes.attempt] : []));
    expect(rig.proxy.spoiled.slow_headers).toBe(7);
    // Six of the failures in its first work (a lost page call stays spent against the work's
    // grant, so the workflow grants another for the rest).
    expect(Math.max(...attempts)).toBeGreaterThan(5);
    expect(summary.status).toBe('completed');
    expect(summary.targets[0]).toMatchObject({ status: 'done', items: 450 });
    expect(summary.callsLost).toBe(7);
    expect(summary.creditsSpent).toBe(await ledgerCredits(rig));
    expect(await itemCounts(rig.worker, handle)).toEqual({ items: 450, distinct: 450, withStats: 450 });
  }, 180_000);

  it('a job\'s enrichment is granted again what its lost calls ate: the run completes', async () => {
    // 600 items: the channel is bought as a job, and its items enriched by one activity granted
    // their worst case. One stats call in 40 is held past the deadline (none within 1.2 s of the
    // last), and each lost call stays spent at its worst case against that grant (it may be
    // charged): the last items found no grant, and the run stopped for budget with 196,400 of its
    // 200,000 credits free.
    let statsCalls = 0;
    let nextHold = 30;
    let lastHold = 0;
    let held = 0;
    const rig = await setup((call) => {
      if (call.endpoint !== 'tiktok/stats' || ++statsCalls < nextHold || Date.now() - lastHold < 1_200) return undefined;
      nextHold = statsCalls + 40;
      lastHold = Date.now();
      held++;
      return { kind: 'slow_headers', ms: 1_500 };
    });
    const handle = rig.catalog.tiktok.handles[6]!;
    const harvest = { ...channelWithStats(handle, 600), call_deadline_seconds: 1, budget: { credits: 200_000 } };
    const summary = await execute(rig.temporal, rig.worker, { harvest });
    expect(held).toBeGreaterThan(0);
    expect(summary.status).toBe('completed');
    expect(summary.targets[0]).toMatchObject({ status: 'done', items: 600 });
    expect(summary.enrichment).toMatchObject({ calls: 600, failed: 0 });
    expect(summary.callsLost).toBe(held);
    expect(summary.creditsSpent).toBe(await ledgerCredits(rig));
    expect(await itemCounts(rig.worker, handle)).toEqual({ items: 600, distinct: 600, withStats: 600 });
  }, 180_000);
});

describe('answers that do not fit what was asked', () => {
  it('a page with more items than its limit is never landed: the target fails with the request id, and a retry completes it', async () => {
    let spoil = true;
    const rig = await setup((call) => (spoil && /channel-videos/.test(call.path) && /cursor=/.test(call.path) ? { kind: 'oversize' } : undefined));
    const handle = rig.catalog.tiktok.handles[2]!;
    const harvest = channelWithStats(handle, 120);
    const first = await execute(rig.temporal, rig.worker, { harvest });
    expect(first.status).not.toMatch(/^completed/);
    expect(first.targets[0]!.status).toBe('failed');
    expect(first.targets[0]!.error!.message).toMatch(/the page holds \d+ items, more than the limit of \d+ asked for \(request req_\w+\)/);
    // The refused page was charged, and counted, but none of its items exist in the warehouse.
    expect(first.creditsSpent).toBe(await ledgerCredits(rig));
    expect(first.targets[0]!.items).toBe(50);
    spoil = false;
    const retried = await execute(rig.temporal, rig.worker, { harvest, resume: resumableState(first.checkpoint, 100_000) }, `${first.runId}-retry`);
    expect(retried.status).toBe('completed');
    expect(retried.targets[0]).toMatchObject({ status: 'done', items: 120 });
    expect(retried.creditsSpent).toBe(await ledgerCredits(rig));
    const landed = (await queryWarehouse(rig.worker.dataDir, `SELECT item_id FROM items WHERE author_handle = '${handle}' ORDER BY posted_at DESC`)).rows.map((row) => String(row.item_id));
    expect(landed).toEqual(await rig.firstIds('tiktok', 'channel-videos', { handle }, 120));
  }, 120_000);

  it('stats about another item are failed calls, listed with their request ids, and `retry` makes them again', async () => {
    let spoil = true;
    let spoiled = 0;
    const rig = await setup((call) => {
      if (!spoil || !/\/stats\?/.test(call.path) || spoiled >= 4) return undefined;
      spoiled++;
      return { kind: 'other_entity' };
    });
    const handle = rig.catalog.tiktok.handles[3]!;
    const harvest = channelWithStats(handle, 40);
    const first = await execute(rig.temporal, rig.worker, { harvest });
    expect(first.status).toBe('completed_with_errors');
    // Its items are listed, but not all enriched: the target is not done, and says why.
    expect(first.targets[0]).toMatchObject({ status: 'failed', items: 40, error: { type: 'EnrichmentFailed' } });
    expect(first.enrichment.failed).toBe(4);
    expect(first.failedCalls?.total).toBe(4);
    for (const failed of first.failedCalls!.first) {
      expect(failed).toMatchObject({ endpoint: 'tiktok/stats', request_id: expect.stringMatching(/^req_/) });
      expect(failed.reason).toMatch(/the answer is about item "\d+", not "\d+" as asked/);
    }
    expect(first.creditsSpent).toBe(await ledgerCredits(rig));
    expect((await itemCounts(rig.worker, handle)).withStats).toBe(36);
    spoil = false;
    const retried = await execute(rig.temporal, rig.worker, { harvest, resume: resumableState(first.checkpoint, 100_000) }, `${first.runId}-retry`);
    expect(retried.status).toBe('completed');
    expect(retried.targets[0]).toMatchObject({ status: 'done', items: 40 });
    expect(retried.enrichment.failed).toBe(0);
    expect(retried.failedCalls).toBeUndefined();
    expect(await itemCounts(rig.worker, handle)).toEqual({ items: 40, distinct: 40, withStats: 40 });
    expect(retried.creditsSpent).toBe(await ledgerCredits(rig));
    expect(retried.creditsSpent).toBe(40 * prices['tiktok/channel-videos'] + 44 * prices['tiktok/stats']);
  }, 120_000);
  it("a tracked account's profile about another account is a failed call, and `retry` observes it again", async () => {
    let spoil = true;
    const rig = await setup((call) => (spoil && call.endpoint.endsWith('/channel-stats') ? { kind: 'other_entity' } : undefined));
    const handle = rig.catalog.tiktok.handles[4]!;
    const harvest = harvestFrom(`
harvests:
  - name: tracked-profile
    budget: { credits: 100000 }
    track: { accounts: true }
    channels:
      - { platform: tiktok, handle: ${handle}, content: videos, max_items: 10 }
`);
    const first = await execute(rig.temporal, rig.worker, { harvest });
    expect(first.status).toBe('completed_with_errors');
    expect(first.failedCalls?.total).toBe(1);
    expect(first.failedCalls!.first[0]).toMatchObject({ endpoint: 'tiktok/channel-stats', subject: handle, request_id: expect.stringMatching(/^req_/) });
    expect(first.creditsSpent).toBe(await ledgerCredits(rig));
    spoil = false;
    // A retry with no credits to spare cannot make it again: it stays failed, and the run says so.
    const starved = await execute(rig.temporal, rig.worker, { harvest, resume: resumableState(first.checkpoint, 0) }, `${first.runId}-starved`);
    expect(starved.status).toBe('completed_with_errors');
    expect(starved.failedCalls?.total).toBe(1);
    const retried = await execute(rig.temporal, rig.worker, { harvest, resume: resumableState(starved.checkpoint, 100_000) }, `${first.runId}-retry`);
    expect(retried.status).toBe('completed');
    expect(retried.failedCalls).toBeUndefined();
    expect(retried.creditsSpent).toBe(await ledgerCredits(rig));
    const profiles = (await queryWarehouse(rig.worker.dataDir, `SELECT handle, from_cache FROM account_metrics`)).rows;
    // Made again fresh, as tracking makes it: the API's cache held the answer the first call spoiled.
    expect(profiles).toEqual([{ handle, from_cache: false }]);
  }, 120_000);
});
