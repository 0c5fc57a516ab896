#!/usr/bin/env node
/**
 * A seeded, randomized chaos soak (issue 32). A seed draws, for each of N runs, where it runs (one
 * machine: a data directory and one worker; or the distributed stack: PostgreSQL, MinIO and two
 * workers with scratch directories of their own), a harvest (two TikTok channels and an Instagram
 * channel, ITEMS items each, every item's stats), and one or two faults at random moments (after a
 * random number of calls charged), among those bench/soak/faults.mjs makes: worker kill and
 * freeze, Temporal restart, API 5xx, answers cut and answers spoiled by the corrupting proxy every
 * worker reaches the emulator through, a filling disk (one machine), PostgreSQL outage and MinIO
 * freeze (distributed).
 *
 * After each run (and one `harvester retry`, as an operator would make it, when it did not
 * complete; a full disk is emptied first) it checks the invariants of bench/soak/invariants.mjs:
 * every expected item once, no invented row, credits (ledger <= reported, the gap within the lost
 * calls' worst cases, api_calls within the ledger), calls re-paid within the calls in flight at
 * the faults, the budget, and an honest status.
 *
 * A violation prints the seed and the run's index, and `SOAK_SEED=<seed> SOAK_FROM=<index>
 * SOAK_RUNS=1` replays that run's draws (they depend only on the seed, the index and
 * SOAK_DISTRIBUTED; the timing is new each time). The script exits 1 if any run violated an
 * invariant.
 *
 *   npm run build && node bench/chaos-soak.mjs
 *   SOAK_SEED=7 SOAK_RUNS=20 SOAK_DISTRIBUTED=0.3 SOAK_ITEMS=60 node bench/chaos-soak.mjs
 *   SOAK_FAULTS=disk-full,answers-corrupt      (draw only among these kinds)
 *   SOAK_LOGS=/tmp/soak-logs                   (each worker's log, at info, in a file there)
 */
import { spawn } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, openSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { WorkflowFailedError } from '@temporalio/client';
import { CLI, cli, startStack, track, waitFor } from './soak/stack.mjs';
import { commandOf, DISTRIBUTED_FAULTS, LOCAL_FAULTS, makeFault, mountDisk, readableLake, unmountDisk } from './soak/faults.mjs';
import { diagnosis, violationsOf, warehouseRows, worldItems } from './soak/invariants.mjs';

const dist = join(new URL('..', import.meta.url).pathname, 'dist');
const { randomStream } = await import(join(dist, 'src/emulator/world/random.js'));
const { SocialApiClient } = await import(join(dist, 'src/api/client.js'));
const { loadPriceTable } = await import(join(dist, 'src/config/prices.js'));
const { parseHarvestConfig } = await import(join(dist, 'src/config/harvest-config.js'));
const { withWarehouseQueries } = await import(join(dist, 'src/warehouse/query.js'));
const { harvestSummary } = await import(join(dist, 'src/temporal/run-summary.js'));
const { startSharedServices } = await import(join(dist, 'src/cli/shared-services.js'));

const SEED = Number(process.env.SOAK_SEED ?? Math.floor(Math.random() * 2 ** 31));
const RUNS = Number(process.env.SOAK_RUNS ?? 10);
const FROM = Number(process.env.SOAK_FROM ?? 0);
const DISTRIBUTED_SHARE = Number(process.env.SOAK_DISTRIBUTED ?? 0.3);
const ITEMS = Number(process.env.SOAK_ITEMS ?? 60);
const LOGS = process.env.SOAK_LOGS;
const ONLY = process.env.SOAK_FAULTS ? new Set(process.env.SOAK_FAULTS.split(',')) : undefined;
const HARVEST_KEY = 'sk_live_soak_harvest';
const VERIFY_KEY = 'sk_live_soak_verify';
const PAGE_SIZE = 20;
const CONCURRENCY = { targets: 3, calls: 6 };
const BUDGET = 20_000;
const RESULT_TIMEOUT_MS = 600_000;
const prices = loadPriceTable();
const LIMITS = {
  budget: BUDGET,
  /** A fault with calls in flight lost at most its targets' pages and its enrichment calls. */
  inFlight: CONCURRENCY.targets + CONCURRENCY.calls,
  dearestCall: PAGE_SIZE * Math.max(prices['tiktok/channel-videos'], prices['instagram/channel-reels']),
};
const OUT = mkdtempSync(join(tmpdir(), 'chaos-soak-'));
// PostgreSQL may run as another user (src/cli/shared-services.ts): it must reach its folder.
chmodSync(OUT, 0o755);

