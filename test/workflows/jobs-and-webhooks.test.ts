import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Client } from '@temporalio/client';
import { scheduleIdOf } from '../../src/temporal/schedules.js';
import { creditsLow } from '../../src/store/credit-alerts.js';
import { LocalStore } from '../../src/store/store.js';
import { startWebhookReceiver, type WebhookReceiver } from '../../src/webhooks/receiver.js';
import { CREDITS_LOW_NOTE, temporalWebhookHandler } from '../../src/webhooks/temporal-bridge.js';
import { queryWarehouse } from '../../src/warehouse/query.js';
import type { HarvestSummary } from '../../workflows/harvest.js';
import { clientFor } from '../support/client.js';
import { startTestEmulator, waitFor, type TestEmulator } from '../support/emulator.js';
import { DEV_CERT_FILE, DEV_KEY_FILE, devCa } from '../support/https-receiver.js';
import { harvestFrom, prices, startTestWorker, temporalClient } from '../support/temporal.js';

let emulator: TestEmulator;
let temporal: Client;
const cleanups: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  emulator = await startTestEmulator({ webhookCa: devCa(), jobStepMs: 300 });
  temporal = await temporalClient();
});
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
  await temporal.connection.close();
  await emulator.close();
});

/** The receiver wired to Temporal as `harvester dev` wires it, verifying with the registered secrets. */
async function bridgedReceiver(dataDir: string, apiKey: string): Promise<WebhookReceiver> {
  const secrets: string[] = [];
  const receiver = await startWebhookReceiver({
    cert: readFileSync(DEV_CERT_FILE),
    key: readFileSync(DEV_KEY_FILE),
    secrets: () => secrets,
    journalFile: join(dataDir, 'webhooks', 'journal.jsonl'),
    onEvent: temporalWebhookHandler(temporal, new LocalStore(dataDir)),
  });
  cleanups.push(() => receiver.close());
  const api = clientFor(emulator, { apiKey });
  secrets.push((await api.createWebhook(receiver.url, ['job.completed', 'credits.low', 'plan.changed'])).secret);
  await api.close();
  return receiver;
}

async function historyHasSignal(workflowId: string): Promise<boolean> {
  const history = await temporal.workflow.getHandle(workflowId).fetchHistory();
  return (history.events ?? []).some((event) => event.workflowExecutionSignaledEventAttributes?.signalName === 'jobCompleted');
}

const jobHarvest = (handle: string) =>
  harvestFrom(`
harvests:
  - name: big-pull
    budget: { credits: 100000 }
    job_threshold: 100
    channels:
      - { platform: instagram, handle: ${handle}, content: posts, max_items: 450 }
`);

describe('big pulls through async jobs', () => {
  it('the job path, woken by the job.completed webhook as a signal', async () => {
    await emulator.admin('keys', { api_key: 'sk_live_jobs_webhook', credits: 100_000 });
    const api = clientFor(emulator, { apiKey: 'sk_live_jobs_webhook' });
    const worker = await startTestWorker(api);
    cleanups.push(async () => {
      await worker.stop();
      await api.close();
    });
    await bridgedReceiver(worker.dataDir, 'sk_live_jobs_webhook');
    const handle = (await emulator.catalog()).instagram.handles[4]!;
    const workflowId = `jobs-webhook-${Date.now()}`;
    const summary = (await temporal.workflow.execute('harvestWorkflow', { taskQueue: worker.taskQueue, workflowId, args: [{ harvest: jobHarvest(handle) }] })) as HarvestSummary;
    expect(summary.status).toBe('completed');
    expect(summary.targets[0]).toMatchObject({ items: 450, credits: 450 * prices['instagram/channel-posts'] });
    expect(await historyHasSignal(workflowId)).toBe(true);
    const ledger = await emulator.ledger('sk_live_jobs_webhook');
    expect(ledger).toEqual([expect.objectContaining({ units: 450, credits: 900, job_id: expect.stringMatching(/^job_/) })]);
    const items = await queryWarehouse(worker.dataDir, 'SELECT count(*) AS n, count(DISTINCT item_id) AS d FROM items');
    expect(items.rows[0]).toEqual({ n: '450', d: '450' });
    const calls = await queryWarehouse(worker.dataDir, 'SELECT request_id, credits, job_id FROM api_calls');
    expect(calls.rows).toEqual([{ request_id: ledger[0]!.request_id, credits: '900', job_id: ledger[0]!.job_id }]);
  });

  it('the job path, woken by polling when no webhook is registered', async () => {
    await emulator.admin('keys', { api_key: 'sk_live_jobs_polling', credits: 100_000 });
    const api = clientFor(emulator, { apiKey: 'sk_live_jobs_polling' });
    const worker = await startTestWorker(api);
    cleanups.push(async () => {
      await worker.stop();
      await api.close();
    });
    const handle = (await emulator.catalog()).instagram.handles[5]!;
    const workflowId = `jobs-polling-${Date.now()}`;
    const summary = (await temporal.workflow.execute('harvestWorkflow', { taskQueue: worker.taskQueue, workflowId, args: [{ harvest: jobHarvest(handle) }] })) as HarvestSummary;
    expect(summary.status).toBe('completed');
    expect(summary.targets[0]!.items).toBe(450);
    expect(await historyHasSignal(workflowId)).toBe(false);
    expect((await emulator.ledger('sk_live_jobs_polling')).map((row) => row.units)).toEqual([450]);
  });
});

