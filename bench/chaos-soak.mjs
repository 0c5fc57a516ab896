#!/usr/bin/env node
/**
 * A seeded, randomized chaos soak (issue 32). A seed draws, for each of N runs, where it runs (one
 * machine: a data directory and one worker; or the distributed stack: PostgreSQL, MinIO and two
 * workers with scratch directories of their own), a harvest (two TikTok channels and an Instagram
 * channel, ITEMS items each, every item's stats), and one or two faults at random moments (after a
 * random number of calls charged):
 *
 *   worker-kill       SIGKILL of a worker, replaced by a new one (a new machine when distributed)
 *   worker-freeze     SIGSTOP of a worker for 5-20 s, then SIGCONT
 *   temporal-restart  the Temporal dev server stopped and started again on its port and SQLite file
 *   api-5xx           the emulator answers 30 % of calls with 5xx for 5-15 s
 *   postgres-outage   (distributed) PostgreSQL stopped for 10-40 s, then started again in place
 *   minio-freeze      (distributed) MinIO SIGSTOPped for 10-40 s, then SIGCONT
 *
 * After each run (and one `harvester retry`, as an operator would make it, when it did not
 * complete) it checks the invariants:
 *
 *   items-once      every expected item (the emulator's world, read with a verification key) is in
 *                   the warehouse exactly once
 *   no-invented     no item the world does not have for the targets
 *   credits         ledger <= reported; reported - ledger <= calls counted as lost x the dearest
 *                   call's worst case; the warehouse's api_calls credits <= ledger; ledger calls not
 *                   in api_calls <= calls counted as lost + the calls in flight at the faults (a
 *                   frozen attempt's answers and its successor's are both charged and counted)
 *   re-paid         calls counted as lost <= the calls in flight at the kills and freezes
 *                   (targets + calls in flight, per fault)
 *   budget          ledger <= the run's budget (and its retry's)
 *   honest-status   `completed` exactly when every expected item is there
 *
 * A violation prints the seed and the run's index, and `SOAK_SEED=<seed> SOAK_FROM=<index>
 * SOAK_RUNS=1` replays that run (its draws depend only on the seed and its index). The script
 * exits 1 if any run violated an invariant.
 *
 *   npm run build && node bench/chaos-soak.mjs
 *   SOAK_SEED=7 SOAK_RUNS=20 SOAK_DISTRIBUTED=0.3 SOAK_ITEMS=60 node bench/chaos-soak.mjs
 *
 * Not drawn yet (the fault matrix, bench/fault-matrix.mjs, has them as fixed cases): answers cut or
 * corrupted by the corrupting proxy, and a filling disk.
 */
import { spawn } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client, Connection, WorkflowFailedError } from '@temporalio/client';
import { startEmulatorProcess } from './emulator-process.mjs';

const root = new URL('..', import.meta.url).pathname;
const dist = join(root, 'dist');
const CLI = join(dist, 'src', 'cli', 'main.js');
const { randomStream } = await import(join(dist, 'src/emulator/world/random.js'));
const { SocialApiClient } = await import(join(dist, 'src/api/client.js'));
const { loadPriceTable } = await import(join(dist, 'src/config/prices.js'));
const { parseHarvestConfig } = await import(join(dist, 'src/config/harvest-config.js'));
const { devServerArgs, TEMPORAL_BINARY } = await import(join(dist, 'src/temporal/dev-server.js'));
const { freePort } = await import(join(dist, 'src/cli/free-port.js'));
const { queryWarehouse } = await import(join(dist, 'src/warehouse/query.js'));
const { harvestSummary } = await import(join(dist, 'src/temporal/run-summary.js'));
const { startSharedServices } = await import(join(dist, 'src/cli/shared-services.js'));

