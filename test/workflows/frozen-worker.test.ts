/**
 * A worker frozen (SIGSTOP) with calls in flight, its work taken over by another worker, woken
 * (SIGCONT) after its run is over (issue 39): it makes no new billed call, and the run's credits
 * equal the emulator's ledger after it wakes; on one machine (one data directory) and with shared
 * storage (PostgreSQL and MinIO, each worker on a scratch directory of its own). Before the fence,
 * a stale activity task the frozen worker had been handed claimed its work's journal on waking
 * (over the later attempt's claim, recreating the ended run's journals) and bought on: 1,100
 * credits after the run's end, counted nowhere.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readdirSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { Client } from '@temporalio/client';
import { startSharedServices, type SharedServices } from '../../src/cli/shared-services.js';
import { pathSegment } from '../../src/store/layout.js';
import { storeFromEnvironment } from '../../src/store/store-from-environment.js';
import type { Store } from '../../src/store/store.js';
import { loadLandings } from '../../src/warehouse/loader.js';
import { queryWarehouse } from '../../src/warehouse/query.js';
import type { HarvestSummary } from '../../workflows/harvest.js';
import { CLI } from '../support/cli.js';
import { startTestEmulator, waitFor, type TestEmulator } from '../support/emulator.js';
import { harvestFrom, temporalClient } from '../support/temporal.js';

const KEYS = { local: 'sk_live_frozen_local', next: 'sk_live_frozen_next', shared: 'sk_live_frozen_shared' };
/** DescribeTaskQueue's type of an activity task queue (TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY). */
const ACTIVITY_TASK_QUEUE = 2;
let emulator: TestEmulator;
let temporal: Client;
let services: SharedServices | undefined;
const savedEnv = { ...process.env };
beforeAll(async () => {
  // Latency per call, so the freeze lands with calls on the wire; and a rate limit below what the
  // run asks, so it lands with calls journaled and waiting at the client's rate gate too.
  emulator = await startTestEmulator({ apiKeys: Object.values(KEYS), latencyMs: 60, rateLimit: 40 });
  temporal = await temporalClient();
});
afterAll(async () => {
  process.env = savedEnv;
  await temporal?.connection.close();
  await emulator?.close();
  await services?.stop();
});

function startWorker(env: Record<string, string>): ChildProcess {
  return spawn(process.execPath, [CLI, 'worker'], { env: { ...process.env, LOG_LEVEL: 'error', ...env }, stdio: ['ignore', 'ignore', 'inherit'] });
}

async function stop(worker: ChildProcess | undefined): Promise<void> {
  if (!worker || worker.exitCode !== null || worker.signalCode !== null) return;
  const exited = new Promise((resolve) => worker.once('exit', resolve));
  worker.kill('SIGCONT');
  worker.kill('SIGTERM');
  await exited;
}

/**
 * When Temporal last saw `worker` poll `taskQueue` for activity tasks (ms since the epoch), by its
 * default identity (`pid@host`, the SDK's), or undefined if it has not polled in the last minutes.
 * Temporal records a poll's time when the poll arrives.
 */
async function lastActivityPoll(taskQueue: string, worker: ChildProcess): Promise<number | undefined> {
  const { pollers } = await temporal.workflowService.describeTaskQueue({ namespace: temporal.options.namespace, taskQueue: { name: taskQueue }, taskQueueType: ACTIVITY_TASK_QUEUE });
  const poller = (pollers ?? []).find((each) => each.identity === `${worker.pid}@${hostname()}`);
  const at = poller?.lastAccessTime;
  return at ? Number(at.seconds ?? 0) * 1_000 + Math.floor((at.nanos ?? 0) / 1e6) : undefined;
}

/**
 * Waits out everything the woken worker can still do, then reads the ledger. What it held when it
 * froze is (a) the activities it was running, and (b) the tasks Temporal handed its polls while it
 * was frozen, answers left unread in its socket. Two events end them:
 * - it polls Temporal again after `wokenAt`: a poller asks again only once it has taken the answer
 *   of its last poll and handed its task on to be run, and the answers that came during the freeze
 *   were all in the socket (a few kilobytes) when it woke, read together by its one connection;
 *   so (b) are running by then, as in any worker, fence and all;
 * - then it stops (SIGTERM: it polls no more and lets the activities in flight, (a) and (b), run
 *   to their end, up to its 30 s grace) and its process exits.
 * A process that has exited sends nothing: any call it made is in the ledger read after the exit.
 * The 15 s watch this replaced saw no more than that, and waited out fixed time to do so.
 */
