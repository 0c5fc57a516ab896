/**
 * Outages of the shared store's services in the middle of a run, on the distributed stack (two
 * workers with no disk in common, PostgreSQL and MinIO): PostgreSQL stopped for longer than the
 * activities' old five attempts lasted (about 15 s), and MinIO frozen (SIGSTOP). The run waits them
 * out and ends `completed`, in one execution (no retry), with every item once and its credits equal
 * to the ledger.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { Client } from '@temporalio/client';
import { startSharedServices, type SharedServices } from '../../src/cli/shared-services.js';
import { queryWarehouse } from '../../src/warehouse/query.js';
import type { HarvestSummary } from '../../workflows/harvest.js';
import { CLI } from '../support/cli.js';
import { startTestEmulator, waitFor, type TestEmulator } from '../support/emulator.js';
import { harvestFrom, temporalClient } from '../support/temporal.js';

const API_KEY = 'sk_live_outages';
let emulator: TestEmulator;
let temporal: Client;
let services: SharedServices;
let sharedEnv: Record<string, string>;
let folder: string;
const scratches: string[] = [];
const savedEnv = { ...process.env };

beforeAll(async () => {
  folder = mkdtempSync(join(tmpdir(), 'outages-'));
  chmodSync(folder, 0o755);
  services = await startSharedServices(folder);
  emulator = await startTestEmulator({ apiKeys: [API_KEY], latencyMs: 40 });
  temporal = await temporalClient();
}, 180_000);
afterAll(async () => {
  process.env = savedEnv;
  await temporal?.connection.close();
  await emulator?.close();
  await services?.stop();
  for (const scratch of scratches) rmSync(scratch, { recursive: true, force: true });
  if (folder) rmSync(folder, { recursive: true, force: true });
});

function startWorker(taskQueue: string, prefix: string): ChildProcess {
  const scratch = mkdtempSync(join(tmpdir(), 'outage-machine-'));
  scratches.push(scratch);
  const env = { ...process.env, ...services.environment(prefix), TEMPORAL_ADDRESS: inject('temporalAddress'), HARVESTER_TASK_QUEUE: taskQueue, HARVESTER_DATA_DIR: scratch, SOCIAL_API_BASE_URL: emulator.baseUrl, SOCIAL_API_KEY: API_KEY, LOG_LEVEL: 'error' };
  return spawn(process.execPath, [CLI, 'worker'], { env, stdio: ['ignore', 'ignore', 'inherit'] });
}

async function stopAll(workers: ChildProcess[]): Promise<void> {
  for (const worker of workers) worker.kill('SIGTERM');
  await Promise.all(workers.map((worker) => new Promise((resolve) => (worker.exitCode !== null || worker.signalCode !== null ? resolve(undefined) : worker.once('exit', resolve)))));
}

/**
 * A harvest of three targets with stats (the emulator's handles at `handles`: each case lists
 * channels of its own, as the catalog's coverage is shared), on two workers; `outage` is made
 * once `callsBefore` calls are charged.
 */
async function harvestThrough(name: string, handles: [number, number, number], callsBefore: number, outage: () => Promise<void>): Promise<void> {
  const catalog = await emulator.catalog();
  const budget = 40_000;
  const harvest = harvestFrom(`
harvests:
  - name: ${name}
    budget: { credits: ${budget} }
    concurrency: { targets: 3, calls: 6 }
    channels:
      - { platform: tiktok, handle: ${catalog.tiktok.handles[handles[0]]}, content: videos, max_items: 120 }
      - { platform: tiktok, handle: ${catalog.tiktok.handles[handles[1]]}, content: videos, max_items: 120 }
      - { platform: instagram, handle: ${catalog.instagram.handles[handles[2]]}, content: reels, max_items: 120 }
    enrich: { stats: true }
`);
  const taskQueue = `${name}-${Date.now()}`;
  sharedEnv = services.environment(name);
  const ledgerBefore = await emulator.ledger(API_KEY);
  const workers = [startWorker(taskQueue, name), startWorker(taskQueue, name)];
  const workflowId = `${name}-${Date.now()}`;
  const run = await temporal.workflow.start('harvestWorkflow', { taskQueue, workflowId, args: [{ harvest, pageSize: 20 }] });
  try {
    const calls = async () => (await emulator.ledger(API_KEY)).length - ledgerBefore.length;
    await waitFor(async () => ((await calls()) >= callsBefore ? true : undefined), 90_000, `${callsBefore} calls charged`);
    await outage();
    const summary = (await run.result()) as HarvestSummary;
    expect(summary.status, summary.reason).toBe('completed');
    expect(summary.itemsLanded).toBe(360);
    // One execution: the run was not failed and retried.
    const executions = [];
    for await (const execution of temporal.workflow.list({ query: `WorkflowId = '${workflowId}'` })) executions.push(execution);
    expect(executions).toHaveLength(1);

    const ledger = (await emulator.ledger(API_KEY)).slice(ledgerBefore.length);
    const charged = ledger.reduce((sum, row) => sum + row.credits, 0);
    expect(charged).toBeLessThanOrEqual(budget);
    Object.assign(process.env, sharedEnv);
    const reader = mkdtempSync(join(tmpdir(), 'outage-reader-'));
    scratches.push(reader);
    const one = async (sql: string) => Object.values((await queryWarehouse(reader, sql)).rows[0]!).map(String);
    expect(await one(`SELECT count(*), count(DISTINCT (platform, item_id)) FROM items`)).toEqual(['360', '360']);
    const landed = new Set((await queryWarehouse(reader, `SELECT request_id FROM api_calls`)).rows.map((row) => String(row.request_id)));
    const paidNotLanded = ledger.filter((row) => !landed.has(row.request_id));
    // Every credit the API charged is in the run's figure, and nothing it did not charge: calls
    // counted as lost are the ones whose answers were not landed.
    expect(summary.creditsSpent).toBe(charged);
    expect(paidNotLanded.length).toBeLessThanOrEqual(summary.callsLost);
    // What the warehouse says of the run (harvest_runs) agrees with the ledger.
    expect(await one(`SELECT credits_spent FROM harvest_runs WHERE run_id = '${workflowId}'`)).toEqual([String(charged)]);
  } finally {
    await stopAll(workers);
  }
}

describe('a run through outages of the shared store', () => {
  it('waits out PostgreSQL stopped for 30 s in the middle of the run, and ends completed with credits = ledger', async () => {
    await harvestThrough('pg-outage', [1, 2, 1], 80, async () => {
      await services.postgres.stop();
      await sleep(30_000);
      await services.postgres.start();
    });
  }, 300_000);

  it('waits out MinIO frozen for 30 s in the middle of the run, and ends completed with credits = ledger', async () => {
    await harvestThrough('minio-freeze', [3, 4, 2], 80, async () => {
      const pid = services.minio.pid()!;
      process.kill(pid, 'SIGSTOP');
      await sleep(30_000);
      process.kill(pid, 'SIGCONT');
    });
  }, 300_000);
});
