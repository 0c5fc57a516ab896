/**
 * Budgets across runs on the real stack: the emulator over HTTP, the Temporal dev server, `harvester
 * worker` processes sharing one data directory (its ledger of the budgets, src/store/budget-ledger.ts).
 * Two harvests under one monthly budget run at once, each from its own worker, and never pass it
 * together; a worker SIGKILLed with a reservation open leaves it to its lease, and the budget's
 * spend still equals the emulator's ledger; a spent budget makes its schedule's run a skipped run
 * that names it; `harvester budgets` and the worker's metrics say what the ledger says.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { Client } from '@temporalio/client';
import { findHarvest, parseHarvestConfig } from '../../src/config/harvest-config.js';
import { periodsAt } from '../../src/harvest/budgets.js';
import type { Harvest } from '../../src/harvest/harvest-types.js';
import { FileBudgetLedger } from '../../src/store/budget-ledger.js';
import { number } from '../../src/report/format.js';
import { desiredScheduleOf, scheduleIdOf, triggerHarvestSchedule, type ScheduledHarvest } from '../../src/temporal/schedules.js';
import { harvestSummary } from '../../src/temporal/run-summary.js';
import { budgetLeaseMs } from '../../activities/work-frame.js';
import type { HarvestSummary } from '../../workflows/harvest.js';
import { runCli } from '../support/cli.js';
import { budgetMetric, startCliWorker, stopCliWorkers, type CliWorker } from '../support/cli-worker.js';
import { clientFor } from '../support/client.js';
import { startTestEmulator, waitFor, type TestEmulator } from '../support/emulator.js';
import { startTestWorker, temporalClient } from '../support/temporal.js';

const KEYS = { shared: 'sk_live_budgets_shared', kill: 'sk_live_budgets_kill', schedule: 'sk_live_budgets_schedule', job: 'sk_live_budgets_job', jobCharge: 'sk_live_budgets_job_charge' };
const stamp = Date.now().toString(36);

let emulator: TestEmulator;
let temporal: Client;
const workers: ChildProcess[] = [];

beforeAll(async () => {
  // Some latency per call, so a kill lands with a call in flight.
  emulator = await startTestEmulator({ apiKeys: Object.values(KEYS), latencyMs: 40 });
  temporal = await temporalClient();
});
afterAll(async () => {
  await stopCliWorkers(workers);
  await temporal?.connection.close();
  await emulator?.close();
});

/** `harvester worker` in its own process, on the task queue given (or one of its own), with the data directory given; resolves with its metrics URL once it polls. */
async function startWorker(dataDir: string, apiKey: string, configFile: string, taskQueue = `budgets-${Math.random().toString(36).slice(2, 10)}`): Promise<CliWorker & { taskQueue: string }> {
  const env = { TEMPORAL_ADDRESS: inject('temporalAddress'), HARVESTER_TASK_QUEUE: taskQueue, HARVESTER_DATA_DIR: dataDir, SOCIAL_API_BASE_URL: emulator.baseUrl, SOCIAL_API_KEY: apiKey, LOG_LEVEL: 'error' };
  return { ...(await startCliWorker(configFile, env, workers)), taskQueue };
}

/** A config of harvests, each listing one channel, and the budgets given; written to a file. */
function writeConfig(dir: string, harvests: { name: string; handle: string; maxItems: number; extra?: string }[], budgets: string[]): string {
  const lines = ['harvests:'];
  for (const harvest of harvests) {
    lines.push(`  - name: ${harvest.name}`, '    budget: { credits: 100000 }', '    call_deadline_seconds: 3', '    channels:', `      - { platform: tiktok, handle: ${harvest.handle}, content: videos, max_items: ${harvest.maxItems} }`);
    if (harvest.extra) lines.push(harvest.extra);
  }
  lines.push('budgets:', ...budgets.map((budget) => `  - ${budget}`));
  const file = join(dir, 'harvests.yaml');
  writeFileSync(file, `${lines.join('\n')}\n`);
  return file;
}

function harvestOf(configFile: string, text: string, name: string): Harvest {
  return findHarvest(parseHarvestConfig(text, configFile), name);
}

