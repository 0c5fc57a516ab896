import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { Client } from '@temporalio/client';
import { landedKeys } from '../support/landed.js';
import { queryWarehouse } from '../../src/warehouse/query.js';
import type { HarvestSummary } from '../../workflows/harvest.js';
import { CLI } from '../support/cli.js';
import { busiestTikTokChannel, clientFor } from '../support/client.js';
import { startTestEmulator, waitFor, type TestEmulator } from '../support/emulator.js';
import { harvestFrom, prices, temporalClient } from '../support/temporal.js';

let emulator: TestEmulator;
let temporal: Client;
beforeAll(async () => {
  // Some latency per call, so the kill lands mid-harvest and mid-call.
  emulator = await startTestEmulator({ apiKeys: ['sk_live_crash', 'sk_live_crash_budget'], latencyMs: 60 });
  temporal = await temporalClient();
});
afterAll(async () => {
  await temporal.connection.close();
  await emulator.close();
});

/** A worker's own data directory and task queue, and the environment `harvester worker` reads them from. */
function workerSetting(name: string, apiKey: string) {
  const dataDir = mkdtempSync(join(tmpdir(), `${name}-`));
  const taskQueue = `${name}-${Date.now()}`;
  const env = { TEMPORAL_ADDRESS: inject('temporalAddress'), HARVESTER_TASK_QUEUE: taskQueue, HARVESTER_DATA_DIR: dataDir, SOCIAL_API_BASE_URL: emulator.baseUrl, SOCIAL_API_KEY: apiKey };
  return { dataDir, taskQueue, env };
}

/** `harvester worker` as its own process, as operators run it. */
function startWorkerProcess(env: Record<string, string>): ChildProcess {
  return spawn(process.execPath, [CLI, 'worker'], { env: { ...process.env, ...env, LOG_LEVEL: 'error' }, stdio: ['ignore', 'ignore', 'inherit'] });
}

