import { afterAll, describe, expect, it } from 'vitest';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { WorkflowFailedError, type Client } from '@temporalio/client';
import { SocialApiClient } from '../../src/api/client.js';
import { CallJournal } from '../../src/store/call-journal.js';
import { FileJournals } from '../../src/store/file-journal.js';
import { landedKeys } from '../support/landed.js';
import { queryWarehouse } from '../../src/warehouse/query.js';
import { resumableState } from '../../src/harvest/checkpoint.js';
import type { HarvestInput, HarvestSummary } from '../../workflows/harvest.js';
import { clientFor } from '../support/client.js';
import { startTestEmulator, waitFor } from '../support/emulator.js';
import { startHarvestRig } from '../support/harvest-rig.js';
import { deadPort } from '../support/dead-port.js';
import { watchServedRequests } from '../support/served-requests.js';
import { executeHarvest, harvestFrom, prices, startTestWorker, temporalClient, type TestWorker } from '../support/temporal.js';

const HARVEST_KEY = 'sk_live_listing_faults';
const VERIFY_KEY = 'sk_live_listing_faults_verify';
const cleanups: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

async function setup(options: { latencyMs?: number; cursorTtlSeconds?: number; jobStepMs?: number; faultRate?: number } = {}) {
  const rig = await startHarvestRig({ harvest: HARVEST_KEY, verify: VERIFY_KEY }, options);
  const worker = await startTestWorker(rig.api);
  cleanups.push(() => rig.close(), () => worker.stop());
  return { ...rig, worker };
}

async function landedIds(worker: TestWorker, handle: string): Promise<string[]> {
  return (await queryWarehouse(worker.dataDir, `SELECT item_id FROM items WHERE author_handle = '${handle}' ORDER BY posted_at DESC`)).rows.map((row) => String(row.item_id));
}

function execute(temporal: Client, worker: TestWorker, input: HarvestInput, id = `faults-${Math.random().toString(36).slice(2)}`): Promise<HarvestSummary> {
  return executeHarvest(temporal, { taskQueue: worker.taskQueue, workflowId: id, input });
}

const channel = (handle: string, maxItems: number, budget = 100_000) =>
  harvestFrom(`
harvests:
  - name: faults
    budget: { credits: ${budget} }
    job_threshold: 10000
    channels:
      - { platform: tiktok, handle: ${handle}, content: videos, max_items: ${maxItems} }
`);

describe('listings that lose their cursor', () => {
  it('a cursor that expires mid-listing: the list is walked again from the top, and the run still lands its 450 items', async () => {
    const { emulator, temporal, firstIds, worker, catalog } = await setup({ latencyMs: 150 });
    const handle = catalog.tiktok.handles[4]!;
    const running = execute(temporal, worker, { harvest: channel(handle, 450) });
    await waitFor(() => (landedKeys(worker.dataDir).length >= 3 ? true : undefined), 30_000, 'three pages landed');
    // An hour passes on the API's clock: the cursor in hand expires, and new videos are posted.
    await emulator.admin('clock', { advance_seconds: 3600 });
    const summary = await running;
    expect(summary.status).toBe('completed');
    expect(summary.targets[0]).toMatchObject({ status: 'done', items: 450 });
    // The run has the newest 450 items of the list as it now stands: nothing lost, nothing twice.
    expect(await landedIds(worker, handle)).toEqual(await firstIds('tiktok', 'channel-videos', { handle }, 450));
    const ledger = await emulator.ledger(HARVEST_KEY);
    expect(summary.creditsSpent).toBe(ledger.reduce((sum, row) => sum + row.credits, 0));
    expect(summary.creditsSpent).toBeLessThanOrEqual(100_000);
  }, 120_000);

  it('cursors that always expire before the next page: the shortfall is reported, never "completed"', async () => {
    const { temporal, worker, catalog } = await setup({ latencyMs: 1_100, cursorTtlSeconds: 1 });
    const summary = await execute(temporal, worker, { harvest: channel(catalog.tiktok.handles[5]!, 200) });
    expect(summary.status).not.toMatch(/^completed$/);
    expect(summary.targets[0]).toMatchObject({ status: 'failed', items: 50, error: { type: 'CursorExpiredError' } });
    expect(summary.targets[0]!.error!.message).toMatch(/started again 3 times/);
  }, 120_000);

  it('a dead cursor in the checkpoint: `harvester retry` walks the list again instead of replaying it', async () => {
    const { emulator, temporal, firstIds, worker, catalog } = await setup();
    const handle = catalog.tiktok.handles[6]!;
    const first = await execute(temporal, worker, { harvest: channel(handle, 300, 300) });
    expect(first.status).toBe('budget_exhausted');
    expect(first.targets[0]!.items).toBe(100);
    // The checkpoint's cursor no longer works (as after the API restarted): invalid_cursor.
    const checkpoint = structuredClone(first.checkpoint);
    checkpoint.targets[0]!.position.cursor = 'not-a-cursor-any-more';
    const retried = await execute(temporal, worker, { harvest: channel(handle, 300, 300), resume: resumableState(checkpoint, 2_000) }, first.runId);
    expect(retried.status).toBe('completed');
    expect(retried.targets[0]).toMatchObject({ status: 'done', items: 300 });
    expect(await landedIds(worker, handle)).toEqual(await firstIds('tiktok', 'channel-videos', { handle }, 300));
    // The first 100 were bought twice (the walk back past them), and the ledger says so.
    const ledger = await emulator.ledger(HARVEST_KEY);
    expect(ledger.reduce((sum, row) => sum + row.credits, 0)).toBe(retried.creditsSpent);
    expect(retried.creditsSpent).toBe((300 + 100) * prices['tiktok/channel-videos']);
  }, 120_000);
});

