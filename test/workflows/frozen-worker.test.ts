/**
 * A worker frozen (SIGSTOP) with calls in flight, its work taken over by another worker, woken
 * (SIGCONT) after the run is over (issue 39): it makes no new billed call, and the run's credits
 * equal the emulator's ledger after it wakes.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { Client } from '@temporalio/client';
import { landedKeys } from '../support/landed.js';
import type { HarvestSummary } from '../../workflows/harvest.js';
import { CLI } from '../support/cli.js';
import { startTestEmulator, waitFor, type TestEmulator } from '../support/emulator.js';
import { harvestFrom, temporalClient } from '../support/temporal.js';

const API_KEY = 'sk_live_frozen';
let emulator: TestEmulator;
let temporal: Client;
beforeAll(async () => {
  emulator = await startTestEmulator({ apiKeys: [API_KEY], latencyMs: 60 });
  temporal = await temporalClient();
});
afterAll(async () => {
  await temporal.connection.close();
  await emulator.close();
});

function startWorkerProcess(env: Record<string, string>): ChildProcess {
  return spawn(process.execPath, [CLI, 'worker'], { env: { ...process.env, ...env, LOG_LEVEL: 'error' }, stdio: ['ignore', 'ignore', 'inherit'] });
}

async function stop(worker: ChildProcess): Promise<void> {
  if (worker.exitCode !== null || worker.signalCode !== null) return;
  const exited = new Promise((resolve) => worker.once('exit', resolve));
  worker.kill('SIGCONT');
  worker.kill('SIGTERM');
  await exited;
}

const charged = async () => (await emulator.ledger(API_KEY)).reduce((sum, row) => sum + row.credits, 0);

describe('a worker frozen with calls in flight, woken after its run is over', () => {
  it('makes no new billed call: the run\'s credits equal the ledger after it wakes', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'frozen-'));
    const taskQueue = `frozen-${Date.now()}`;
    const env = { TEMPORAL_ADDRESS: inject('temporalAddress'), HARVESTER_TASK_QUEUE: taskQueue, HARVESTER_DATA_DIR: dataDir, SOCIAL_API_BASE_URL: emulator.baseUrl, SOCIAL_API_KEY: API_KEY };
    const catalog = await emulator.catalog();
    const harvest = harvestFrom(`
harvests:
  - name: frozen
    budget: { credits: 100000 }
    concurrency: { targets: 3, calls: 16 }
    channels:
      - { platform: tiktok, handle: ${catalog.tiktok.handles[6]}, content: videos, max_items: 200 }
      - { platform: tiktok, handle: ${catalog.tiktok.handles[7]}, content: videos, max_items: 200 }
      - { platform: instagram, handle: ${catalog.instagram.handles[6]}, content: reels, max_items: 200 }
    enrich: { stats: true }
`);
    const frozen = startWorkerProcess(env);
    let other: ChildProcess | undefined;
    try {
      const run = await temporal.workflow.start('harvestWorkflow', { taskQueue, workflowId: `frozen-${Date.now()}`, args: [{ harvest, pageSize: 20 }] });
      await waitFor(() => (landedKeys(dataDir).length >= 100 ? true : undefined), 60_000, 'a hundred answers landed');
      frozen.kill('SIGSTOP');
      other = startWorkerProcess(env);
      const summary = (await run.result()) as HarvestSummary;
      expect(summary.status).toBe('completed');
      const atEnd = await charged();
      const rowsAtEnd = (await emulator.ledger(API_KEY)).length;
      frozen.kill('SIGCONT');
      // The woken worker's timers, sockets and retries all run again.
      await sleep(15_000);
      const afterWake = await charged();
      console.log(JSON.stringify((await emulator.ledger(API_KEY)).slice(rowsAtEnd)));
      console.log(require('node:child_process').execSync(`find ${dataDir}/journal`).toString());
      console.log(`frozen worker: run ${summary.creditsSpent} credits, ${summary.callsLost} calls lost; ledger ${atEnd} at the end, ${afterWake} after the wake`);
      expect(afterWake).toBe(atEnd);
      expect(summary.creditsSpent).toBe(afterWake);
    } finally {
      await stop(frozen);
      if (other) await stop(other);
    }
  }, 180_000);
});