const SEED = Number(process.env.SOAK_SEED ?? Math.floor(Math.random() * 2 ** 31));
const RUNS = Number(process.env.SOAK_RUNS ?? 10);
const FROM = Number(process.env.SOAK_FROM ?? 0);
const DISTRIBUTED_SHARE = Number(process.env.SOAK_DISTRIBUTED ?? 0.3);
const ITEMS = Number(process.env.SOAK_ITEMS ?? 60);
const HARVEST_KEY = 'sk_live_soak_harvest';
const VERIFY_KEY = 'sk_live_soak_verify';
const PAGE_SIZE = 20;
const CONCURRENCY = { targets: 3, calls: 6 };
const BUDGET = 20_000;
const RESULT_TIMEOUT_MS = 600_000;
const prices = loadPriceTable();
const OUT = mkdtempSync(join(tmpdir(), 'chaos-soak-'));
// PostgreSQL may run as another user (src/cli/shared-services.ts): it must reach its folder.
chmodSync(OUT, 0o755);

/** mulberry32, the emulator's seeded stream: a seed and a run's index replay the run's draws exactly. */
const prng = randomStream;

// -------------------------------------------------------------------------------------------------
// The stack: Temporal (restartable), the emulator, and PostgreSQL + MinIO for distributed runs.

const children = new Set();
function track(child) {
  children.add(child);
  child.exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  void child.exited.then(() => children.delete(child));
  return child;
}

const temporalPort = await freePort();
const temporalAddress = `127.0.0.1:${temporalPort}`;
let temporalServer;
async function startTemporal() {
  temporalServer = track(spawn(TEMPORAL_BINARY, devServerArgs({ port: temporalPort, dbFile: join(OUT, 'temporal.sqlite') }), { stdio: 'ignore' }));
  await waitFor(async () => {
    try {
      const connection = await Connection.connect({ address: temporalAddress, connectTimeout: 1_000 });
      await connection.workflowService.getSystemInfo({});
      await connection.close();
      return true;
    } catch {
      return undefined;
    }
  }, 60_000, 'Temporal to answer', 250);
}
async function stopTemporal() {
  temporalServer.kill('SIGTERM');
  if (!(await Promise.race([temporalServer.exited, sleep(15_000)]))) temporalServer.kill('SIGKILL');
  await temporalServer.exited;
}