describe('a run that stopped short', () => {
  it('leaves a gap the next run fills: it lists to max_items again instead of stopping at the first known item', async () => {
    const { emulator, temporal, firstIds, worker, catalog } = await setup();
    const handle = catalog.tiktok.handles[7]!;
    const first = await execute(temporal, worker, { harvest: channel(handle, 450, 1_000) });
    expect(first.status).toBe('budget_exhausted');
    expect(first.targets[0]!.items).toBe(333);
    await emulator.admin('clock', { advance_seconds: 6 * 3600 });
    const second = await execute(temporal, worker, { harvest: channel(handle, 450) });
    expect(second.status).toBe('completed');
    expect(second.targets[0]).toMatchObject({ status: 'done', items: 450 });
    const landed = await landedIds(worker, handle);
    expect(landed.slice(0, 450)).toEqual(await firstIds('tiktok', 'channel-videos', { handle }, 450));
    // Once the listing was complete, the next run is incremental again: it stops at known items.
    await emulator.admin('clock', { advance_seconds: 6 * 3600 });
    const third = await execute(temporal, worker, { harvest: channel(handle, 450) });
    expect(third.status).toBe('completed');
    expect(third.targets[0]!.items).toBeLessThan(50);
  }, 120_000);
});

describe('a job whose start a dying worker left unrecorded', () => {
  it('is not started a second time: the target fails saying so, and its worst case counts as spent', async () => {
    const { emulator, temporal, worker, catalog } = await setup({ jobStepMs: 50 });
    const handle = catalog.tiktok.handles[8]!;
    const harvest = channel(handle, 600);
    const harvestWithJobs = { ...harvest, job_threshold: 500 };
    const runId = `job-lost-${Date.now()}`;
    const key = `channel:tiktok:${handle}:videos`;
    // What a worker killed with the job request in flight leaves: the intent, and no job record.
    const journal = await CallJournal.load(new FileJournals(worker.dataDir), runId, `job:${key}`);
    await journal.intend(`job:${key}`, 600 * prices['tiktok/channel-videos']);
    await journal.close();
    const summary = await execute(temporal, worker, { harvest: harvestWithJobs }, runId);
    expect(summary.targets[0]).toMatchObject({ status: 'failed', items: 0, error: { type: 'JobLost' } });
    expect(summary.status).toBe('failed');
    expect(summary.creditsSpent).toBe(600 * prices['tiktok/channel-videos']);
    expect(summary.callsLost).toBe(1);
    expect(await emulator.ledger(HARVEST_KEY)).toEqual([]);
  }, 60_000);
});

