/**
 * Outages of the shared store's services in the middle of a run, on the distributed stack (two
 * workers with no disk in common, PostgreSQL and MinIO): PostgreSQL stopped for longer than the
 * activities' old five attempts lasted (about 15 s), and MinIO frozen (SIGSTOP) as long. The run waits them
 * out and ends `completed`, in one execution (no retry), with every item once and its credits equal
 * to the ledger.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { defaultPayloadConverter } from '@temporalio/common';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { Client } from '@temporalio/client';
import { startSharedServices, type SharedServices } from '../../src/cli/shared-services.js';
import { queryWarehouse } from '../../src/warehouse/query.js';
import type { HarvestSummary } from '../../workflows/harvest.js';
import { WorkflowFailedError } from '@temporalio/client';
import { CLI, runCli } from '../support/cli.js';
import { startTestEmulator, waitFor, type TestEmulator } from '../support/emulator.js';
import { harvestFrom, temporalClient } from '../support/temporal.js';

const API_KEY = 'sk_live_outages';
/**
 * What the activities' old retry policy allowed an outage: five attempts, 1 + 2 + 4 + 8 s of backoff
 * between them (workflows/run-context.ts's intervals, then with maximumAttempts 5), so a work that
 * met an outage failed for good about 15 s after it met it.
 */
const OLD_ATTEMPTS_SECONDS = 15;
/**
 * How long each outage lasts. By default it ends when the run shows it outlived the old attempts
 * (outageOutlived): some 17 s, since Temporal's retries and the works' waits run on real time on a
 * real server and no clock of theirs can be moved. OUTAGE_TEST_SECONDS fixes the length instead:
 * `OUTAGE_TEST_SECONDS=120 npx vitest run test/workflows/outages.test.ts -t "waits out"` runs the
 * issue's two-minute outages (about 4 minutes a case).
 */
const OUTAGE_SECONDS = process.env.OUTAGE_TEST_SECONDS ? Number(process.env.OUTAGE_TEST_SECONDS) : undefined;
const CASE_TIMEOUT_MS = 270_000 + (OUTAGE_SECONDS ?? 60) * 1_000;
const OUTAGE_LENGTH = OUTAGE_SECONDS === undefined ? `past the old five attempts (${OLD_ATTEMPTS_SECONDS} s)` : `for ${OUTAGE_SECONDS} s`;
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

function startWorker(taskQueue: string, prefix: string, extra: Record<string, string> = {}): ChildProcess {
  const scratch = mkdtempSync(join(tmpdir(), 'outage-machine-'));
  scratches.push(scratch);
  const env = { ...process.env, ...cliEnv(taskQueue, prefix), HARVESTER_DATA_DIR: scratch, LOG_LEVEL: process.env.OUTAGE_LOG_LEVEL ?? 'error', ...extra };
  return spawn(process.execPath, [CLI, 'worker'], { env, stdio: ['ignore', 'ignore', 'inherit'] });
}

/** What a harvester process of the case is given: the shared store, Temporal, the task queue and the API. */
function cliEnv(taskQueue: string, prefix: string): Record<string, string> {
  return { ...services.environment(prefix), TEMPORAL_ADDRESS: inject('temporalAddress'), HARVESTER_TASK_QUEUE: taskQueue, SOCIAL_API_BASE_URL: emulator.baseUrl, SOCIAL_API_KEY: API_KEY };
}

/** `harvester show --json` and the run's line in `harvester runs --json`: their credits. */
async function creditsShown(runId: string, taskQueue: string, prefix: string): Promise<{ show: number; runs: number }> {
  const env = cliEnv(taskQueue, prefix);
  const show = await runCli(['show', runId, '--json'], env);
  expect(show.code, show.stderr).toBe(0);
  const runs = await runCli(['runs', '--json', '--limit', '50'], env);
  expect(runs.code, runs.stderr).toBe(0);
  const listed = (JSON.parse(runs.stdout) as { workflowId: string; credits?: number }[]).find((run) => run.workflowId === runId);
  return { show: (JSON.parse(show.stdout) as { creditsSpent: number }).creditsSpent, runs: listed?.credits ?? Number.NaN };
}

