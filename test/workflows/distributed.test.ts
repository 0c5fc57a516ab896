/**
 * Workers on three "machines" (three processes, each with its own scratch directory and no disk
 * in common) sharing one store: PostgreSQL for the journals, coverage and jobs, MinIO (S3) for the
 * landings, and the lake's PostgreSQL catalog with its data files in MinIO. One worker after
 * another is SIGKILLed mid-harvest; the run finishes on the others.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { Client } from '@temporalio/client';
import { startSharedServices, type SharedServices } from '../../src/cli/shared-services.js';
import { ObjectStorage } from '../../src/store/shared/object-storage.js';
import { objectStorageSettings } from '../../src/store/shared/shared-settings.js';
import { queryWarehouse } from '../../src/warehouse/query.js';
import type { HarvestSummary } from '../../workflows/harvest.js';
import { CLI } from '../support/cli.js';
import { startTestEmulator, waitFor, type TestEmulator } from '../support/emulator.js';
import { harvestFrom, temporalClient } from '../support/temporal.js';

const API_KEY = 'sk_live_distributed';
let emulator: TestEmulator;
let temporal: Client;
let services: SharedServices;
/** What every worker (and this test, to read the lake) is given: the shared store. */
let sharedEnv: Record<string, string>;
const savedEnv = { ...process.env };

beforeAll(async () => {
  const folder = mkdtempSync(join(tmpdir(), 'distributed-'));
  // PostgreSQL may run as another user (see startPostgres): it must reach its folder.
  chmodSync(folder, 0o755);
  services = await startSharedServices(folder);
  sharedEnv = services.environment('harvests');
  // Latency per call, so each kill lands with calls in flight.
  emulator = await startTestEmulator({ apiKeys: [API_KEY], latencyMs: 60 });
  temporal = await temporalClient();
}, 180_000);
afterAll(async () => {
  process.env = savedEnv;
  await temporal?.connection.close();
  await emulator?.close();
  await services?.stop();
});

/** A worker on a machine of its own: a fresh scratch directory, and the shared store. */
function startWorkerMachine(taskQueue: string): { process: ChildProcess; scratch: string } {
  const scratch = mkdtempSync(join(tmpdir(), 'machine-'));
  const env = { ...process.env, ...sharedEnv, TEMPORAL_ADDRESS: inject('temporalAddress'), HARVESTER_TASK_QUEUE: taskQueue, HARVESTER_DATA_DIR: scratch, SOCIAL_API_BASE_URL: emulator.baseUrl, SOCIAL_API_KEY: API_KEY, LOG_LEVEL: 'error' };
  return { process: spawn(process.execPath, [CLI, 'worker'], { env, stdio: ['ignore', 'ignore', 'inherit'] }), scratch };
}

async function kill(worker: { process: ChildProcess; scratch: string }): Promise<void> {
  const exited = new Promise((resolve) => worker.process.once('exit', (_code, signal) => resolve(signal)));
  worker.process.kill('SIGKILL');
  expect(await exited).toBe('SIGKILL');
  // Its disk is gone with it: nothing of the run may depend on it.
  rmSync(worker.scratch, { recursive: true, force: true });
}