const stack = await startStack(OUT, [HARVEST_KEY, VERIFY_KEY]);
const verify = new SocialApiClient({ baseUrl: stack.emulator.baseUrl, apiKey: VERIFY_KEY, prices });
let services;

async function cleanup() {
  await stack.close();
  await services?.stop().catch(() => undefined);
  await verify.close().catch(() => undefined);
  rmSync(OUT, { recursive: true, force: true });
}
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.once(signal, () => void cleanup().then(() => process.exit(130)));
}

// -------------------------------------------------------------------------------------------------
// One run.

/** The run's draws: where, which channels, which faults, and when (mulberry32, the emulator's seeded stream). */
function drawRun(index) {
  const random = randomStream(SEED * 1_000_003 + index);
  const pick = (list) => list[Math.floor(random() * list.length)];
  const distributed = random() < DISTRIBUTED_SHARE;
  const kinds = (distributed ? DISTRIBUTED_FAULTS : LOCAL_FAULTS).filter((kind) => !ONLY || ONLY.has(kind));
  if (kinds.length === 0) throw new Error(`SOAK_FAULTS leaves no fault for a ${distributed ? 'distributed' : 'local'} run`);
  const faults = Array.from({ length: 1 + Math.floor(random() * 2) }, () => ({ kind: pick(kinds), afterCalls: 10 + Math.floor(random() * 90), seconds: 5 + Math.floor(random() * 30), victim: random() }));
  faults.sort((a, b) => a.afterCalls - b.afterCalls);
  // Channels of their own per run: the shared catalog's listing coverage is per target, and a
  // covered target would make the run incremental.
  const handles = stack.catalog.tiktok.handles;
  const reels = stack.catalog.instagram.handles;
  const channels = [
    ['tiktok', handles[(2 * index) % handles.length], 'videos', 'channel-videos'],
    ['tiktok', handles[(2 * index + 1) % handles.length], 'videos', 'channel-videos'],
    ['instagram', reels[index % reels.length], 'reels', 'channel-reels'],
  ];
  return { distributed, faults, channels };
}

function workerEnv(run, scratch) {
  return {
    ...process.env,
    ...run.env,
    TEMPORAL_ADDRESS: stack.temporalAddress,
    HARVESTER_TASK_QUEUE: run.taskQueue,
    HARVESTER_DATA_DIR: scratch,
    SOCIAL_API_BASE_URL: stack.proxy.baseUrl,
    SOCIAL_API_KEY: HARVEST_KEY,
    LOG_LEVEL: 'error',
    // The soak's outages last up to 40 s: well inside the default bound; a shorter one tests the bound itself.
    HARVESTER_OUTAGE_WAIT_SECONDS: '600',
  };
}

function startWorker(run) {
  const scratch = run.distributed ? mkdtempSync(join(run.dir, 'machine-')) : run.dataDir;
  const [file, args] = commandOf(run, [CLI, 'worker']);
  // SOAK_LOGS=<folder>: each worker's log (at info) in a file of its own there, for a violation's post-mortem.
  const log = LOGS ? openSync(join(LOGS, `run-${run.index}-worker-${++run.workersStarted}.log`), 'a') : 'ignore';
  const env = { ...workerEnv(run, scratch), ...(LOGS ? { LOG_LEVEL: 'info' } : {}) };
  return track(spawn(file, args, { env, stdio: ['ignore', log, log] }));
}

async function resultOf(workflowId) {
  const deadline = Date.now() + RESULT_TIMEOUT_MS;
  for (;;) {
    try {
      return await harvestSummary(stack.temporal.workflow.getHandle(workflowId));
    } catch (error) {
      if (error instanceof WorkflowFailedError || Date.now() > deadline) throw error;
      await sleep(1_000); // Temporal restarting: ask again
    }
  }
}