const msOf = (time: { seconds?: unknown; nanos?: number | null } | null | undefined) => (time ? Number(time.seconds ?? 0) * 1_000 + Math.floor((time.nanos ?? 0) / 1e6) : undefined);

/**
 * Until the run shows it lived through more than the old attempts' 15 s of the outage begun at
 * `since` (ms), read from its pending works in Temporal (their last heartbeats):
 * - `catalog` (PostgreSQL stopped): a work says in its heartbeat that it has been waiting for the
 *   catalog for more than 16 s (activities/outages.ts's `waitingFor`, counted from the first try
 *   that failed; whole seconds, hence the second more). The old policy had failed that work for
 *   good by then, and the run with it;
 * - `object store` (MinIO frozen: its calls hang, nothing fails): every work heartbeating has
 *   heartbeated more than 16 s into the freeze, still on the attempt it was on when it began, so
 *   none was timed out and none lost its attempt while the store held its calls.
 * Either way the outage then ends: it lasted past what the old policy allowed, as the run measured it.
 */
async function outageOutlived(workflowId: string, since: number, service: 'catalog' | 'object store'): Promise<void> {
  const handle = temporal.workflow.getHandle(workflowId);
  const past = (OLD_ATTEMPTS_SECONDS + 1) * 1_000;
  const attemptsAtStart = new Map<string, number>();
  const outlived = async () => {
    const description = await handle.describe();
    // A run that ended in the outage did not wait it out: say so now, not at the wait's limit.
    expect(description.status.name, 'the run, during the outage').toBe('RUNNING');
    const pending = description.raw.pendingActivities ?? [];
    if (service === 'catalog') {
      const waited = pending.map((activity) => {
        const payload = activity.heartbeatDetails?.payloads?.[0];
        const waiting = payload ? defaultPayloadConverter.fromPayload<{ live?: { waiting?: string } }>(payload)?.live?.waiting : undefined;
        return Number(/^the catalog does not answer \(for (\d+) s\)/.exec(waiting ?? '')?.[1] ?? 0) * 1_000;
      });
      return Math.max(0, ...waited) > past || undefined;
    }
    const heartbeating = pending.filter((activity) => activity.lastHeartbeatTime);
    for (const activity of heartbeating) if (!attemptsAtStart.has(activity.activityId!)) attemptsAtStart.set(activity.activityId!, activity.attempt ?? 1);
    expect(heartbeating.filter((activity) => activity.attempt !== attemptsAtStart.get(activity.activityId!)).map((activity) => activity.activityType?.name)).toEqual([]);
    return (heartbeating.length > 0 && heartbeating.every((activity) => msOf(activity.lastHeartbeatTime)! > since + past)) || undefined;
  };
  await waitFor(outlived, 120_000, `the run to outlive ${OLD_ATTEMPTS_SECONDS} s of the ${service}'s outage`);
}

/** The outage's length: fixed by OUTAGE_TEST_SECONDS, or until the run shows it outlived the old attempts. */
async function outageLasts(workflowId: string, since: number, service: 'catalog' | 'object store'): Promise<void> {
  if (OUTAGE_SECONDS !== undefined) await sleep(OUTAGE_SECONDS * 1_000);
  else await outageOutlived(workflowId, since, service);
}

async function stopAll(workers: ChildProcess[]): Promise<void> {
  for (const worker of workers) worker.kill('SIGTERM');
  await Promise.all(workers.map((worker) => new Promise((resolve) => (worker.exitCode !== null || worker.signalCode !== null ? resolve(undefined) : worker.once('exit', resolve)))));
}

/**
 * A store of its own for each case: one PostgreSQL database holds one DuckLake catalog, so cases
 * on one database under different prefixes would share a lake whose files each reads under its own
 * prefix (the load then meets files that are not there).
 */
async function freshServices(name: string): Promise<void> {
  await services?.stop();
  const own = join(folder, name);
  mkdirSync(own);
  chmodSync(own, 0o755);
  services = await startSharedServices(own);
}

/**
 * A harvest of three targets with stats (the emulator's handles at `handles`: each case lists
 * channels of its own, as the catalog's coverage is shared), on two workers; `outage` is made
 * once `callsBefore` calls are charged.
 */