async function charged(key: string): Promise<number> {
  return (await emulator.ledger(key)).reduce((sum, row) => sum + row.credits, 0);
}

describe('a budget across runs', () => {
  it('holds two harvests run at once from two workers: together they never pass it, and its spend is the emulator\'s ledger', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'budgets-shared-'));
    const dataDir = join(dir, 'data');
    const handles = (await emulator.catalog()).tiktok.handles;
    const limit = 1_000;
    const configFile = writeConfig(
      dir,
      [
        { name: `budget-a-${stamp}`, handle: handles[10]!, maxItems: 300 },
        { name: `budget-b-${stamp}`, handle: handles[11]!, maxItems: 300 },
      ],
      [`{ name: research, credits: ${limit}, per: month, timezone: Europe/Paris, harvests: [budget-a-${stamp}, budget-b-${stamp}] }`],
    );
    const text = readFileSync(configFile, 'utf8');
    const [first, second] = await Promise.all([startWorker(dataDir, KEYS.shared, configFile), startWorker(dataDir, KEYS.shared, configFile)]);
    // Each wants 300 items at 3 credits: 1,800 together, against 1,000.
    const runs = await Promise.all(
      [
        { worker: first!, name: `budget-a-${stamp}` },
        { worker: second!, name: `budget-b-${stamp}` },
      ].map(({ worker, name }) => temporal.workflow.start('harvestWorkflow', { taskQueue: worker.taskQueue, workflowId: `${name}-${Date.now()}`, args: [{ harvest: harvestOf(configFile, text, name), pageSize: 10 }] })),
    );
    const summaries = (await Promise.all(runs.map((run) => run.result()))) as HarvestSummary[];
    const ledger = await charged(KEYS.shared);
    expect(ledger).toBeLessThanOrEqual(limit);
    // Spent up to the last page that fit (30 credits a page).
    expect(ledger).toBeGreaterThan(limit - 30);
    for (const summary of summaries) {
      expect(summary.status).toBe('budget_exhausted');
      expect(summary.reason).toContain("budget 'research' is spent");
      expect(summary.pagesLanded).toBeGreaterThan(0);
    }
    // No call was lost: the runs' own figures are the ledger too.
    expect(summaries.reduce((sum, summary) => sum + summary.creditsSpent, 0)).toBe(ledger);
    const budgets = await runCli(['budgets', '--json', '--no-history', '--config', configFile], { HARVESTER_DATA_DIR: dataDir });
    expect(budgets.code, budgets.stderr).toBe(0);
    const [research] = JSON.parse(budgets.stdout) as { budget: string; spent: number; reserved: number; left: number; limit: number }[];
    expect(research).toMatchObject({ budget: 'research', limit, spent: ledger, reserved: 0, left: limit - ledger });
    for (const worker of [first!, second!]) {
      expect(await budgetMetric(worker.metricsUrl, 'harvester_budget_spent_credits', 'research')).toBe(ledger);
      expect(await budgetMetric(worker.metricsUrl, 'harvester_budget_reserved_credits', 'research')).toBe(0);
      expect(await budgetMetric(worker.metricsUrl, 'harvester_budget_left_credits', 'research')).toBe(limit - ledger);
    }
    // The report says the same: spent, reserved and left, as the ledger.
    const out = join(dir, 'report.html');
    const report = await runCli(['report', '--no-temporal', '--config', configFile, '--out', out], { HARVESTER_DATA_DIR: dataDir });
    expect(report.code, report.stderr).toBe(0);
    const row = /<tr>\s*<td>research<\/td>[\s\S]*?<\/tr>/.exec(readFileSync(out, 'utf8'))?.[0] ?? '';
    const cells = [...row.matchAll(/<td class="num">([^<]*)<\/td>/g)].map((match) => match[1]);
    expect(cells.slice(0, 4)).toEqual([number(limit), number(ledger), number(0), number(limit - ledger)]);
  }, 240_000);

  it('a worker SIGKILLed with a reservation open leaves it to its lease, and the spend still equals the ledger once a new worker ends the run', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'budgets-kill-'));
    const dataDir = join(dir, 'data');
    const name = `budget-kill-${stamp}`;
    const configFile = writeConfig(dir, [{ name, handle: (await emulator.catalog()).tiktok.handles[10]!, maxItems: 400 }], ['{ name: the-key, credits: 100000, per: month, harvests: all }']);
    const harvest = harvestOf(configFile, readFileSync(configFile, 'utf8'), name);
    const ledgerOfBudgets = new FileBudgetLedger(dataDir);
    const first = await startWorker(dataDir, KEYS.kill, configFile);
    const run = await temporal.workflow.start('harvestWorkflow', { taskQueue: first.taskQueue, workflowId: `${name}-${Date.now()}`, args: [{ harvest, pageSize: 10 }] });
    await waitFor(async () => ((await emulator.ledger(KEYS.kill)).length >= 8 ? true : undefined), 60_000, 'eight pages charged').catch(async (error: unknown) => {
      const history = await run.fetchHistory();
      throw new Error(`${String(error)}; history: ${JSON.stringify(history.events?.slice(-6).map((event) => ({ type: event.eventType, failure: event.workflowExecutionFailedEventAttributes?.failure?.message ?? event.activityTaskFailedEventAttributes?.failure?.message })))}`);
    });
    // Killed the moment the ledger shows a call's reservation open.
    await waitFor(async () => ((await ledgerOfBudgets.figures()).some((figures) => figures.reserved > 0) ? true : undefined), 30_000, 'a reservation open');
    first.process.kill('SIGKILL');
    const killedAt = Date.now();
    await new Promise((resolve) => first.process.once('exit', resolve));
    // Past the lease of the last reservation the killed worker could have made, nothing is held,
    // and what it held counts as spent at its worst case (its call may have been charged).
    const atLeaseEnd = (await ledgerOfBudgets.figures(killedAt + budgetLeaseMs(3_000) + 1)).find((figures) => figures.budget === 'the-key')!;
    expect(atLeaseEnd.reserved).toBe(0);
    expect(atLeaseEnd.expired).toBeGreaterThanOrEqual(1);
    // On the run's task queue: it takes the killed worker's work over once Temporal gives that up.
    const second = await startWorker(dataDir, KEYS.kill, configFile, first.taskQueue);
    const summary = (await run.result()) as HarvestSummary;
    expect(summary.status).toBe('completed');
    const ledger = await charged(KEYS.kill);
    const [theKey] = JSON.parse((await runCli(['budgets', '--json', '--no-history', '--config', configFile], { HARVESTER_DATA_DIR: dataDir })).stdout) as { spent: number; reserved: number }[];
    // Each page full (10 items at 3 credits): the killed call's worst case is what the API charged for it.
    expect(theKey).toMatchObject({ spent: ledger, reserved: 0 });
    expect(await budgetMetric(second.metricsUrl, 'harvester_budget_spent_credits', 'the-key')).toBe(ledger);
    expect(summary.creditsSpent).toBe(ledger);
    await ledgerOfBudgets.close();
  }, 240_000);

  it('a spent budget makes its schedule record a skipped run that names it, instead of starting one', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'budgets-schedule-'));
    const name = `budget-sched-${stamp}`;
    const configFile = writeConfig(dir, [{ name, handle: (await emulator.catalog()).tiktok.handles[9]!, maxItems: 20, extra: '    schedule: { cron: "0 6 * * *", timezone: Europe/Paris }' }], [
      `{ name: monthly, credits: 60, per: month, timezone: Europe/Paris, harvests: [${name}] }`,
    ]);
    const harvest = harvestOf(configFile, readFileSync(configFile, 'utf8'), name) as ScheduledHarvest;
    const api = clientFor(emulator, { apiKey: KEYS.schedule });
    const worker = await startTestWorker(api);
    // Another run of the month spent it all.
    const ledger = new FileBudgetLedger(worker.dataDir);
    expect(await ledger.reserve({ id: 'an earlier run', credits: 60, periods: periodsAt(harvest.budgets!, Date.now()), leaseMs: 60_000 })).toBeUndefined();
    await ledger.settle('an earlier run', 60);
    await ledger.close();
    const desired = desiredScheduleOf(harvest, worker.taskQueue);
    await temporal.schedule.create({ scheduleId: desired.scheduleId, spec: desired.spec, action: desired.action, policies: desired.policies });
    try {
      const triggered = await triggerHarvestSchedule(temporal, name, { waitMs: 30_000 });
      expect(triggered.outcome).toBe('started');
      const summary = await harvestSummary(temporal.workflow.getHandle((triggered as { workflowId: string }).workflowId));
      expect(summary.status).toBe('skipped');
      expect(summary.reason).toContain("budget 'monthly' is spent");
      expect(summary.creditsSpent).toBe(0);
      expect(await charged(KEYS.schedule)).toBe(0);
      const runs = await runCli(['budgets', '--json', '--no-history', '--config', configFile], { HARVESTER_DATA_DIR: worker.dataDir });
      expect(JSON.parse(runs.stdout)[0]).toMatchObject({ budget: 'monthly', spent: 60, left: 0 });
    } finally {
      await temporal.schedule.getHandle(scheduleIdOf(name)).delete();
      await worker.stop();
      await api.close();
    }
  }, 120_000);

  it('reserves a job\'s worst case before the job is started: a budget that cannot take it stops the run, naming it, and no job is made', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'budgets-job-'));
    const name = `budget-job-${stamp}`;
    // 600 items: above the job threshold (500), so one async job of up to 600 x 3 credits.
    const configFile = writeConfig(dir, [{ name, handle: (await emulator.catalog()).tiktok.handles[10]!, maxItems: 600 }], [`{ name: small, credits: 100, per: month, harvests: [${name}] }`]);
    const harvest = harvestOf(configFile, readFileSync(configFile, 'utf8'), name);
    const api = clientFor(emulator, { apiKey: KEYS.job });
    const worker = await startTestWorker(api);
    try {
      const summary = await harvestSummary(await temporal.workflow.start('harvestWorkflow', { taskQueue: worker.taskQueue, workflowId: `${name}-${Date.now()}`, args: [{ harvest }] }));
      expect(summary.status).toBe('budget_exhausted');
      expect(summary.reason).toContain("budget 'small' is spent");
      expect(await charged(KEYS.job)).toBe(0);
      const [small] = JSON.parse((await runCli(['budgets', '--json', '--no-history', '--config', configFile], { HARVESTER_DATA_DIR: worker.dataDir })).stdout) as { spent: number; reserved: number }[];
      expect(small).toMatchObject({ spent: 0, reserved: 0 });
    } finally {
      await worker.stop();
      await api.close();
    }
  }, 120_000);

  it('settles a job\'s reservation at the job\'s charge once its results land, not at its worst case: the budget\'s spend is the emulator\'s ledger', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'budgets-job-charge-'));
    const name = `budget-job-charge-${stamp}`;
    // Up to 2,000 items from a channel that has fewer: the job's worst case (2,000 x 3) is far above its charge.
    const configFile = writeConfig(dir, [{ name, handle: (await emulator.catalog()).tiktok.handles[9]!, maxItems: 2_000, extra: '    job_threshold: 60' }], [`{ name: roomy, credits: 100000, per: month, harvests: [${name}] }`]);
    const harvest = harvestOf(configFile, readFileSync(configFile, 'utf8'), name);
    const api = clientFor(emulator, { apiKey: KEYS.jobCharge });
    const worker = await startTestWorker(api);
    try {
      const summary = await harvestSummary(await temporal.workflow.start('harvestWorkflow', { taskQueue: worker.taskQueue, workflowId: `${name}-${Date.now()}`, args: [{ harvest }] }));
      expect(summary.status, JSON.stringify(summary.targets)).toBe('completed');
      const ledger = await charged(KEYS.jobCharge);
      expect(ledger).toBeGreaterThan(0);
      expect(ledger).toBeLessThan(2_000 * 3);
      const [roomy] = JSON.parse((await runCli(['budgets', '--json', '--no-history', '--config', configFile], { HARVESTER_DATA_DIR: worker.dataDir })).stdout) as { spent: number; reserved: number }[];
      expect(roomy).toMatchObject({ spent: ledger, reserved: 0 });
      expect(summary.creditsSpent).toBe(ledger);
    } finally {
      await worker.stop();
      await api.close();
    }
  }, 180_000);
});