describe('errors no target can get past', () => {
  it('a refused key (401) ends the run at once, with one line that says so, and nothing bought', async () => {
    const emulator = await startTestEmulator({ apiKeys: [HARVEST_KEY] });
    const temporal = await temporalClient();
    const wrongKey = clientFor(emulator, { apiKey: 'sk_live_not_a_key' });
    const worker = await startTestWorker(wrongKey);
    cleanups.push(() => emulator.close(), () => temporal.connection.close(), () => wrongKey.close(), () => worker.stop());
    const catalog = await emulator.catalog();
    const harvest = harvestFrom(`
harvests:
  - name: wrong-key
    budget: { credits: 10000 }
    channels:
${catalog.tiktok.handles.slice(0, 3).map((handle) => `      - { platform: tiktok, handle: ${handle}, content: videos, max_items: 100 }`).join('\n')}
`);
    const served = watchServedRequests('/v1/');
    cleanups.push(async () => served.stop());
    const summary = await execute(temporal, worker, { harvest });
    // At once: no call is tried again after a 401, so the API answered nothing but the first call
    // of each of the three targets (some may not have called before the run ended).
    const refusals = served.byStatus.get(401) ?? 0;
    expect(refusals).toBeGreaterThanOrEqual(1);
    expect(refusals).toBeLessThanOrEqual(3);
    expect([...served.byStatus.keys()]).toEqual([401]);
    expect(summary.status).toBe('failed');
    expect(summary.reason).toMatch(/^the API refused the key: /);
    expect(summary.reason).not.toContain('sk_live_not_a_key');
    expect(summary.creditsSpent).toBe(0);
    expect(await emulator.ledger()).toEqual([]);
  }, 60_000);

  it('an API that cannot be reached ends the run once a target has used its attempts, saying so', async () => {
    // A port nothing listens on (nor will: support/dead-port.ts), and a client that gives up on a call at once: each of a target's
    // five attempts fails in milliseconds, and only Temporal's backoff (1, 2, 4, 8 s) is waited.
    const port = await deadPort();
    const temporal = await temporalClient();
    const unreachable = new SocialApiClient({ baseUrl: `http://127.0.0.1:${port}`, apiKey: 'sk_live_x', prices, retry: { maxAttempts: 1 } });
    const worker = await startTestWorker(unreachable);
    cleanups.push(() => temporal.connection.close(), () => unreachable.close(), () => worker.stop());
    const summary = await execute(temporal, worker, { harvest: channel('happy_otter0', 100) });
    expect(summary.status).toBe('failed');
    expect(summary.reason).toMatch(/^the API cannot be reached: .*ECONNREFUSED/);
    expect(summary.targets[0]).toMatchObject({ status: 'failed', error: { type: 'NetworkError' } });
  }, 60_000);

  it('a data directory that cannot be written fails the run before anything is bought, naming the path', async () => {
    const emulator = await startTestEmulator({ apiKeys: [HARVEST_KEY] });
    const temporal = await temporalClient();
    const api = clientFor(emulator, { apiKey: HARVEST_KEY });
    // A data directory under a regular file: every write is refused (ENOTDIR), even as root.
    const file = join(mkdtempSync(join(tmpdir(), 'unwritable-')), 'a-file');
    writeFileSync(file, '');
    const worker = await startTestWorker(api, { dataDir: join(file, 'data') });
    cleanups.push(() => emulator.close(), () => temporal.connection.close(), () => api.close(), () => worker.stop());
    const catalog = await emulator.catalog();
    const failure = await execute(temporal, worker, { harvest: channel(catalog.tiktok.handles[0]!, 100) }).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(WorkflowFailedError);
    // Said once, with the file that could not be written and why.
    expect((failure as WorkflowFailedError).cause?.message).toMatch(new RegExp(`^the run could not start: the data directory cannot be written: cannot write landing segment ${file}/data/segments/\\S+\\.seg: ENOTDIR: not a directory`));
    expect(await emulator.ledger()).toEqual([]);
  }, 60_000);
});