describe('three workers with no shared disk, one store', () => {
  it('finish a harvest with enrichment while one worker after another is killed: every item once, the ledger in the run\'s figures, re-paid at most the calls in flight', async () => {
    const catalog = await emulator.catalog();
    const budget = 60_000;
    const harvest = harvestFrom(`
harvests:
  - name: distributed
    budget: { credits: ${budget} }
    concurrency: { targets: 3, calls: 8 }
    channels:
      - { platform: tiktok, handle: ${catalog.tiktok.handles[4]}, content: videos, max_items: 200 }
      - { platform: tiktok, handle: ${catalog.tiktok.handles[5]}, content: videos, max_items: 200 }
      - { platform: instagram, handle: ${catalog.instagram.handles[4]}, content: reels, max_items: 200 }
    enrich: { stats: true }
`);
    const taskQueue = `distributed-${Date.now()}`;
    const workers = [startWorkerMachine(taskQueue), startWorkerMachine(taskQueue), startWorkerMachine(taskQueue)];
    const run = await temporal.workflow.start('harvestWorkflow', { taskQueue, workflowId: `distributed-${Date.now()}`, args: [{ harvest, pageSize: 20 }] });
    const calls = async () => (await emulator.ledger(API_KEY)).length;
    try {
      // One worker after another, each replaced by a new machine: the run moves between them.
      for (const [victim, callsBefore] of [
        [0, 120],
        [1, 320],
      ] as const) {
        await waitFor(async () => ((await calls()) >= callsBefore ? true : undefined), 90_000, `${callsBefore} calls charged`);
        await kill(workers[victim]!);
        workers[victim] = startWorkerMachine(taskQueue);
      }
      const summary = (await run.result()) as HarvestSummary;
      expect(summary.status).toBe('completed');
      expect(summary.itemsLanded).toBe(600);

      // The lake is shared too: this process reads it as any reader would, from the store's settings.
      Object.assign(process.env, sharedEnv);
      const reader = mkdtempSync(join(tmpdir(), 'reader-'));
      const one = async (sql: string) => Object.values((await queryWarehouse(reader, sql)).rows[0]!).map(String);
      expect(await one('SELECT count(*), count(DISTINCT (platform, item_id)) FROM items')).toEqual(['600', '600']);
      // Two observations of each item, its listing's and its stats call's, each once.
      expect(await one('SELECT count(*), count(DISTINCT (platform, item_id, request_id)) FROM item_metrics')).toEqual(['1200', '1200']);
      expect(await one('SELECT count(*) - count(DISTINCT landing) FROM loaded_landings')).toEqual(['0']);

      const ledger = await emulator.ledger(API_KEY);
      const charged = ledger.reduce((sum, row) => sum + row.credits, 0);
      const landed = new Set((await queryWarehouse(reader, 'SELECT request_id FROM api_calls')).rows.map((row) => String(row.request_id)));
      const [landedCredits] = await one('SELECT sum(credits) FROM api_calls');
      const paidNotLanded = ledger.filter((row) => !landed.has(row.request_id));
      // Every credit the API charged is in the run's figures, and the budget held. A call a kill cut
      // off after its intent was journaled and before the API charged it counts at its worst case
      // (whether it reached the API is never known: src/store/call-journal.ts): the figures exceed
      // the ledger by those calls' worst cases at most (a page of 20 videos, 60 credits, the most), never fall short.
      expect(Number(landedCredits) + paidNotLanded.reduce((sum, row) => sum + row.credits, 0)).toBe(charged);
      expect(charged).toBeLessThanOrEqual(budget);
      // Re-paid: at most the calls in flight at the two kills (3 listings and 8 calls each).
      expect(paidNotLanded.length).toBeLessThanOrEqual(summary.callsLost);
      const lostUncharged = summary.callsLost - paidNotLanded.length;
      expect(summary.creditsSpent - charged).toBeGreaterThanOrEqual(0);
      expect(summary.creditsSpent - charged).toBeLessThanOrEqual(lostUncharged * 60);
      expect(summary.callsLost).toBeLessThanOrEqual(2 * (3 + 8));

      // The answers went up in groups, a group per work's checkpoint (about a second), not an
      // object per answer: each upload is a segment of its own name, which the lake records.
      // (A segment named catalog-… was staged from the answers the catalog kept for a killed worker: not an upload.)
      const [segments, fromCatalog] = await one("SELECT count(DISTINCT segment) FILTER (WHERE segment NOT LIKE '%/catalog-%'), count(DISTINCT segment) FILTER (WHERE segment LIKE '%/catalog-%') FROM loaded_segments");
      console.log(`distributed: ${ledger.length} calls charged, ${segments} segment objects uploaded, ${fromCatalog} staged from the catalog, ${summary.callsLost} calls lost`);
      expect(Number(segments)).toBeGreaterThan(0);
      expect(Number(segments)).toBeLessThanOrEqual(ledger.length / 3);
      // Nothing of the run is left behind in the object store once its answers are in the lake.
      const objects = new ObjectStorage(objectStorageSettings(sharedEnv.HARVESTER_STORAGE!, { ...process.env, ...sharedEnv }));
      try {
        expect(await objects.list('segments/')).toEqual([]);
      } finally {
        objects.close();
      }
    } finally {
      for (const worker of workers) worker.process.kill('SIGTERM');
      await Promise.all(workers.map((worker) => new Promise((resolve) => (worker.process.exitCode !== null ? resolve(undefined) : worker.process.once('exit', resolve)))));
    }
  }, 300_000);
});