/** A run's folder, its shared store when distributed, its small disk when it draws one. */
async function prepareRun(index) {
  const draw = drawRun(index);
  const dir = mkdtempSync(join(OUT, `run-${index}-`));
  chmodSync(dir, 0o755);
  const run = { ...draw, index, dir, dataDir: join(dir, 'data'), taskQueue: `soak-${SEED}-${index}`, env: {}, beforeRetry: [], workersStarted: 0 };
  mkdirSync(run.dataDir, { recursive: true });
  if (run.distributed) {
    // A store of its own per run: one PostgreSQL database holds one DuckLake catalog, so two
    // prefixes on one catalog would share a lake (whose files each resolves under its own prefix).
    await services?.stop();
    services = await startSharedServices(join(dir, 'services'));
    run.env = services.environment('harvests');
  }
  if (run.faults.some((fault) => fault.kind === 'disk-full')) await mountDisk(run);
  const yaml = `harvests:
  - name: soak-${index}
    budget: { credits: ${BUDGET} }
    concurrency: { targets: ${CONCURRENCY.targets}, calls: ${CONCURRENCY.calls} }
    channels:
${run.channels.map(([platform, handle, content]) => `      - { platform: ${platform}, handle: ${handle}, content: ${content}, max_items: ${ITEMS} }`).join('\n')}
    enrich: { stats: true }
`;
  run.harvest = parseHarvestConfig(yaml, 'chaos-soak.yaml').harvests[0];
  return run;
}

/** Starts the run, makes its faults as the ledger reaches their call counts, and retries it once if it did not complete. */
async function drive(run, ledgerBefore) {
  const workers = Array.from({ length: run.distributed ? 2 : 1 }, () => startWorker(run));
  const workflowId = `soak-${SEED}-${run.index}-${Date.now()}`;
  let done = false;
  const ctx = { stack, services: () => services, startWorker, done: () => done };
  try {
    await stack.temporal.workflow.start('harvestWorkflow', { taskQueue: run.taskQueue, workflowId, args: [{ harvest: run.harvest, pageSize: PAGE_SIZE }] });
    const finished = resultOf(workflowId).then(
      (value) => ({ value }),
      (error) => ({ error }),
    );
    void finished.then(() => (done = true));
    for (const fault of run.faults) {
      const reached = await Promise.race([waitFor(async () => (done || (await stack.ledgerOf(HARVEST_KEY)).length - ledgerBefore >= fault.afterCalls ? true : undefined), RESULT_TIMEOUT_MS, `${fault.afterCalls} calls`, 100), finished]);
      if (done || reached !== true) break;
      fault.made = true;
      await makeFault(ctx, run, fault, workers);
    }
    const outcome = await finished;
    let summary = outcome.value ?? outcome.error?.cause?.details?.[0];
    if (!summary) throw outcome.error;
    const first = summary.status;
    if (first !== 'completed') {
      // As an operator would: what stopped the run put right (a full disk emptied), then retry it once, on the same workers.
      for (const undo of run.beforeRetry) undo();
      const retry = await cli(commandOf(run, [CLI, 'retry', workflowId, '--no-local-worker', '--json']), workerEnv(run, run.dataDir));
      if (retry.stdout.trim().startsWith('{')) summary = JSON.parse(retry.stdout);
      else summary = { ...summary, retryError: retry.stderr.trim().split('\n').pop() };
    }
    return { summary, first };
  } finally {
    stack.proxy.passThrough();
    for (const worker of workers) {
      worker.kill('SIGCONT');
      worker.kill('SIGTERM');
    }
    await Promise.all(workers.map((worker) => Promise.race([worker.exited, sleep(40_000).then(() => worker.kill('SIGKILL'))])));
  }
}