async function ledgerAfterWake(worker: ChildProcess, taskQueue: string, wokenAt: number, apiKey: string) {
  await waitFor(async () => ((await lastActivityPoll(taskQueue, worker)) ?? 0) > wokenAt || undefined, 120_000, 'the woken worker polling Temporal again');
  const polledAfterMs = Date.now() - wokenAt;
  await stop(worker);
  expect(worker.exitCode, 'the woken worker stopped as asked').toBe(0);
  console.log(`woken worker: polled again ${polledAfterMs} ms after its wake, exited ${Date.now() - wokenAt} ms after it`);
  return ledgerOf(apiKey);
}

const ledgerOf = async (apiKey: string) => {
  const rows = await emulator.ledger(apiKey);
  return { calls: rows.length, credits: rows.reduce((sum, row) => sum + row.credits, 0) };
};

async function harvestOf(name: string) {
  const catalog = await emulator.catalog();
  return harvestFrom(`
harvests:
  - name: ${name}
    budget: { credits: 100000 }
    concurrency: { targets: 3, calls: 16 }
    channels:
      - { platform: tiktok, handle: ${catalog.tiktok.handles[6]}, content: videos, max_items: 200 }
      - { platform: tiktok, handle: ${catalog.tiktok.handles[7]}, content: videos, max_items: 200 }
      - { platform: instagram, handle: ${catalog.instagram.handles[6]}, content: reels, max_items: 200 }
    enrich: { stats: true }
`);
}

/** The runs' credits in the lake (`harvest_runs.credits_spent`, late charges included), summed. */
async function lakeCredits(dataDir: string, summaries: HarvestSummary[], store?: Store): Promise<number> {
  await loadLandings(dataDir, store ? { store } : {});
  const runs = summaries.map((summary) => `'${summary.runId}'`).join(', ');
  const { rows } = await queryWarehouse(dataDir, `SELECT sum(credits_spent)::INTEGER AS credits, count(*)::INTEGER AS runs FROM harvest_runs WHERE run_id IN (${runs})`);
  expect(rows[0]!.runs).toBe(summaries.length);
  return Number(rows[0]!.credits);
}

/**
 * The run's summary (Temporal's) against what the API charged it: each call the woken worker's fence
 * kept back was counted at its worst case, as lost, by the attempt that took its work over; it is
 * over by at most those, never under (the lake's row is exact, lakeCredits).
 */
function expectRunFigures(summary: HarvestSummary, charged: number): void {
  expect(summary.creditsSpent).toBeGreaterThanOrEqual(charged);
  expect(summary.creditsSpent - charged).toBeLessThanOrEqual(summary.callsLost * 3 * 20);
}

interface FrozenCase {
  apiKey: string;
  /** The environment of the n-th worker (each may have a scratch directory of its own). */
  workerEnv: (taskQueue: string) => Record<string, string>;
  /** A second run of the same harvest, started while the first worker is still frozen, after the first run ended. */
  nextRun?: boolean;
}

/**
 * Worker 1 alone until 150 calls are charged, then frozen; worker 2 finishes the run (and the next
 * one, if asked); worker 1 woken. Returns the runs' summaries and the ledger at the end and after the wake.
 */
async function freezeAndWake({ apiKey, workerEnv, nextRun }: FrozenCase) {
  const taskQueue = `frozen-${Date.now()}`;
  const harvest = await harvestOf('frozen');
  const frozen = startWorker(workerEnv(taskQueue));
  let other: ChildProcess | undefined;
  /** When the frozen worker was woken (SIGCONT). */
  let wokenAt: number | undefined;
  try {
    const run = await temporal.workflow.start('harvestWorkflow', { taskQueue, workflowId: `frozen-${Date.now()}`, args: [{ harvest, pageSize: 20 }] });
    await waitFor(async () => ((await ledgerOf(apiKey)).calls >= 150 ? true : undefined), 90_000, '150 calls charged');
    frozen.kill('SIGSTOP');
    other = startWorker(workerEnv(taskQueue));
    const summaries = [(await run.result()) as HarvestSummary];
    if (nextRun) {
      const next = await temporal.workflow.start('harvestWorkflow', { taskQueue, workflowId: `frozen-next-${Date.now()}`, args: [{ harvest, pageSize: 20 }] });
      const before = (await ledgerOf(apiKey)).calls;
      // It knows the first run's items (their listing stops at them): a few calls, and it is under
      // way. Tasks Temporal hands the frozen worker's pollers wait out their timeouts first.
      const ended = next.result();
      await Promise.race([ended, waitFor(async () => ((await ledgerOf(apiKey)).calls > before ? true : undefined), 240_000, 'the next run buying')]);
      wokenAt = Date.now();
      frozen.kill('SIGCONT');
      summaries.push((await ended) as HarvestSummary);
    }
    const atEnd = await ledgerOf(apiKey);
    wokenAt ??= Date.now();
    frozen.kill('SIGCONT');
    const afterWake = await ledgerAfterWake(frozen, taskQueue, wokenAt, apiKey);
    console.log(`frozen worker: runs ${summaries.map((summary) => `${summary.runId} ${summary.status} ${summary.creditsSpent} credits, ${summary.callsLost} calls lost`).join('; ')}; ledger ${atEnd.credits} at the end, ${afterWake.credits} after the wake`);
    return { summaries, atEnd, afterWake };
  } finally {
    await stop(frozen);
    await stop(other);
  }
}

