import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { Client } from '@temporalio/client';
import { listLandings } from '../../src/warehouse/landing.js';
import { queryWarehouse } from '../../src/warehouse/query.js';
import type { HarvestSummary } from '../../workflows/harvest.js';
import { CLI } from '../support/cli.js';
import { startTestEmulator, waitFor, type TestEmulator } from '../support/emulator.js';
import { harvestFrom, prices, temporalClient } from '../support/temporal.js';

let emulator: TestEmulator;
let temporal: Client;
beforeAll(async () => {
  // Some latency per call, so the kill lands mid-harvest and mid-call.
  emulator = await startTestEmulator({ apiKeys: ['sk_live_crash'], latencyMs: 60 });
  temporal = await temporalClient();
});
afterAll(async () => {
  await temporal.connection.close();
  await emulator.close();
});

/** `harvester worker` as its own process, as operators run it. */
function startWorkerProcess(env: Record<string, string>): ChildProcess {
  return spawn(process.execPath, [CLI, 'worker'], { env: { ...process.env, ...env, LOG_LEVEL: 'error' }, stdio: ['ignore', 'ignore', 'inherit'] });
}

describe('a worker killed mid-harvest', () => {
  it('resumes on a new worker: no duplicate rows, and at most one page paid twice per kill', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'crash-'));
    const taskQueue = `crash-${Date.now()}`;
    const env = {
      TEMPORAL_ADDRESS: inject('temporalAddress'),
      HARVESTER_TASK_QUEUE: taskQueue,
      HARVESTER_DATA_DIR: dataDir,
      SOCIAL_API_BASE_URL: emulator.baseUrl,
      SOCIAL_API_KEY: 'sk_live_crash',
    };
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
    await waitFor(() => (listLandings(dataDir).length >= 12 ? true : undefined), 60_000, 'a dozen pages landed');
    const exited = new Promise((resolve) => first.once('exit', (_code, signal) => resolve(signal)));
    first.kill('SIGKILL');
    expect(await exited).toBe('SIGKILL');
    const landedAtKill = listLandings(dataDir).length;
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
});