describe('enrichment of a job pull', () => {
  it("enriches the items a job listed, reading their URLs from the job's landed pages", async () => {
    await emulator.admin('keys', { api_key: 'sk_live_jobs_enriched', credits: 100_000 });
    const api = clientFor(emulator, { apiKey: 'sk_live_jobs_enriched' });
    const worker = await startTestWorker(api);
    cleanups.push(async () => {
      await worker.stop();
      await api.close();
    });
    const harvest = harvestFrom(`
harvests:
  - name: big-pull-enriched
    budget: { credits: 100000 }
    job_threshold: 100
    channels:
      - { platform: instagram, handle: ${(await emulator.catalog()).instagram.handles[7]}, content: posts, max_items: 150 }
    enrich: { stats: true }
`);
    const summary = (await temporal.workflow.execute('harvestWorkflow', { taskQueue: worker.taskQueue, workflowId: `jobs-enriched-${Date.now()}`, args: [{ harvest }] })) as HarvestSummary;
    expect(summary.status).toBe('completed');
    expect(summary.enrichment).toMatchObject({ calls: 150, failed: 0, pending: 0 });
    const stats = await queryWarehouse(worker.dataDir, "SELECT count(DISTINCT item_id) AS n FROM item_metrics WHERE source_endpoint = 'instagram/stats'");
    expect(stats.rows[0]).toEqual({ n: '150' });
    const ledger = await emulator.ledger('sk_live_jobs_enriched');
    expect(ledger.filter((row) => row.endpoint === 'instagram/stats').length).toBe(150);
    expect(summary.creditsSpent).toBe(150 * prices['instagram/channel-posts'] + 150 * prices['instagram/stats']);
  });
});

describe('credits.low and plan.changed', () => {
  it('credits.low pauses the schedules and stops new runs; plan.changed resumes them', async () => {
    const apiKey = 'sk_live_running_low';
    await emulator.admin('keys', { api_key: apiKey, credits: 1_000 });
    const dataDir = mkdtempSync(join(tmpdir(), 'credits-low-'));
    await bridgedReceiver(dataDir, apiKey);
    const api = clientFor(emulator, { apiKey });
    const worker = await startTestWorker(api, { dataDir });
    cleanups.push(async () => {
      await worker.stop();
      await api.close();
    });
    const name = `low-${Date.now()}`;
    const harvest = harvestFrom(`
harvests:
  - name: ${name}
    schedule: { cron: "0 6 * * *", timezone: UTC }
    budget: { credits: 950 }
    channels:
      - { platform: tiktok, handle: ${(await emulator.catalog()).tiktok.handles[9]}, content: videos, max_items: 310 }
`);
    const schedule = await temporal.schedule.create({
      scheduleId: scheduleIdOf(name),
      spec: { cronExpressions: ['0 6 * * *'] },
      action: { type: 'startWorkflow', workflowType: 'harvestWorkflow', taskQueue: worker.taskQueue, args: [{ harvest }] },
    });
    cleanups.push(() => schedule.delete());
    // 310 videos at 3 credits take the balance from 1,000 to 70: below 10% of the plan.
    const first = (await temporal.workflow.execute('harvestWorkflow', { taskQueue: worker.taskQueue, workflowId: `${name}-1`, args: [{ harvest }] })) as HarvestSummary;
    expect(first.status).toBe('completed');
    await waitFor(() => (creditsLow(dataDir) ? true : undefined), 10_000, 'the credits.low webhook');
    await waitFor(async () => ((await schedule.describe()).state.paused ? true : undefined), 10_000, 'the schedule to pause');
    expect((await schedule.describe()).state.note).toBe(CREDITS_LOW_NOTE);
    const blocked = (await temporal.workflow.execute('harvestWorkflow', { taskQueue: worker.taskQueue, workflowId: `${name}-2`, args: [{ harvest }] })) as HarvestSummary;
    expect(blocked.status).toBe('paused');
    expect(blocked.reason).toMatch(/credits\.low/);
    expect(blocked.creditsSpent).toBe(0);
    await emulator.admin('plan', { api_key: apiKey, plan: 'bigger', credits: 50_000 });
    await waitFor(async () => ((await schedule.describe()).state.paused ? undefined : true), 10_000, 'the schedule to resume');
    expect(creditsLow(dataDir)).toBeUndefined();
  });
});