async function harvestThrough(name: string, handles: [number, number, number], callsBefore: number, outage: (workflowId: string) => Promise<void>): Promise<void> {
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
  await freshServices(name);
  const taskQueue = `${name}-${Date.now()}`;
  sharedEnv = services.environment(name);
  const ledgerBefore = await emulator.ledger(API_KEY);
  const workers = [startWorker(taskQueue, name), startWorker(taskQueue, name)];
  const workflowId = `${name}-${Date.now()}`;
  const run = await temporal.workflow.start('harvestWorkflow', { taskQueue, workflowId, args: [{ harvest, pageSize: 20 }] });
  try {
    const calls = async () => (await emulator.ledger(API_KEY)).length - ledgerBefore.length;
    await waitFor(async () => ((await calls()) >= callsBefore ? true : undefined), 90_000, `${callsBefore} calls charged`);
    await outage(workflowId);
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
    // What the warehouse, `show` and `runs` say of the run agrees with the ledger.
    expect(await one(`SELECT credits_spent FROM harvest_runs WHERE run_id = '${workflowId}'`)).toEqual([String(charged)]);
    expect(await creditsShown(workflowId, taskQueue, name)).toEqual({ show: charged, runs: charged });
  } finally {
    await stopAll(workers);
  }
}

describe('a run through outages of the shared store', () => {
  // In the suite, not the long tier: the two cases of `harvester query` after it read the lake its run made.
  it(`waits out PostgreSQL stopped ${OUTAGE_LENGTH} in the middle of the run, and ends completed with credits = ledger`, { timeout: CASE_TIMEOUT_MS }, async () => {
    await harvestThrough('pg-outage', [1, 2, 1], 80, async (workflowId) => {
      const since = Date.now();
      await services.postgres.stop();
      try {
        await outageLasts(workflowId, since, 'catalog');
      } finally {
        await services.postgres.start();
      }
    });
  });

  it('`harvester query` with the catalog down says so, not that there is no warehouse yet', async () => {
    const reader = mkdtempSync(join(tmpdir(), 'outage-query-'));
    scratches.push(reader);
    const env = { ...services.environment('pg-outage'), HARVESTER_DATA_DIR: reader };
    const before = await runCli(['query', 'SELECT count(*) AS n FROM items'], env);
    expect(before.code, before.stderr).toBe(0);
    await services.postgres.stop();
    try {
      const down = await runCli(['query', 'SELECT count(*) AS n FROM items'], env);
      expect(down.code).not.toBe(0);
      expect(down.stderr).toMatch(/the warehouse's catalog does not answer/);
      expect(down.stderr).not.toMatch(/no warehouse/);
    } finally {
      await services.postgres.start();
    }
  }, 120_000);

  it('`harvester query` with the object store frozen ends at its --timeout, saying the object store does not answer', async () => {
    const reader = mkdtempSync(join(tmpdir(), 'outage-query-'));
    scratches.push(reader);
    const env = { ...services.environment('pg-outage'), HARVESTER_DATA_DIR: reader };
    // Every row: the items' data files are read from the object store.
    const sql = 'SELECT * FROM items';
    const before = await runCli(['query', sql, '--format', 'csv'], env);
    expect(before.code, before.stderr).toBe(0);
    const pid = services.minio.pid()!;
    process.kill(pid, 'SIGSTOP');
    try {
      // DuckDB's HTTP client, waiting on the frozen MinIO, does not hear the interrupt at 5 s; its
      // own timeout (30 s, four tries) held the command for two minutes, past this case's own limit.
      const frozen = await runCli(['query', sql, '--timeout', '5'], env);
      expect(frozen.code).toBe(1);
      expect(frozen.stderr).toMatch(/the warehouse's object store does not answer \(http:\/\/127\.0\.0\.1:\d+/);
      expect(frozen.stderr).toMatch(/given up at its time limit \(--timeout 5\)/);
    } finally {
      process.kill(pid, 'SIGCONT');
    }
  }, 60_000);

  it(`waits out MinIO frozen ${OUTAGE_LENGTH} in the middle of the run, and ends completed with credits = ledger`, { tags: ['long'], timeout: CASE_TIMEOUT_MS }, async () => {
    await harvestThrough('minio-freeze', [3, 4, 2], 80, async (workflowId) => {
      const pid = services.minio.pid()!;
      const since = Date.now();
      process.kill(pid, 'SIGSTOP');
      try {
        await outageLasts(workflowId, since, 'object store');
      } finally {
        process.kill(pid, 'SIGCONT');
      }
    });
  });

  it('an outage longer than the wait fails the run keeping its progress, and its retry, once the catalog is back, reads the journals it could not and reports the ledger', async () => {
    const name = 'pg-too-long';
    await freshServices(name);
    const catalog = await emulator.catalog();
    const harvest = harvestFrom(`
harvests:
  - name: ${name}
    budget: { credits: 40000 }
    concurrency: { targets: 3, calls: 6 }
    channels:
      - { platform: tiktok, handle: ${catalog.tiktok.handles[5]}, content: videos, max_items: 120 }
      - { platform: tiktok, handle: ${catalog.tiktok.handles[6]}, content: videos, max_items: 120 }
      - { platform: instagram, handle: ${catalog.instagram.handles[3]}, content: reels, max_items: 120 }
    enrich: { stats: true }
`);
    const taskQueue = `${name}-${Date.now()}`;
    const ledgerBefore = (await emulator.ledger(API_KEY)).length;
    // The operator's bound: 3 s of outage, then the work fails.
    const workers = [startWorker(taskQueue, name, { HARVESTER_OUTAGE_WAIT_SECONDS: '3' })];
    const workflowId = `${name}-${Date.now()}`;
    const run = await temporal.workflow.start('harvestWorkflow', { taskQueue, workflowId, args: [{ harvest, pageSize: 20 }] });
    try {
      await waitFor(async () => ((await emulator.ledger(API_KEY)).length - ledgerBefore >= 60 ? true : undefined), 90_000, '60 calls charged');
      await services.postgres.stop();
      let failed: HarvestSummary | undefined;
      try {
        await run.result();
      } catch (error) {
        if (!(error instanceof WorkflowFailedError)) throw error;
        failed = (error.cause as { details?: unknown[] } | undefined)?.details?.[0] as HarvestSummary;
      } finally {
        await services.postgres.start();
      }
      expect(failed?.status).toBe('failed');
      expect(failed?.reason).toBeTruthy();
      // What the works had landed before the outage stands: items, pages and positions, not 0 and "not started".
      expect(failed!.itemsLanded).toBeGreaterThan(0);
      expect(failed!.pagesLanded).toBeGreaterThan(0);
      expect(failed!.checkpoint.targets.some((target) => target.position.page > 1)).toBe(true);
      // The failed works' journals could not be read: their grants were counted whole, for the retry to correct.
      expect(failed!.checkpoint.countedAtWorst?.length).toBeGreaterThan(0);

      const retried = await runCli(['retry', workflowId, '--no-local-worker', '--json'], cliEnv(taskQueue, name));
      expect(retried.code, `${retried.stderr}${retried.stdout}`).toBe(0);
      const summary = JSON.parse(retried.stdout) as HarvestSummary;
      expect(summary.status, summary.reason).toBe('completed');
      expect(summary.itemsLanded).toBe(360);
      const ledger = (await emulator.ledger(API_KEY)).slice(ledgerBefore);
      const charged = ledger.reduce((sum, row) => sum + row.credits, 0);
      // Every credit charged is in the run's figure; beyond it only calls honestly counted as lost,
      // each at its worst case (a page of 20 at 3 credits), never a work's whole grant.
      expect(summary.creditsSpent).toBeGreaterThanOrEqual(charged);
      expect(summary.creditsSpent - charged).toBeLessThanOrEqual(summary.callsLost * 60);
      Object.assign(process.env, services.environment(name));
      const reader = mkdtempSync(join(tmpdir(), 'outage-reader-'));
      scratches.push(reader);
      const one = async (sql: string) => Object.values((await queryWarehouse(reader, sql)).rows[0]!).map(String);
      expect(await one(`SELECT count(*), count(DISTINCT (platform, item_id)) FROM items`)).toEqual(['360', '360']);
      expect(await one(`SELECT credits_spent FROM harvest_runs WHERE run_id = '${workflowId}'`)).toEqual([String(summary.creditsSpent)]);
      expect(await creditsShown(workflowId, taskQueue, name)).toEqual({ show: summary.creditsSpent, runs: summary.creditsSpent });
    } finally {
      await stopAll(workers);
    }
  }, 300_000);
});