/** The warehouse's rows, read as any machine of the run would (the shared lake when distributed). */
async function readWarehouse(run) {
  const saved = { ...process.env };
  Object.assign(process.env, run.env);
  try {
    const reader = run.distributed ? mkdtempSync(join(run.dir, 'reader-')) : readableLake(run, run.dir);
    return await withWarehouseQueries(reader, warehouseRows);
  } finally {
    process.env = saved;
  }
}

async function soakRun(index) {
  const run = await prepareRun(index);
  console.log(`run ${index}: ${run.distributed ? 'distributed' : 'local'}, faults ${run.faults.map((fault) => `${fault.kind}@${fault.afterCalls} calls (${fault.seconds} s)`).join(', ')}`);
  try {
    const before = await worldItems(verify, run.channels, ITEMS);
    const ledgerBefore = (await stack.ledgerOf(HARVEST_KEY)).length;
    const spoiledBefore = stack.proxy.spoiledCalls.length;
    const began = Date.now();
    const { summary, first } = await drive(run, ledgerBefore);
    const spoiled = stack.proxy.spoiledCalls.slice(spoiledBefore).map((call) => call.kind);
    const after = await worldItems(verify, run.channels, ITEMS);
    const rows = await readWarehouse(run);
    const ledger = (await stack.ledgerOf(HARVEST_KEY)).slice(ledgerBefore);
    const faults = run.faults.filter((fault) => fault.made);
    const figures = violationsOf({ world: { before, after }, rows, ledger, summary, first, retried: first !== 'completed', faults, spoiled, limits: LIMITS });
    if (figures.violations.length > 0) console.log(`run ${index} listing pages in the warehouse, and calls lost:\n${diagnosis(rows, figures)}`);
    return {
      index,
      mode: run.distributed ? 'distributed' : 'local',
      faults: faults.map((fault) => `${fault.kind}@${fault.afterCalls}${fault.spoiled !== undefined ? `(${fault.spoiled} spoiled)` : ''}`).join('+') || '(run ended before its faults)',
      status: first === 'completed' ? 'completed' : `${first}, then ${summary.status} after retry${summary.retryError ? ` (${summary.retryError})` : ''}`,
      items: `${figures.distinct}/${figures.expected}${before.size !== after.size || [...before].some((id) => !after.has(id)) ? ' (the world changed during the run)' : ''}`,
      credits: `ledger ${figures.charged} reported ${figures.reported} api_calls ${figures.landedCredits} lost ${figures.lost}`,
      seconds: Math.round((Date.now() - began) / 1_000),
      violations: figures.violations,
    };
  } finally {
    await unmountDisk(run);
  }
}

// -------------------------------------------------------------------------------------------------

console.log(`chaos soak: seed ${SEED}, runs ${FROM}..${FROM + RUNS - 1}, ${ITEMS} items per target, distributed share ${DISTRIBUTED_SHARE}${ONLY ? `, faults among ${[...ONLY].join(', ')}` : ''}`);
const began = Date.now();
const results = [];
try {
  for (let index = FROM; index < FROM + RUNS; index++) {
    let result;
    try {
      result = await soakRun(index);
    } catch (error) {
      result = { index, mode: drawRun(index).distributed ? 'distributed' : 'local', faults: '?', status: 'error', items: '?', credits: '?', seconds: 0, violations: [`the soak itself failed: ${error.message}`] };
    }
    results.push(result);
    const verdict = result.violations.length === 0 ? 'ok' : `VIOLATION (replay: SOAK_SEED=${SEED} SOAK_FROM=${index} SOAK_RUNS=1): ${result.violations.join('; ')}`;
    console.log(`run ${index} ${result.mode} [${result.faults}] ${result.status}, items ${result.items}, ${result.credits}, ${result.seconds} s: ${verdict}`);
  }
} finally {
  await cleanup();
}
const violated = results.filter((result) => result.violations.length > 0);
const distributed = results.filter((result) => result.mode === 'distributed').length;
console.log(`seed ${SEED}: ${results.length} runs (${distributed} distributed) in ${Math.round((Date.now() - began) / 1_000)} s, ${violated.length} with violations${violated.length ? `: runs ${violated.map((result) => result.index).join(', ')}` : ''}`);
process.exit(violated.length > 0 ? 1 : 0);