describe('a worker frozen with calls in flight, woken after its run is over', () => {
  it('one data directory: it makes no new billed call, the run\'s credits equal the ledger, and the ended run\'s journals stay removed', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'frozen-'));
    const env = { TEMPORAL_ADDRESS: inject('temporalAddress'), HARVESTER_DATA_DIR: dataDir, SOCIAL_API_BASE_URL: emulator.baseUrl, SOCIAL_API_KEY: KEYS.local };
    const { summaries, atEnd, afterWake } = await freezeAndWake({ apiKey: KEYS.local, workerEnv: (taskQueue) => ({ ...env, HARVESTER_TASK_QUEUE: taskQueue }) });
    const [summary] = summaries as [HarvestSummary];
    expect(summary.status).toBe('completed');
    expect(afterWake).toEqual(atEnd);
    expectRunFigures(summary, afterWake.credits);
    // Nothing of the ended run's journals came back: no claim, no record, only the mark that it ended.
    const folder = join(dataDir, 'journal', pathSegment(summary.runId));
    expect(readdirSync(folder)).toEqual(['.ended']);
    // What the woken worker learnt of its calls (late records: answers of calls that were on the
    // wire, calls its fence kept back) goes into the run's row with the next load: equal to the ledger.
    expect(await lakeCredits(dataDir, summaries)).toBe(afterWake.credits);
    const late = join(dataDir, 'journal-late');
    expect(existsSync(late) ? readdirSync(late) : []).toEqual([]);
  }, 240_000);

  it('frozen until the next run of the harvest is under way: it spends nothing for either, each run\'s credits in the ledger', { tags: ['long'], timeout: 480_000 }, async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'frozen-next-'));
    const env = { TEMPORAL_ADDRESS: inject('temporalAddress'), HARVESTER_DATA_DIR: dataDir, SOCIAL_API_BASE_URL: emulator.baseUrl, SOCIAL_API_KEY: KEYS.next };
    const { summaries, atEnd, afterWake } = await freezeAndWake({ apiKey: KEYS.next, nextRun: true, workerEnv: (taskQueue) => ({ ...env, HARVESTER_TASK_QUEUE: taskQueue }) });
    expect(summaries.map((summary) => summary.status)).toEqual(['completed', 'completed']);
    expect(afterWake).toEqual(atEnd);
    // The woken worker took part in the second run (it polls again), but bought nothing for the first.
    expectRunFigures(summaries[0]!, afterWake.credits - summaries[1]!.creditsSpent);
    expect(await lakeCredits(dataDir, summaries)).toBe(afterWake.credits);
  });

  it('shared storage (PostgreSQL and MinIO): it makes no new billed call, the run\'s credits equal the ledger', { tags: ['long'], timeout: 360_000 }, async () => {
    const folder = mkdtempSync(join(tmpdir(), 'frozen-shared-'));
    // PostgreSQL may run as another user (see startPostgres): it must reach its folder.
    chmodSync(folder, 0o755);
    services = await startSharedServices(folder);
    const sharedEnv = services.environment('frozen');
    const workerEnv = (taskQueue: string) => ({
      ...sharedEnv,
      TEMPORAL_ADDRESS: inject('temporalAddress'),
      HARVESTER_TASK_QUEUE: taskQueue,
      HARVESTER_DATA_DIR: mkdtempSync(join(tmpdir(), 'frozen-machine-')),
      SOCIAL_API_BASE_URL: emulator.baseUrl,
      SOCIAL_API_KEY: KEYS.shared,
    });
    const { summaries, atEnd, afterWake } = await freezeAndWake({ apiKey: KEYS.shared, workerEnv });
    const [summary] = summaries as [HarvestSummary];
    expect(summary.status).toBe('completed');
    expect(afterWake).toEqual(atEnd);
    expectRunFigures(summary, afterWake.credits);
    // The lake is shared too: this process loads and reads it as any machine would, from the store's settings.
    Object.assign(process.env, sharedEnv);
    const reader = mkdtempSync(join(tmpdir(), 'frozen-reader-'));
    expect(await lakeCredits(reader, summaries, await storeFromEnvironment(reader))).toBe(afterWake.credits);
  });
});