describe('a worker killed mid-harvest', () => {
  it('resumes on a new worker: no duplicate rows, and at most one page paid twice per kill', async () => {
    const { dataDir, taskQueue, env } = workerSetting('crash', 'sk_live_crash');
    const handle = (await emulator.catalog()).tiktok.handles[10]!;
    const harvest = harvestFrom(`
harvests:
  - name: crash
    budget: { credits: 100000 }
    channels:
      - { platform: tiktok, handle: ${handle}, content: videos, max_items: 400 }
`);
    const first = startWorkerProcess(env);
    const run = await temporal.workflow.start('harvestWorkflow', { taskQueue, workflowId: `crash-${Date.now()}`, args: [{ harvest, pageSize: 10 }] });
    await waitFor(() => (landedKeys(dataDir).length >= 12 ? true : undefined), 60_000, 'a dozen pages landed');
    const exited = new Promise((resolve) => first.once('exit', (_code, signal) => resolve(signal)));
    first.kill('SIGKILL');
    expect(await exited).toBe('SIGKILL');
    const landedAtKill = landedKeys(dataDir).length;
    expect(landedAtKill).toBeLessThan(40);
    const second = startWorkerProcess(env);
    try {
      const summary = (await run.result()) as HarvestSummary;
      expect(summary.status).toBe('completed');
      expect(summary.targets[0]).toMatchObject({ items: 400, pages: 40 });
      const items = await queryWarehouse(dataDir, 'SELECT count(*) AS n, count(DISTINCT item_id) AS d FROM items');
      expect(items.rows[0]).toEqual({ n: '400', d: '400' });
      const metrics = await queryWarehouse(dataDir, 'SELECT count(*) AS n, count(DISTINCT (item_id, request_id)) AS d FROM item_metrics');
      expect(metrics.rows[0]).toEqual({ n: '400', d: '400' });
      const ledger = await emulator.ledger('sk_live_crash');
      const landed = new Set((await queryWarehouse(dataDir, 'SELECT request_id FROM api_calls')).rows.map((row) => row.request_id));
      const paidNotLanded = ledger.filter((row) => !landed.has(row.request_id));
      expect(landed.size).toBe(40);
      // One kill: at most the one page whose answer was in flight is paid a second time.
      expect(paidNotLanded.length).toBeLessThanOrEqual(1);
      expect(ledger.reduce((sum, row) => sum + row.credits, 0)).toBeLessThanOrEqual((400 + 10) * prices['tiktok/channel-videos']);
    } finally {
      second.kill('SIGTERM');
      await new Promise((resolve) => second.once('exit', resolve));
    }
  }, 120_000);

  it('a budget holds across two kills with many calls in flight, and every credit charged is in the run\'s figures', { tags: ['long'], timeout: 180_000 }, async () => {
    const { dataDir, taskQueue, env } = workerSetting('crash-budget', 'sk_live_crash_budget');
    const catalog = await emulator.catalog();
    const budget = 2_500;
    const harvest = harvestFrom(`
harvests:
  - name: crash-budget
    budget: { credits: ${budget} }
    concurrency: { targets: 3, calls: 16 }
    channels:
      - { platform: tiktok, handle: ${catalog.tiktok.handles[9]}, content: videos, max_items: 300 }
      - { platform: tiktok, handle: ${catalog.tiktok.handles[11]}, content: videos, max_items: 300 }
      - { platform: instagram, handle: ${catalog.instagram.handles[9]}, content: reels, max_items: 300 }
    enrich: { stats: true, comments: { max_per_item: 5 } }
`);
    let worker = startWorkerProcess(env);
    const run = await temporal.workflow.start('harvestWorkflow', { taskQueue, workflowId: `crash-budget-${Date.now()}`, args: [{ harvest, pageSize: 20 }] });
    try {
      for (const landed of [40, 120]) {
        await waitFor(() => (landedKeys(dataDir).length >= landed ? true : undefined), 60_000, `${landed} landings`);
        const exited = new Promise((resolve) => worker.once('exit', (_code, signal) => resolve(signal)));
        worker.kill('SIGKILL');
        expect(await exited).toBe('SIGKILL');
        worker = startWorkerProcess(env);
      }
      const summary = (await run.result()) as HarvestSummary;
      const ledger = await emulator.ledger('sk_live_crash_budget');
      const charged = ledger.reduce((sum, row) => sum + row.credits, 0);
      // The API never charged beyond the budget, and the run's figures hold every credit it did
      // charge: calls a kill cut off are counted at their worst case.
      expect(charged).toBeLessThanOrEqual(budget);
      expect(summary.creditsSpent).toBeLessThanOrEqual(budget);
      expect(summary.creditsSpent).toBeGreaterThanOrEqual(charged);
      expect(summary.status).toBe('budget_exhausted');
      const landed = new Set((await queryWarehouse(dataDir, 'SELECT request_id FROM api_calls')).rows.map((row) => row.request_id));
      const paidNotLanded = ledger.filter((row) => !landed.has(row.request_id));
      // At most the calls in flight at each kill are paid again: 3 pages and 16 calls, twice.
      expect(paidNotLanded.length).toBeLessThanOrEqual(summary.callsLost);
      expect(summary.callsLost).toBeLessThanOrEqual(2 * (3 + 16));
      const items = await queryWarehouse(dataDir, 'SELECT count(*) AS n, count(DISTINCT (platform, item_id)) AS d FROM items');
      expect(items.rows[0]!.n).toBe(items.rows[0]!.d);
      const metrics = await queryWarehouse(dataDir, 'SELECT count(*) AS n, count(DISTINCT (platform, item_id, request_id)) AS d FROM item_metrics');
      expect(metrics.rows[0]!.n).toBe(metrics.rows[0]!.d);
    } finally {
      worker.kill('SIGTERM');
      await new Promise((resolve) => worker.once('exit', resolve));
    }
  });

  it('tracked items observed by a killed worker are not bought again by the next: each due item once, re-paid at most the calls in flight', async () => {
    const { dataDir, taskQueue, env } = workerSetting('crash-tracking', 'sk_live_crash');
    // The channel that posts most often: many items due, so the kill lands with calls in flight.
    const api = clientFor(emulator, { apiKey: 'sk_live_crash' });
    const handle = await busiestTikTokChannel(api, (await emulator.catalog()).tiktok.handles);
    await api.close();
    const harvest = harvestFrom(`
harvests:
  - name: crash-tracking
    budget: { credits: 100000 }
    concurrency: { targets: 1, calls: 8 }
    track: { items: { days: 30 } }
    channels:
      - { platform: tiktok, handle: ${handle}, content: videos, max_items: 300 }
`);
    let worker = startWorkerProcess(env);
    try {
      const listed = (await temporal.workflow.execute('harvestWorkflow', { taskQueue, workflowId: `crash-tracking-a-${Date.now()}`, args: [{ harvest }] })) as HarvestSummary;
      expect(listed.status).toBe('completed');
      await emulator.admin('clock', { advance_seconds: 3 * 86_400 });
      const before = (await emulator.ledger('sk_live_crash')).length;
      const run = await temporal.workflow.start('harvestWorkflow', { taskQueue, workflowId: `crash-tracking-b-${Date.now()}`, args: [{ harvest }] });
      const tracked = () => landedKeys(dataDir).filter((key) => key.startsWith(run.workflowId) && key.includes('stats')).length;
      await waitFor(() => (tracked() >= 20 ? true : undefined), 60_000, 'twenty tracked observations landed');
      const exited = new Promise((resolve) => worker.once('exit', (_code, signal) => resolve(signal)));
      worker.kill('SIGKILL');
      expect(await exited).toBe('SIGKILL');
      worker = startWorkerProcess(env);
      const summary = (await run.result()) as HarvestSummary;
      expect(summary.status).toBe('completed');
      const due = summary.trackedItems!.due;
      expect(due).toBeGreaterThan(100);
      expect(summary.trackedItems!.observed).toBe(due);
      const charged = (await emulator.ledger('sk_live_crash')).slice(before);
      const stats = charged.filter((row) => row.endpoint === 'tiktok/stats');
      // Each due item observed once in the warehouse; the API paid again at most the 8 calls in flight.
      const observed = await queryWarehouse(dataDir, `SELECT count(*) AS n, count(DISTINCT params->>'url') AS d FROM api_calls WHERE run_id = '${run.workflowId}' AND endpoint = 'tiktok/stats'`);
      expect(observed.rows[0]).toEqual({ n: String(due), d: String(due) });
      expect(stats.length - due).toBeLessThanOrEqual(8);
      expect(stats.length - due).toBeLessThanOrEqual(summary.callsLost);
      // Every credit charged is in the run's figures, re-paid calls counted at their charge or worst case.
      expect(summary.creditsSpent).toBeGreaterThanOrEqual(charged.reduce((sum, row) => sum + row.credits, 0));
      expect(summary.creditsSpent).toBeLessThanOrEqual(charged.reduce((sum, row) => sum + row.credits, 0) + 8 * prices['tiktok/stats']);
    } finally {
      worker.kill('SIGTERM');
      await new Promise((resolve) => worker.once('exit', resolve));
    }
  }, 180_000);
});