describe('a corrupt landing left in the data directory', () => {
  it('is quarantined by the run\'s final load, which loads the rest: the run completes and names it', async () => {
    const { temporal, worker, catalog, firstIds } = await setup();
    const corrupt = join(worker.dataDir, 'landing', 'run-old', 'broken', 'page-000001.json');
    mkdirSync(dirname(corrupt), { recursive: true });
    writeFileSync(corrupt, '{"format":1,"kind":"page","data":[');
    const handle = catalog.tiktok.handles[9]!;
    const summary = await execute(temporal, worker, { harvest: channel(handle, 60) });
    expect(summary.status).toBe('completed');
    expect(summary.landingsQuarantined).toEqual([expect.stringMatching(new RegExp(`^${join(worker.dataDir, 'quarantine', 'run-old', 'broken', 'page-000001.json')}: not JSON`))]);
    expect(await landedIds(worker, handle)).toEqual(await firstIds('tiktok', 'channel-videos', { handle }, 60));
  }, 60_000);
});

describe('enrichment halted by the balance, then resumed', () => {
  it('a 402 mid-enrichment pauses the run; after a plan change its retry enriches every item it listed, and says completed only then', async () => {
    const { emulator, temporal, worker, catalog } = await setup({ latencyMs: 20 });
    // Enough credits for the listings and part of the stats: 3 targets of 150 at 3 + 3 each is 2700.
    await emulator.admin('plan', { api_key: HARVEST_KEY, plan: 'small', credits: 1_500 });
    const harvest = harvestFrom(`
harvests:
  - name: halted
    budget: { credits: 100000 }
    job_threshold: 10000
    channels:
${catalog.tiktok.handles.slice(0, 3).map((handle) => `      - { platform: tiktok, handle: ${handle}, content: videos, max_items: 150 }`).join('\n')}
    enrich: { stats: true }
`);
    const first = await execute(temporal, worker, { harvest });
    expect(first.status).toBe('paused');
    await emulator.admin('plan', { api_key: HARVEST_KEY, plan: 'bigger', credits: 100_000 });
    const retried = await execute(temporal, worker, { harvest, resume: resumableState(first.checkpoint, 100_000) }, first.runId);
    expect(retried.status).toBe('completed');
    expect(retried.targets.map((target) => target.items)).toEqual([150, 150, 150]);
    // Every listed item has its stats, each bought once: nothing skipped by the pause is lost.
    const stats = await queryWarehouse(worker.dataDir, "SELECT count(*) AS n, count(DISTINCT item_id) AS d FROM item_metrics WHERE source_endpoint = 'tiktok/stats'");
    expect(stats.rows[0]).toEqual({ n: '450', d: '450' });
    const ledger = await emulator.ledger(HARVEST_KEY);
    expect(ledger.filter((row) => row.endpoint === 'tiktok/stats')).toHaveLength(450);
    expect(retried.creditsSpent).toBe(ledger.reduce((sum, row) => sum + row.credits, 0));
  }, 120_000);
});

describe('an API that fails a third of its calls with 5xx', () => {
  it('completes with every item and its stats, counting no error answer as a lost call', async () => {
    const { emulator, temporal, worker, catalog } = await setup({ faultRate: 0.3 });
    const handle = catalog.tiktok.handles[10]!;
    const summary = await execute(temporal, worker, { harvest: { ...channel(handle, 200), enrich: { stats: true, comments: false, transcript: false, summary: false, download: false } } });
    expect(summary.status).toBe('completed');
    expect(summary.callsLost).toBe(0);
    const ledger = await emulator.ledger(HARVEST_KEY);
    expect(summary.creditsSpent).toBe(ledger.reduce((sum, row) => sum + row.credits, 0));
    const stats = await queryWarehouse(worker.dataDir, "SELECT count(DISTINCT item_id) AS d FROM item_metrics WHERE source_endpoint = 'tiktok/stats'");
    expect(stats.rows[0]).toEqual({ d: '200' });
  }, 120_000);
});