async function waitFor(check, timeoutMs, what, everyMs = 200) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs / 1000} s waiting for ${what}`);
    await sleep(everyMs);
  }
}

async function admin(origin, path, body) {
  const response = await fetch(`${origin}/_emulator/${path}`, body === undefined ? {} : { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const json = await response.json();
  if (!response.ok) throw new Error(`admin ${path}: ${response.status} ${JSON.stringify(json)}`);
  return json.data;
}

await startTemporal();
const connection = await Connection.connect({ address: temporalAddress });
const temporal = new Client({ connection });
const emulator = await startEmulatorProcess(['--api-key', HARVEST_KEY, '--api-key', VERIFY_KEY, '--latency-ms', '30', '--rate-limit', '1000', '--credits', '100000000']);
track(emulator.child);
const catalog = await admin(emulator.origin, 'catalog');
let services;

async function cleanup() {
  for (const child of children) child.kill('SIGKILL');
  await services?.stop().catch(() => undefined);
  await connection.close().catch(() => undefined);
  rmSync(OUT, { recursive: true, force: true });
}
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.once(signal, () => void cleanup().then(() => process.exit(130)));
}

// -------------------------------------------------------------------------------------------------
// One run.

const LOCAL_FAULTS = ['worker-kill', 'worker-freeze', 'temporal-restart', 'api-5xx'];
const DISTRIBUTED_FAULTS = [...LOCAL_FAULTS, 'postgres-outage', 'minio-freeze'];
/** A fault with calls in flight lost at most its targets' pages and its enrichment calls. */
const IN_FLIGHT = CONCURRENCY.targets + CONCURRENCY.calls;
const DEAREST_CALL = PAGE_SIZE * Math.max(prices['tiktok/channel-videos'], prices['instagram/channel-reels']);

/** The run's draws: where, which channels, which faults, and when. */
function drawRun(index) {
  const random = prng(SEED * 1_000_003 + index);
  const pick = (list) => list[Math.floor(random() * list.length)];
  const distributed = random() < DISTRIBUTED_SHARE;
  const kinds = distributed ? DISTRIBUTED_FAULTS : LOCAL_FAULTS;
  const faults = Array.from({ length: 1 + Math.floor(random() * 2) }, () => ({ kind: pick(kinds), afterCalls: 10 + Math.floor(random() * 90), seconds: 5 + Math.floor(random() * 30) }));
  faults.sort((a, b) => a.afterCalls - b.afterCalls);
  // Channels of their own per run: the shared catalog's listing coverage is per target, and a
  // covered target would make the run incremental.
  const handles = catalog.tiktok.handles;
  const reels = catalog.instagram.handles;
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
    TEMPORAL_ADDRESS: temporalAddress,
    HARVESTER_TASK_QUEUE: run.taskQueue,
    HARVESTER_DATA_DIR: scratch,
    SOCIAL_API_BASE_URL: emulator.baseUrl,
    SOCIAL_API_KEY: HARVEST_KEY,
    LOG_LEVEL: 'error',
    // The soak's outages last up to 35 s: well inside the default bound; a shorter one tests the bound itself.
    HARVESTER_OUTAGE_WAIT_SECONDS: '600',
  };
}

function startWorker(run) {
  const scratch = run.distributed ? mkdtempSync(join(run.dir, 'machine-')) : run.dataDir;
  return track(spawn(process.execPath, [CLI, 'worker'], { env: workerEnv(run, scratch), stdio: ['ignore', 'ignore', 'ignore'] }));
}

async function ledgerOf(key) {
  return admin(emulator.origin, `ledger?api_key=${key}`);
}

/** The world's items of the run's channels up to ITEMS, read with the verification key. */
async function expectedItems(run) {
  const client = new SocialApiClient({ baseUrl: emulator.baseUrl, apiKey: VERIFY_KEY, prices });
  try {
    const ids = new Set();
    for (const [platform, handle, , endpoint] of run.channels) {
      for await (const page of client.pages(platform, endpoint, { handle }, { maxItems: ITEMS })) for (const item of page.items) ids.add(`${platform}:${item.id}`);
    }
    return ids;
  } finally {
    await client.close();
  }
}

async function resultOf(workflowId) {
  const deadline = Date.now() + RESULT_TIMEOUT_MS;
  for (;;) {
    try {
      return await harvestSummary(temporal.workflow.getHandle(workflowId));
    } catch (error) {
      if (error instanceof WorkflowFailedError || Date.now() > deadline) throw error;
      await sleep(1_000); // Temporal restarting: ask again
    }
  }
}

function cli(args, env) {
  return new Promise((resolve) => {
    const child = track(spawn(process.execPath, [CLI, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] }));
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** Makes one fault, now; resolves once the service is back. `workers` is changed in place (a killed one is replaced). */
async function makeFault(run, fault, workers) {
  const victim = Math.floor(prng(SEED + fault.afterCalls)() * workers.length);
  switch (fault.kind) {
    case 'worker-kill':
      workers[victim].kill('SIGKILL');
      await workers[victim].exited;
      workers[victim] = startWorker(run);
      return;
    case 'worker-freeze':
      workers[victim].kill('SIGSTOP');
      await sleep(Math.min(fault.seconds, 20) * 1_000);
      workers[victim].kill('SIGCONT');
      return;
    case 'temporal-restart':
      await stopTemporal();
      await sleep(2_000);
      await startTemporal();
      return;
    case 'api-5xx':
      await admin(emulator.origin, 'faults', { fault_rate: 0.3 });
      await sleep(Math.min(fault.seconds, 15) * 1_000);
      await admin(emulator.origin, 'faults', { fault_rate: 0 });
      return;
    case 'postgres-outage':
      await services.postgres.stop();
      await sleep((10 + fault.seconds) * 1_000);
      await services.postgres.start();
      return;
    case 'minio-freeze': {
      const pid = services.minio.pid();
      process.kill(pid, 'SIGSTOP');
      await sleep((10 + fault.seconds) * 1_000);
      process.kill(pid, 'SIGCONT');
      return;
    }
    default:
      throw new Error(`no fault ${fault.kind}`);
  }
}

async function soakRun(index) {
  const draw = drawRun(index);
  console.log(`run ${index}: ${draw.distributed ? 'distributed' : 'local'}, faults ${draw.faults.map((fault) => `${fault.kind}@${fault.afterCalls} calls (${fault.seconds} s)`).join(', ')}`);
  const dir = mkdtempSync(join(OUT, `run-${index}-`));
  chmodSync(dir, 0o755);
  const run = { ...draw, index, dir, dataDir: join(dir, 'data'), taskQueue: `soak-${SEED}-${index}`, env: {} };
  mkdirSync(run.dataDir, { recursive: true });
  if (run.distributed) {
    // A store of its own per run: one PostgreSQL database holds one DuckLake catalog, so two
    // prefixes on one catalog would share a lake (whose files each resolves under its own prefix).
    await services?.stop();
    services = await startSharedServices(join(dir, 'services'));
    run.env = services.environment('harvests');
  }
  const yaml = `harvests:
  - name: soak-${index}
    budget: { credits: ${BUDGET} }
    concurrency: { targets: ${CONCURRENCY.targets}, calls: ${CONCURRENCY.calls} }
    channels:
