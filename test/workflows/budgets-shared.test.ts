/**
 * A budget across runs with shared storage: two harvests under one monthly budget run at once,
 * each from a worker on a machine of its own (a scratch directory each, the store shared: MinIO and
 * PostgreSQL, whose rows hold the budget's ledger). Together they never pass it, and its spend, as
 * `harvester budgets` and each worker's metrics say it, is the emulator's ledger.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { Client } from '@temporalio/client';
import { startSharedServices, type SharedServices } from '../../src/cli/shared-services.js';
import { findHarvest, parseHarvestConfig } from '../../src/config/harvest-config.js';
import type { HarvestSummary } from '../../workflows/harvest.js';
import { CLI, runCli } from '../support/cli.js';
import { startTestEmulator, waitFor, type TestEmulator } from '../support/emulator.js';
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
  for (const worker of workers) {
    if (worker.exitCode !== null || worker.signalCode !== null) continue;
    const exited = new Promise((resolve) => worker.once('exit', resolve));
    worker.kill('SIGTERM');
    await exited;
  }
  await temporal?.connection.close();
  await emulator?.close();
  await services?.stop();
});

/** A worker on a machine of its own (a fresh scratch directory, the shared store), serving metrics; resolves once it polls. */
async function startWorkerMachine(configFile: string): Promise<{ taskQueue: string; metricsUrl: string }> {
  const taskQueue = `budgets-shared-${Math.random().toString(36).slice(2, 10)}`;
  const env = { ...process.env, ...sharedEnv, TEMPORAL_ADDRESS: inject('temporalAddress'), HARVESTER_TASK_QUEUE: taskQueue, HARVESTER_DATA_DIR: mkdtempSync(join(tmpdir(), 'machine-')), SOCIAL_API_BASE_URL: emulator.baseUrl, SOCIAL_API_KEY: API_KEY, LOG_LEVEL: 'error' };
  const child = spawn(process.execPath, [CLI, 'worker', '--metrics-port', '0', '--config', configFile], { env, stdio: ['ignore', 'ignore', 'pipe'] });
  workers.push(child);
  let log = '';
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (log += chunk));
  const metricsUrl = await waitFor(() => /metrics at (http:\/\/\S+\/metrics)/.exec(log)?.[1], 60_000, `the worker to serve metrics (its log: ${log})`);
  await waitFor(() => (/polling task queue/.test(log) ? true : undefined), 60_000, 'the worker to poll');
  return { taskQueue, metricsUrl };
}

async function budgetMetric(metricsUrl: string, name: string, budget: string): Promise<number | undefined> {
  const line = (await (await fetch(metricsUrl)).text()).split('\n').find((candidate) => candidate.startsWith(`${name}{budget="${budget}"}`));
  return line === undefined ? undefined : Number(line.split(' ').at(-1));
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
