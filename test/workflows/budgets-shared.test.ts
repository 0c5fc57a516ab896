/**
 * A budget across runs with shared storage: two harvests under one monthly budget run at once,
 * each from a worker on a machine of its own (a scratch directory each, the store shared: MinIO and
 * PostgreSQL, whose rows hold the budget's ledger). Together they never pass it, and its spend, as
 * `harvester budgets` and each worker's metrics say it, is the emulator's ledger.
 */
import type { ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { Client } from '@temporalio/client';
import { startSharedServices, type SharedServices } from '../../src/cli/shared-services.js';
import { findHarvest, parseHarvestConfig } from '../../src/config/harvest-config.js';
import type { HarvestSummary } from '../../workflows/harvest.js';
import { runCli } from '../support/cli.js';
import { budgetMetric, startCliWorker, stopCliWorkers } from '../support/cli-worker.js';
import { startTestEmulator, type TestEmulator } from '../support/emulator.js';
import { temporalClient } from '../support/temporal.js';

const API_KEY = 'sk_live_budgets_shared_store';
let emulator: TestEmulator;
let temporal: Client;
let services: SharedServices;
let sharedEnv: Record<string, string>;
const workers: ChildProcess[] = [];

beforeAll(async () => {
  const folder = mkdtempSync(join(tmpdir(), 'budgets-shared-'));
  // PostgreSQL may run as another user (see startPostgres): it must reach its folder.
  chmodSync(folder, 0o755);
  services = await startSharedServices(folder);
  sharedEnv = services.environment('budgets');
  emulator = await startTestEmulator({ apiKeys: [API_KEY], latencyMs: 20 });
  temporal = await temporalClient();
}, 180_000);
afterAll(async () => {
  await stopCliWorkers(workers);
  await temporal?.connection.close();
  await emulator?.close();
  await services?.stop();
});

/** A worker on a machine of its own (a fresh scratch directory, the shared store), serving metrics; resolves once it polls. */
async function startWorkerMachine(configFile: string): Promise<{ taskQueue: string; metricsUrl: string }> {
  const taskQueue = `budgets-shared-${Math.random().toString(36).slice(2, 10)}`;
  const env = { ...sharedEnv, TEMPORAL_ADDRESS: inject('temporalAddress'), HARVESTER_TASK_QUEUE: taskQueue, HARVESTER_DATA_DIR: mkdtempSync(join(tmpdir(), 'machine-')), SOCIAL_API_BASE_URL: emulator.baseUrl, SOCIAL_API_KEY: API_KEY, LOG_LEVEL: 'error' };
  const { metricsUrl } = await startCliWorker(configFile, env, workers, 60_000);
  return { taskQueue, metricsUrl };
}

describe('a budget across runs on shared storage', () => {
  it('holds two harvests run at once from two machines: together they never pass it, and its spend is the emulator\'s ledger', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'budgets-shared-config-'));
    const handles = (await emulator.catalog()).tiktok.handles;
    const limit = 900;
    const names = ['shared-a', 'shared-b'];
    const configFile = join(dir, 'harvests.yaml');
    writeFileSync(
      configFile,
      [
        'harvests:',
        ...names.flatMap((name, index) => [`  - name: ${name}`, '    budget: { credits: 100000 }', '    channels:', `      - { platform: tiktok, handle: ${handles[10 + index]}, content: videos, max_items: 300 }`]),
        'budgets:',
        `  - { name: team, credits: ${limit}, per: month, timezone: America/New_York, harvests: all }`,
        '',
      ].join('\n'),
    );
    const text = readFileSync(configFile, 'utf8');
    const machines = await Promise.all([startWorkerMachine(configFile), startWorkerMachine(configFile)]);
    // Each wants 300 items at 3 credits: 1,800 together, against 900.
    const runs = await Promise.all(
      names.map((name, index) => temporal.workflow.start('harvestWorkflow', { taskQueue: machines[index]!.taskQueue, workflowId: `${name}-${Date.now()}`, args: [{ harvest: findHarvest(parseHarvestConfig(text, configFile), name), pageSize: 10 }] })),
    );
    const summaries = (await Promise.all(runs.map((run) => run.result()))) as HarvestSummary[];
    const ledger = (await emulator.ledger(API_KEY)).reduce((sum, row) => sum + row.credits, 0);
    expect(ledger).toBeLessThanOrEqual(limit);
    expect(ledger).toBeGreaterThan(limit - 30);
    for (const summary of summaries) {
      expect(summary.status).toBe('budget_exhausted');
      expect(summary.reason).toContain("budget 'team' is spent");
    }
    expect(summaries.reduce((sum, summary) => sum + summary.creditsSpent, 0)).toBe(ledger);
    const budgets = await runCli(['budgets', '--json', '--no-history', '--config', configFile], { ...sharedEnv, HARVESTER_DATA_DIR: mkdtempSync(join(tmpdir(), 'machine-')) });
    expect(budgets.code, budgets.stderr).toBe(0);
    expect(JSON.parse(budgets.stdout)[0]).toMatchObject({ budget: 'team', limit, spent: ledger, reserved: 0, left: limit - ledger });
    for (const machine of machines) {
      expect(await budgetMetric(machine.metricsUrl, 'harvester_budget_spent_credits', 'team')).toBe(ledger);
      expect(await budgetMetric(machine.metricsUrl, 'harvester_budget_reserved_credits', 'team')).toBe(0);
    }
  }, 300_000);
});