${run.channels.map(([platform, handle, content]) => `      - { platform: ${platform}, handle: ${handle}, content: ${content}, max_items: ${ITEMS} }`).join('\n')}
    enrich: { stats: true }
`;
  const harvest = parseHarvestConfig(yaml, 'chaos-soak.yaml').harvests[0];
  const expected = await expectedItems(run);
  const ledgerBefore = (await ledgerOf(HARVEST_KEY)).length;
  const workers = Array.from({ length: run.distributed ? 2 : 1 }, () => startWorker(run));
  const workflowId = `soak-${SEED}-${index}-${Date.now()}`;
  const began = Date.now();
  let summary;
  let retried = false;
  try {
    await temporal.workflow.start('harvestWorkflow', { taskQueue: run.taskQueue, workflowId, args: [{ harvest, pageSize: PAGE_SIZE }] });
    const finished = resultOf(workflowId).then(
      (value) => ({ value }),
      (error) => ({ error }),
    );
    let done = false;
    void finished.then(() => (done = true));
    for (const fault of run.faults) {
      const reached = await Promise.race([
        waitFor(async () => (done || (await ledgerOf(HARVEST_KEY)).length - ledgerBefore >= fault.afterCalls ? true : undefined), RESULT_TIMEOUT_MS, `${fault.afterCalls} calls`, 100),
        finished,
      ]);
      if (done || reached !== true) break;
      fault.made = true;
      await makeFault(run, fault, workers);
    }
    const outcome = await finished;
    summary = outcome.value ?? outcome.error?.cause?.details?.[0];
    if (!summary) throw outcome.error;
    if (summary.status !== 'completed') {
      // As an operator would: retry it once, on the same workers.
      retried = true;
      const retry = await cli(['retry', workflowId, '--no-local-worker', '--json'], workerEnv(run, run.dataDir));
      if (retry.stdout.trim().startsWith('{')) summary = JSON.parse(retry.stdout);
      else summary = { ...summary, retryError: retry.stderr.trim().split('\n').pop() };
    }
  } finally {
    for (const worker of workers) {
      worker.kill('SIGCONT');
      worker.kill('SIGTERM');
    }
    await Promise.all(workers.map((worker) => Promise.race([worker.exited, sleep(40_000).then(() => worker.kill('SIGKILL'))])));
  }

  // The invariants.
  const readerEnv = { ...process.env, ...run.env };
  const saved = { ...process.env };
  Object.assign(process.env, readerEnv);
  const reader = run.distributed ? mkdtempSync(join(dir, 'reader-')) : run.dataDir;
  let rows;
  let apiCalls;
  try {
    rows = (await queryWarehouse(reader, 'SELECT platform, item_id FROM items')).rows.map((row) => `${row.platform}:${row.item_id}`);
    apiCalls = (await queryWarehouse(reader, 'SELECT request_id, credits FROM api_calls')).rows;
  } finally {
    process.env = saved;
  }
  const ledger = (await ledgerOf(HARVEST_KEY)).slice(ledgerBefore);
  const charged = ledger.reduce((sum, row) => sum + row.credits, 0);
  const landed = new Set(apiCalls.map((row) => String(row.request_id)));
  const landedCredits = apiCalls.reduce((sum, row) => sum + Number(row.credits), 0);
  const paidNotLanded = ledger.filter((row) => !landed.has(row.request_id)).length;
  const distinct = new Set(rows);
  const missing = [...expected].filter((id) => !distinct.has(id));
  const invented = [...distinct].filter((id) => !expected.has(id));
  const lost = summary.callsLost ?? 0;
  const reported = summary.creditsSpent;
  const faultsMade = run.faults.filter((fault) => fault.made);
  const inFlightFaults = faultsMade.filter((fault) => fault.kind !== 'api-5xx').length;
  const violations = [];
  if (rows.length !== distinct.size) violations.push(`items-once: ${rows.length - distinct.size} duplicate rows`);
  if (missing.length > 0) violations.push(`items-once: ${missing.length} expected items missing (${missing.slice(0, 3).join(', ')})`);
  if (invented.length > 0) violations.push(`no-invented: ${invented.length} items the targets do not have (${invented.slice(0, 3).join(', ')})`);
  if (reported < charged) violations.push(`credits: reported ${reported} < ledger ${charged}`);
  if (reported - charged > lost * DEAREST_CALL) violations.push(`credits: reported ${reported} - ledger ${charged} > ${lost} lost calls x ${DEAREST_CALL}`);
  if (landedCredits > charged) violations.push(`credits: api_calls ${landedCredits} > ledger ${charged}`);
  // Charged and not in api_calls: calls whose answers were lost (counted as lost), or answered twice, to a
  // frozen attempt and to the one that took its work over (both counted, one landing kept): never more
  // than the calls in flight at the faults.
  if (paidNotLanded > lost + inFlightFaults * IN_FLIGHT) violations.push(`credits: ${paidNotLanded} charged calls not in api_calls > ${lost} counted as lost + ${inFlightFaults} faults x ${IN_FLIGHT} in flight`);
  if (lost > inFlightFaults * IN_FLIGHT) violations.push(`re-paid: ${lost} calls lost > ${inFlightFaults} faults x ${IN_FLIGHT} in flight`);
  if (charged > BUDGET * (retried ? 2 : 1)) violations.push(`budget: ledger ${charged} > ${BUDGET * (retried ? 2 : 1)}`);
  const complete = missing.length === 0 && invented.length === 0 && rows.length === distinct.size;
  if ((summary.status === 'completed') !== complete) violations.push(`honest-status: ${summary.status} with ${complete ? 'every' : 'not every'} expected item`);
  return {
    index,
    mode: run.distributed ? 'distributed' : 'local',
    faults: faultsMade.map((fault) => `${fault.kind}@${fault.afterCalls}`).join('+') || '(run ended before its faults)',
    status: `${summary.status}${retried ? ' (after retry)' : ''}`,
    items: `${distinct.size}/${expected.size}`,
    credits: `ledger ${charged} reported ${reported} api_calls ${landedCredits} lost ${lost}`,
    seconds: Math.round((Date.now() - began) / 1_000),
    violations,
  };
}

// -------------------------------------------------------------------------------------------------

console.log(`chaos soak: seed ${SEED}, runs ${FROM}..${FROM + RUNS - 1}, ${ITEMS} items per target, distributed share ${DISTRIBUTED_SHARE}`);
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
