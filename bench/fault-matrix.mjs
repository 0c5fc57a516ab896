#!/usr/bin/env node
/**
 * The fault matrix of issue 11: one harvest (a TikTok channel, a TikTok keyword search and an
 * Instagram reels search, N items each, every item enriched with stats) run under one fault per
 * case, on a real Temporal dev server, a fresh emulator process and a fresh data directory per case,
 * through `harvester worker` child processes. Per case it prints:
 *
 *   - rows expected / landed: the distinct items the emulator's world has for the targets up to
 *     max_items (read with a separate verification key, before and after the run, so the harvest's
 *     ledger is untouched) against the distinct items in the warehouse; "lost" are expected items
 *     (in both readings) missing from the warehouse;
 *   - duplicates: count(*) - count(DISTINCT) on items, on item_metrics per request, and stats calls
 *     landed twice for one item (api_calls);
 *   - credits charged (the emulator's ledger for the harvest key) vs needed (the minimum: expected
 *     items x list price + distinct items x stats price), and the extra over what the landed items
 *     needed;
 *   - re-paid calls: ledger request ids the warehouse's api_calls does not have, against the run's
 *     own callsLost;
 *   - the run's reported status (of each phase: a run and its retry), whether it is honest (no
 *     target "done" and no run "completed" over a shortfall), and budget overrun (ledger > budgets).
 *
 * Each case states its expectations and prints PASS or FAIL with the reasons; the script exits 1
 * if any case fails.
 *
 *   npm run bench:faults                        (all cases, about 12 minutes on 2 cores)
 *   FAULT_CASE=cursor-expiry npm run bench:faults      (one case; a comma-separated list works)
 *   FAULT_ITEMS=450                             (items per target; the rate-limit case uses 2/9 of it)
 *
 * The Temporal dev server is the installed CLI (.tools/temporal server start-dev) run by this
 * script with a SQLite file, so the temporal-restart case can stop it and start it again on the
 * same port and file (@temporalio/testing's createLocal owns its server's lifetime and picks its
 * own database, so it is not used). The read-only case runs as root here: chmod does not stop
 * root, so it makes the data directory immutable with `chattr -R +i` (and `chattr -R -i` after),
 * which refuses writes to root as a read-only mount would; as another user it uses chmod -R a-w.
 */
import { execFileSync, spawn } from 'node:child_process';
import { createWriteStream, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client, Connection, WorkflowFailedError } from '@temporalio/client';
import { startEmulatorProcess } from './emulator-process.mjs';

const root = new URL('..', import.meta.url).pathname;
const dist = join(root, 'dist');
const CLI = join(dist, 'src', 'cli', 'main.js');
const { SocialApiClient } = await import(join(dist, 'src/api/client.js'));
const { loadPriceTable } = await import(join(dist, 'src/config/prices.js'));
const { parseHarvestConfig } = await import(join(dist, 'src/config/harvest-config.js'));
const { devServerArgs, TEMPORAL_BINARY } = await import(join(dist, 'src/temporal/dev-server.js'));
const { freePort, WORKER_NODE_FLAGS } = await import(join(dist, 'src/cli/stack.js'));
const { queryWarehouse } = await import(join(dist, 'src/warehouse/query.js'));
const { listLandings } = await import(join(dist, 'src/warehouse/landing.js'));

const HARVEST_KEY = 'sk_live_faults_harvest';
const VERIFY_KEY = 'sk_live_faults_verify';
const ITEMS = Number(process.env.FAULT_ITEMS ?? 450);
const BUDGET = 20_000;
const RESULT_TIMEOUT_MS = 300_000;
const prices = loadPriceTable();
const OUT = mkdtempSync(join(tmpdir(), 'fault-matrix-'));
const IS_ROOT = process.getuid?.() === 0;

/** Every process this script started, ended on exit; directories made immutable, made writable again. */
const started = new Set();
const immutable = new Set();
function cleanup() {
  for (const dir of immutable) makeWritable(dir);
  for (const child of started) {
    try {
      process.kill(child.detached ? -child.pid : child.pid, 'SIGKILL');
    } catch {
      /* already gone */
    }
  }
}
process.on('exit', cleanup);
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => process.exit(130));

function track(child, detached = false) {
  child.detached = detached;
  started.add(child);
  child.exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  void child.exited.then(() => started.delete(child));
  return child;
}

// ---------------------------------------------------------------------------------------------
// Temporal: the dev server on a fixed port and SQLite file, stoppable and restartable.

const temporalPort = await freePort();
const temporalAddress = `127.0.0.1:${temporalPort}`;
const temporalDb = join(OUT, 'temporal.sqlite');
let temporalServer;

async function startTemporal() {
  const log = createWriteStream(join(OUT, 'temporal.log'), { flags: 'a' });
  temporalServer = track(spawn(TEMPORAL_BINARY, devServerArgs({ port: temporalPort, dbFile: temporalDb }), { stdio: ['ignore', 'pipe', 'pipe'] }));
  temporalServer.stdout.pipe(log);
  temporalServer.stderr.pipe(log);
  const deadline = Date.now() + 60_000;
  for (;;) {
    try {
      const connection = await Connection.connect({ address: temporalAddress, connectTimeout: 1_000 });
      await connection.workflowService.getSystemInfo({});
      await connection.close();
      return;
    } catch (error) {
      if (Date.now() > deadline) throw new Error(`the Temporal dev server did not answer on ${temporalAddress} within 60 s: ${error.message}`);
      await sleep(250);
    }
  }
}

async function stopTemporal() {
  temporalServer.kill('SIGTERM');
  const stopped = await Promise.race([temporalServer.exited, sleep(15_000).then(() => undefined)]);
  if (!stopped) {
    temporalServer.kill('SIGKILL');
    await temporalServer.exited;
  }
}

await startTemporal();
const connection = await Connection.connect({ address: temporalAddress });
const temporal = new Client({ connection });

// ---------------------------------------------------------------------------------------------
// Helpers.

async function admin(origin, path, body) {
  const response = await fetch(`${origin}/_emulator/${path}`, body === undefined ? {} : { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const json = await response.json();
  if (!response.ok) throw new Error(`admin ${path}: ${response.status} ${JSON.stringify(json)}`);
  return json.data;
}

async function waitFor(check, timeoutMs, what, everyMs = 100) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs / 1000} s waiting for ${what}`);
    await sleep(everyMs);
  }
}

/** The harvest of every case: N items of a channel, a keyword search and a reels search, each item's stats. */
function harvestOf(items, budget) {
  const yaml = `harvests:
  - name: faults
    budget: { credits: ${budget} }
    channels:
      - { platform: tiktok, handle: happy_otter0, content: videos, max_items: ${items} }
    searches:
      - { platform: tiktok, query: sourdough, max_results: ${items} }
      - { platform: instagram, query: "street food", max_results: ${items} }
    enrich: { stats: true }
`;
  return parseHarvestConfig(yaml, 'fault-matrix.yaml').harvests[0];
}

/** What the targets list, for the verification key: [targetKey, platform, endpoint, params]. */
const TARGETS = [
  ['channel:tiktok:happy_otter0:videos', 'tiktok', 'channel-videos', { handle: 'happy_otter0' }],
  ['search:tiktok:keyword:sourdough', 'tiktok', 'search', { query: 'sourdough' }],
  ['search:instagram:keyword:street food', 'instagram', 'reels-search', { query: 'street food' }],
];

/** The world's items of each target up to `items`, read with the verification key, faults and latency off. */
async function expectedItems(emulator, items, restore) {
  await admin(emulator.origin, 'faults', { fault_rate: 0, latency_ms: 0 });
  const client = new SocialApiClient({ baseUrl: emulator.baseUrl, apiKey: VERIFY_KEY, prices });
  try {
    const expected = {};
    for (const [key, platform, endpoint, params] of TARGETS) {
      expected[key] = [];
      for await (const page of client.pages(platform, endpoint, params, { maxItems: items })) expected[key].push(...page.items.map((item) => `${platform}:${item.id}`));
    }
    return expected;
  } finally {
    await client.close();
    if (restore) await admin(emulator.origin, 'faults', restore);
  }
}

/** Waits for a run's result, across a Temporal outage (connection errors are retried until the deadline). */
async function resultOf(workflowId, timeoutMs = RESULT_TIMEOUT_MS) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const remaining = deadline - Date.now();
      if (remaining <= 0) throw new Error(`no result for ${workflowId} within ${timeoutMs / 1000} s`);
      return await Promise.race([
        temporal.workflow.getHandle(workflowId).result(),
        sleep(remaining).then(() => {
          throw new Error(`no result for ${workflowId} within ${timeoutMs / 1000} s`);
        }),
      ]);
    } catch (error) {
      if (error instanceof WorkflowFailedError || /no result for/.test(error.message) || Date.now() > deadline) throw error;
      await sleep(1_000);
    }
  }
}

/** The worker's load process(es) (src/warehouse/load-process.ts, forked by the worker): its children running load-process.js. */
function loadProcessPids(workerPid) {
  const pids = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8');
      const parent = Number(readFileSync(`/proc/${entry}/stat`, 'utf8').split(') ')[1].split(' ')[1]);
      if (cmdline.includes('load-process.js') && parent === workerPid) pids.push(Number(entry));
    } catch {
      /* gone */
    }
  }
  return pids;
}

function makeReadOnly(dir) {
  immutable.add(dir);
  if (IS_ROOT) execFileSync('chattr', ['-R', '+i', dir]);
  else execFileSync('chmod', ['-R', 'a-w', dir]);
}

function makeWritable(dir) {
  try {
    if (IS_ROOT) execFileSync('chattr', ['-R', '-i', dir]);
    else execFileSync('chmod', ['-R', 'u+w', dir]);
  } finally {
    immutable.delete(dir);
  }
}

// ---------------------------------------------------------------------------------------------
// One case: a fresh emulator and data directory, workers, the fault, the figures, the verdict.

class CaseContext {
  constructor(name, emulator, items) {
    this.name = name;
    this.emulator = emulator;
    this.items = items;
    this.dir = join(OUT, name);
    this.dataDir = join(this.dir, 'data');
    mkdirSync(this.dataDir, { recursive: true });
    this.taskQueue = `faults-${name}-${Date.now()}`;
    this.workers = [];
    this.workerCount = 0;
    this.notes = [];
    this.phases = [];
    this.budgets = [];
    this.started = Date.now();
  }

  env() {
    return {
      ...process.env,
      TEMPORAL_ADDRESS: temporalAddress,
      HARVESTER_TASK_QUEUE: this.taskQueue,
      HARVESTER_DATA_DIR: this.dataDir,
      SOCIAL_API_BASE_URL: this.emulator.baseUrl,
      SOCIAL_API_KEY: HARVEST_KEY,
      LOG_LEVEL: 'info',
    };
  }

  note(text) {
    const line = `[${((Date.now() - this.started) / 1000).toFixed(1)} s] ${text}`;
    this.notes.push(line);
    console.log(`  ${this.name}: ${line}`);
  }

  /** A `harvester worker` in its own process group (so a kill takes its load child too); resolves once it polls. */
  async startWorker() {
    const number = ++this.workerCount;
    const log = createWriteStream(join(this.dir, `worker-${number}.log`));
    const child = track(spawn(process.execPath, [...WORKER_NODE_FLAGS, CLI, 'worker'], { cwd: root, env: this.env(), detached: true, stdio: ['ignore', 'pipe', 'pipe'] }), true);
    child.number = number;
    let text = '';
    child.stdout.pipe(log);
    child.stderr.on('data', (chunk) => {
      log.write(chunk);
      if (text.length < 10_000) text += chunk;
    });
    this.workers.push(child);
    await Promise.race([
      waitFor(() => /worker: polling/.test(text), 30_000, `worker ${number} to poll`, 50),
      child.exited.then(({ code, signal }) => {
        throw new Error(`worker ${number} exited at start (code ${code}, signal ${signal}): ${text.trim().split('\n').at(-1)}`);
      }),
    ]);
    return child;
  }

  /** SIGKILL a worker's process group: the worker and any load process it started. */
  async killWorker(child, why) {
    const loaders = loadProcessPids(child.pid);
    process.kill(-child.pid, 'SIGKILL');
    const { signal } = await child.exited;
    this.workers = this.workers.filter((worker) => worker !== child);
    this.note(`SIGKILLed worker ${child.number} (${signal}) ${why}; ${this.landings()} landings${loaders.length ? `; its load process(es) ${loaders.join(',')} killed with it` : ''}`);
  }

  async stopWorkers() {
    for (const child of this.workers) {
      child.kill('SIGTERM');
      const stopped = await Promise.race([child.exited, sleep(10_000).then(() => undefined)]);
      if (!stopped) process.kill(-child.pid, 'SIGKILL');
    }
    this.workers = [];
  }

  landings() {
    try {
      return listLandings(this.dataDir).length;
    } catch {
      return -1;
    }
  }

  waitLandings(count, timeoutMs = 120_000) {
    return waitFor(() => this.landings() >= count, timeoutMs, `${count} landings`, 200);
  }

  /** Starts the run (through the Temporal client); the workers run it. */
  async startRun(budget) {
    this.runId = `faults-${this.name}-${Date.now()}`;
    this.budgets.push(budget);
    await temporal.workflow.start('harvestWorkflow', { taskQueue: this.taskQueue, workflowId: this.runId, args: [{ harvest: harvestOf(this.items, budget), budgetCredits: budget }] });
    this.note(`started run ${this.runId} with budget ${budget}`);
    return this.runId;
  }

  async runResult(label) {
    let summary;
    try {
      summary = await resultOf(this.runId);
    } catch (error) {
      if (!(error instanceof WorkflowFailedError)) throw error;
      // No summary and no checkpoint: the workflow itself failed.
      const reason = `${error.cause?.message ?? error.message}${error.cause?.cause ? `: ${error.cause.cause.message}` : ''}`;
      this.phases.push({ label, status: 'workflow failed', reason });
      this.note(`${label}: the workflow failed (${reason}); no summary, no checkpoint`);
      return undefined;
    }
    this.phases.push({ label, status: summary.status, reason: summary.reason });
    this.summary = summary;
    this.note(`${label}: ${summary.status}${summary.reason ? ` (${summary.reason})` : ''}; items ${summary.itemsLanded}, credits ${summary.creditsSpent} of ${summary.budget}, callsLost ${summary.callsLost}; enrichment ${summary.enrichment.calls} calls, ${summary.enrichment.skipped} skipped, ${summary.enrichment.failed} failed; targets ${summary.targets.map((t) => `${t.status} ${t.items}/${t.wanted}`).join(', ')}`);
    return summary;
  }

  /** `harvester retry <run> --budget N --no-local-worker --json`, on the running workers. */
  async retry(extra) {
    this.budgets.push(extra);
    const child = track(spawn(process.execPath, [CLI, 'retry', this.runId, '--budget', String(extra), '--no-local-worker', '--json'], { cwd: root, env: { ...this.env(), LOG_LEVEL: 'warn' }, stdio: ['ignore', 'pipe', 'pipe'] }));
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    const exited = await Promise.race([child.exited, sleep(RESULT_TIMEOUT_MS).then(() => undefined)]);
    if (!exited) {
      child.kill('SIGKILL');
      throw new Error(`harvester retry gave no answer within ${RESULT_TIMEOUT_MS / 1000} s`);
    }
    const start = stdout.indexOf('{');
    if (start < 0) {
      const reason = stderr.trim().split('\n').at(-1);
      this.phases.push({ label: 'retry', status: 'refused', reason, exit: exited.code });
      this.note(`harvester retry --budget ${extra} exited ${exited.code} without a summary: ${reason}`);
      return undefined;
    }
    const summary = JSON.parse(stdout.slice(start));
    this.phases.push({ label: 'retry', status: summary.status, reason: summary.reason, exit: exited.code });
    this.summary = summary;
    this.note(`harvester retry --budget ${extra} (exit ${exited.code}): ${summary.status}${summary.reason ? ` (${summary.reason})` : ''}; items ${summary.itemsLanded}, credits ${summary.creditsSpent} of ${summary.budget}, callsLost ${summary.callsLost}; enrichment ${summary.enrichment.calls} calls, ${summary.enrichment.skipped} skipped, ${summary.enrichment.failed} failed; targets ${summary.targets.map((t) => `${t.status} ${t.items}/${t.wanted}`).join(', ')}`);
    return summary;
  }
}

/** `harvester load`: what an operator can do with landings a failed run left unloaded. */
CaseContext.prototype.load = async function load() {
  const child = track(spawn(process.execPath, [CLI, 'load'], { cwd: root, env: { ...this.env(), LOG_LEVEL: 'warn' }, stdio: ['ignore', 'pipe', 'pipe'] }));
  let output = '';
  child.stdout.on('data', (chunk) => (output += chunk));
  child.stderr.on('data', (chunk) => (output += chunk));
  const { code } = await child.exited;
  this.phases.push({ label: 'harvester load', status: code === 0 ? 'loaded' : `exit ${code}`, reason: output.trim().split('\n').at(-1) });
  this.note(`harvester load (exit ${code}): ${output.trim().split('\n').at(-1)}`);
};

/** The figures of a case, from the emulator's ledger, the verification readings and the warehouse. */
async function figuresOf(ctx, expectedStart, expectedEnd) {
  const warehouse = existsSync(join(ctx.dataDir, 'warehouse.duckdb'));
  const q = async (sql) => (warehouse ? (await queryWarehouse(ctx.dataDir, sql)).rows : []);
  const items = await q(`SELECT platform || ':' || item_id AS id FROM items`);
  const [itemCounts] = await q('SELECT count(*) AS n, count(DISTINCT (platform, item_id)) AS d FROM items');
  const [metricCounts] = await q('SELECT count(*) AS n, count(DISTINCT (platform, item_id, request_id)) AS d FROM item_metrics');
  const [statsCounts] = await q(`SELECT count(*) AS n, count(DISTINCT CAST(params AS VARCHAR)) AS d FROM api_calls WHERE endpoint LIKE '%/stats'`);
  const statsUrls = new Set((await q(`SELECT DISTINCT json_extract_string(params, '$.url') AS url FROM api_calls WHERE endpoint LIKE '%/stats'`)).map((row) => row.url));
  const urls = await q(`SELECT platform || ':' || item_id AS id, url FROM items`);
  const calls = new Set((await q('SELECT request_id FROM api_calls')).map((row) => row.request_id));
  const ledger = await admin(ctx.emulator.origin, `ledger?api_key=${HARVEST_KEY}`);
  const landed = new Set(items.map((row) => row.id));
  const charged = ledger.reduce((sum, row) => sum + row.credits, 0);
  const repaid = ledger.filter((row) => !calls.has(row.request_id));
  const perTarget = TARGETS.map(([key, platform, endpoint]) => {
    const start = new Set(expectedStart[key]);
    const end = new Set(expectedEnd[key]);
    const either = new Set([...start, ...end]);
    const got = [...either].filter((id) => landed.has(id));
    const lost = [...start].filter((id) => end.has(id) && !landed.has(id));
    return { key, platform, endpoint, expected: start.size, landed: got.length, lost: lost.length, drift: [...end].filter((id) => !start.has(id)).length, gotIds: got };
  });
  const statsPrice = (id) => prices[`${id.split(':')[0]}/stats`];
  const neededFor = (lists) => {
    const distinct = new Set(lists.flatMap((target) => target.ids));
    return lists.reduce((sum, target) => sum + target.ids.length * prices[`${target.platform}/${target.endpoint}`], 0) + [...distinct].reduce((sum, id) => sum + statsPrice(id), 0);
  };
  const needed = neededFor(perTarget.map((target) => ({ ...target, ids: expectedStart[target.key] })));
  const neededLanded = neededFor(perTarget.map((target) => ({ ...target, ids: target.gotIds })));
  const expected = new Set(Object.values(expectedStart).flat()).size;
  const inExpected = [...landed].filter((id) => perTarget.some((target) => target.gotIds.includes(id))).length;
  return {
    warehouse,
    expected,
    landed: landed.size,
    landedExpected: inExpected,
    lost: perTarget.reduce((sum, target) => sum + target.lost, 0),
    drift: perTarget.reduce((sum, target) => sum + target.drift, 0),
    perTarget,
    dupItems: Number(itemCounts?.n ?? 0) - Number(itemCounts?.d ?? 0),
    dupMetrics: Number(metricCounts?.n ?? 0) - Number(metricCounts?.d ?? 0),
    statsTwice: Number(statsCounts?.n ?? 0) - Number(statsCounts?.d ?? 0),
    /** Expected items that landed with a stats call of their own. */
    statsLanded: urls.filter((row) => statsUrls.has(row.url) && perTarget.some((target) => target.gotIds.includes(row.id))).length,
    charged,
    needed,
    neededLanded,
    extra: charged - neededLanded,
    repaidCalls: repaid.length,
    repaidCredits: repaid.reduce((sum, row) => sum + row.credits, 0),
    repaidEndpoints: [...new Set(repaid.map((row) => row.endpoint))],
    ledgerCalls: ledger.length,
    budget: ctx.budgets.reduce((sum, credits) => sum + credits, 0),
  };
}

/**
 * The checks of every case: nothing duplicated, the budget held, every credit the API charged is
 * in the run's figures, calls paid twice are at most the calls the run says a crash lost, no
 * target "done" and no run "completed" over a shortfall; and, unless the case expects a
 * shortfall, every expected row landed and the run (or its retry) completed.
 */
function verdictOf(ctx, figures, expect) {
  const failures = [];
  const summary = ctx.summary;
  for (const phase of ctx.phases) {
    if (phase.status === 'workflow failed') failures.push(`the ${phase.label} failed as a workflow, with no summary and no checkpoint (${phase.reason})`);
    if (phase.status === 'refused') failures.push(`harvester retry refused: ${phase.reason}`);
  }
  if (!figures.warehouse) failures.push('no warehouse was published');
  if (figures.dupItems) failures.push(`${figures.dupItems} duplicate rows in items`);
  if (figures.dupMetrics) failures.push(`${figures.dupMetrics} duplicate (item, request) rows in item_metrics`);
  if (figures.statsTwice) failures.push(`${figures.statsTwice} stats calls landed twice for one item`);
  if (figures.charged > figures.budget) failures.push(`budget overrun: the ledger charged ${figures.charged} > budget ${figures.budget}`);
  if (summary && figures.charged > summary.creditsSpent) failures.push(`the ledger charged ${figures.charged} but the run's figures say ${summary.creditsSpent} spent`);
  if (summary && figures.repaidCalls > summary.callsLost) failures.push(`${figures.repaidCalls} calls charged and not in api_calls (${figures.repaidCredits} credits, ${figures.repaidEndpoints.join(', ')}) but the run counts ${summary.callsLost} lost`);
  const dishonest = [];
  for (const target of figures.perTarget) {
    const reported = summary?.targets.find((t) => t.key === target.key);
    if (reported?.status === 'done' && (target.lost > 0 || target.landed < target.expected)) dishonest.push(`${target.key} "done" with ${target.landed} of ${target.expected}`);
  }
  if (summary?.status === 'completed' && figures.lost > 0) dishonest.push(`run "completed" with ${figures.lost} rows lost`);
  if (summary?.status === 'completed' && figures.statsLanded < figures.landedExpected) dishonest.push(`run "completed" with ${figures.landedExpected - figures.statsLanded} items lacking their stats`);
  if (dishonest.length) failures.push(`dishonest status: ${dishonest.join('; ')}`);
  const honest = dishonest.length === 0;
  if (expect.shortfall) {
    if (summary?.status === 'completed') failures.push('expected a reported shortfall, the run says completed');
  } else {
    if (figures.lost > 0) failures.push(`${figures.lost} expected rows lost (landed ${figures.landedExpected} of ${figures.expected})`);
    if (figures.statsLanded < figures.landedExpected) failures.push(`${figures.landedExpected - figures.statsLanded} landed items without their stats call`);
    if (summary?.status !== 'completed') failures.push(`final status ${summary?.status ?? 'none'}, expected completed`);
  }
  for (const [index, status] of (expect.phases ?? []).entries()) {
    const phase = ctx.phases[index];
    if (phase && status && !(Array.isArray(status) ? status : [status]).includes(phase.status)) failures.push(`${phase.label} ended ${phase.status}, expected ${status}`);
  }
  if (expect.noRepaid && figures.repaidCalls > 0) failures.push(`${figures.repaidCalls} calls paid and never landed (${figures.repaidCredits} credits), expected none`);
  if (expect.exactCredits && figures.extra > 0) failures.push(`charged ${figures.charged}, the landed items need ${figures.neededLanded}: ${figures.extra} credits bought twice`);
  if (expect.exactCredits && figures.extra < 0) failures.push(`charged ${figures.charged}, the landed items need ${figures.neededLanded}: ${-figures.extra} credits of their enrichment never bought`);
  return { failures, honest };
}

// ---------------------------------------------------------------------------------------------
// The cases.

const fastEmulator = ['--rate-limit', '1000'];

const CASES = [
  {
    name: 'worker-kill-x3',
    describe: 'worker SIGKILLed 3 times mid-run (latency 150 ms), a new worker each time',
    expect: 'all rows, completed, re-paid <= callsLost',
    emulator: [...fastEmulator, '--latency-ms', '150'],
    faults: { latency_ms: 150 },
    async drive(ctx) {
      let worker = await ctx.startWorker();
      await ctx.startRun(BUDGET);
      for (const landings of [150, 500, 900]) {
        await ctx.waitLandings(landings);
        await ctx.killWorker(worker, `at >= ${landings} landings`);
        worker = await ctx.startWorker();
      }
      await ctx.runResult('run');
    },
  },
  {
    name: 'temporal-restart',
    describe: 'Temporal dev server stopped mid-run and started again on the same port and SQLite file (latency 150 ms)',
    expect: 'all rows, completed, re-paid <= callsLost',
    emulator: [...fastEmulator, '--latency-ms', '150'],
    faults: { latency_ms: 150 },
    async drive(ctx) {
      await ctx.startWorker();
      await ctx.startRun(BUDGET);
      await ctx.waitLandings(400);
      ctx.note(`stopping the Temporal dev server (SIGTERM) at ${ctx.landings()} landings`);
      await stopTemporal();
      await sleep(5_000);
      ctx.note(`starting it again on ${temporalAddress} with ${temporalDb} (${ctx.landings()} landings by now: the worker went on while it was down)`);
      await startTemporal();
      ctx.note('Temporal answers again');
      await ctx.runResult('run');
    },
  },
  {
    name: 'fault-rate',
    describe: 'emulator --fault-rate 0.3 (500/502/503 on 30 % of requests)',
    expect: 'all rows, completed, no call paid twice',
    emulator: [...fastEmulator, '--fault-rate', '0.3'],
    faults: { fault_rate: 0.3 },
    noRepaid: true,
    async drive(ctx) {
      await ctx.startWorker();
      await ctx.startRun(BUDGET);
      await ctx.runResult('run');
    },
  },
  {
    name: 'rate-limit',
    describe: `emulator --rate-limit 5 (requests per second), ${Math.max(1, Math.round(ITEMS / 4.5))} items per target`,
    expect: 'all rows, completed, no call paid twice',
    emulator: ['--rate-limit', '5'],
    items: Math.max(1, Math.round(ITEMS / 4.5)),
    noRepaid: true,
    async drive(ctx) {
      await ctx.startWorker();
      await ctx.startRun(BUDGET);
      await ctx.runResult('run');
    },
  },
  {
    name: 'cursor-expiry',
    describe: 'emulator --cursor-ttl 2 --latency-ms 2500: every cursor expires before the next page',
    expect: 'a shortfall, reported (targets failed, run not completed); no duplicates; budget held',
    emulator: [...fastEmulator, '--cursor-ttl', '2', '--latency-ms', '2500'],
    faults: { latency_ms: 2500 },
    shortfall: true,
    noRepaid: true,
    async drive(ctx) {
      await ctx.startWorker();
      await ctx.startRun(BUDGET);
      await ctx.runResult('run');
    },
  },
  {
    name: 'cursor-expiry-kill',
    describe: 'emulator --cursor-ttl 20 --latency-ms 300, one worker SIGKILL and a new worker 22 s later (the cursor has expired)',
    expect: 'all rows, completed, re-paid <= callsLost',
    emulator: [...fastEmulator, '--cursor-ttl', '20', '--latency-ms', '300'],
    faults: { latency_ms: 300 },
    async drive(ctx) {
      const worker = await ctx.startWorker();
      await ctx.startRun(BUDGET);
      await ctx.waitLandings(300);
      await ctx.killWorker(worker, 'at >= 300 landings');
      await sleep(22_000);
      await ctx.startWorker();
      ctx.note('new worker polling');
      await ctx.runResult('run');
    },
  },
  {
    name: 'loader-kill',
    describe: "worker (and its load process) SIGKILLed during the final load (the loader's .loader/ folder, made when a data dir's first load starts, seen), a new worker at once",
    expect: 'all rows, completed, loaded once',
    emulator: fastEmulator,
    noRepaid: true,
    async drive(ctx) {
      const worker = await ctx.startWorker();
      await ctx.startRun(BUDGET);
      // The load process is started (warm) when the run begins; the load itself starts with .loader/.
      await waitFor(() => existsSync(join(ctx.dataDir, '.loader')) || undefined, 180_000, 'the final load to start', 10);
      const loaders = loadProcessPids(worker.pid);
      ctx.note(`load process ${loaders.join(',')} running`);
      await ctx.killWorker(worker, 'during the final load');
      await sleep(500);
      const survivors = loaders.filter((pid) => {
        try {
          return !/\) [ZX] /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
        } catch {
          return false;
        }
      });
      if (survivors.length) ctx.note(`load process(es) ${survivors.join(',')} still alive after the kill`);
      await ctx.startWorker();
      await ctx.runResult('run');
    },
  },
  {
    name: 'read-only-data-dir',
    describe: `data dir made read-only for 60 s mid-run (${IS_ROOT ? 'as root: chattr -R +i, then -i' : 'chmod -R a-w, then u+w'}); a retry if the run did not complete`,
    expect: 'all rows after the retry, completed, re-paid <= callsLost, budgets held',
    emulator: [...fastEmulator, '--latency-ms', '100'],
    faults: { latency_ms: 100 },
    async drive(ctx) {
      await ctx.startWorker();
      await ctx.startRun(BUDGET);
      await ctx.waitLandings(300);
      makeReadOnly(ctx.dataDir);
      ctx.note(`data dir read-only at ${ctx.landings()} landings`);
      const during = resultOf(ctx.runId).then(
        (summary) => ({ summary }),
        (error) => ({ error }),
      );
      const early = await Promise.race([during, sleep(60_000).then(() => undefined)]);
      if (early) ctx.note(`the run ended while the data dir was read-only: ${early.summary?.status ?? early.error.message}${early.summary?.reason ? ` (${early.summary.reason})` : ''}`);
      makeWritable(ctx.dataDir);
      ctx.note(`data dir writable again, ${ctx.landings()} landings`);
      const first = await ctx.runResult('run');
      if (first?.status === 'completed') return;
      const retried = await ctx.retry(BUDGET);
      // A run that left no checkpoint cannot be retried: load what it landed, as an operator would.
      if (!retried) await ctx.load();
    },
  },
  {
    name: 'budget-retry',
    describe: 'budget 3000 (of about 7650 needed): budget_exhausted, then harvester retry --budget 6000',
    expect: 'run budget_exhausted, retry completed, all rows, nothing bought twice (charged = needed), charged <= 3000 + 6000',
    emulator: fastEmulator,
    phases: ['budget_exhausted', 'completed'],
    noRepaid: true,
    exactCredits: true,
    async drive(ctx) {
      await ctx.startWorker();
      await ctx.startRun(3_000);
      const first = await ctx.runResult('run');
      if (!first) return;
      const ledger = await admin(ctx.emulator.origin, `ledger?api_key=${HARVEST_KEY}`);
      const charged = ledger.reduce((sum, row) => sum + row.credits, 0);
      ctx.note(`after the first run the ledger says ${charged} credits${charged > 3000 ? ' (over its budget of 3000)' : ''}`);
      if (charged > 3000) ctx.firstOverrun = charged;
      if (first.status !== 'completed') await ctx.retry(6_000);
    },
  },
  {
    name: '402-plan-change',
    describe: 'the key holds 3000 credits (POST /_emulator/plan): the run pauses on 402; the plan changes to 100000 credits; harvester retry',
    expect: 'run paused, retry completed, all rows, nothing bought twice (charged = needed)',
    emulator: fastEmulator,
    phases: ['paused', 'completed'],
    noRepaid: true,
    exactCredits: true,
    async drive(ctx) {
      await admin(ctx.emulator.origin, 'plan', { api_key: HARVEST_KEY, plan: 'starter', credits: 3_000 });
      await ctx.startWorker();
      await ctx.startRun(BUDGET);
      const first = await ctx.runResult('run');
      if (!first) return;
      await admin(ctx.emulator.origin, 'plan', { api_key: HARVEST_KEY, plan: 'pro', credits: 100_000 });
      ctx.note('plan changed: pro, 100000 credits');
      if (first.status !== 'completed') await ctx.retry(BUDGET);
    },
  },
];

async function runCase(def) {
  const items = def.items ?? ITEMS;
  console.log(`\n== ${def.name}: ${def.describe}\n   expected: ${def.expect}`);
  const emulator = await startEmulatorProcess(['--seed', '42', '--credits', '100000000', '--api-key', HARVEST_KEY, '--api-key', VERIFY_KEY, ...def.emulator]);
  track(emulator.child);
  const ctx = new CaseContext(def.name, { ...emulator }, items);
  const restore = { fault_rate: def.faults?.fault_rate ?? 0, latency_ms: def.faults?.latency_ms ?? 0 };
  const row = { name: def.name, items };
  try {
    const expectedStart = await expectedItems(ctx.emulator, items, restore);
    let driveError;
    try {
      await def.drive(ctx);
    } catch (error) {
      driveError = error;
      ctx.note(`ERROR: ${error.message}`);
      if (ctx.runId) await temporal.workflow.getHandle(ctx.runId).terminate('fault matrix: case failed').catch(() => undefined);
    }
    await ctx.stopWorkers();
    const expectedEnd = await expectedItems(ctx.emulator, items);
    const figures = await figuresOf(ctx, expectedStart, expectedEnd);
    const { failures, honest } = verdictOf(ctx, figures, def);
    if (driveError) failures.unshift(`the case did not finish: ${driveError.message}`);
    if (ctx.firstOverrun) failures.push(`the first run charged ${ctx.firstOverrun} over its budget of ${ctx.budgets[0]}`);
    Object.assign(row, { figures, failures, honest, phases: ctx.phases, summary: ctx.summary, seconds: (Date.now() - ctx.started) / 1000 });
  } catch (error) {
    Object.assign(row, { failures: [`the case could not be measured: ${error.stack ?? error.message}`], phases: ctx.phases, seconds: (Date.now() - ctx.started) / 1000 });
  } finally {
    await ctx.stopWorkers();
    emulator.child.kill('SIGTERM');
    await emulator.child.exited;
  }
  printCase(row);
  return row;
}

function printCase(row) {
  const f = row.figures;
  if (f) {
    console.log(`   phases: ${row.phases.map((phase) => `${phase.label} ${phase.status}${phase.reason ? ` (${phase.reason})` : ''}`).join(' -> ')}`);
    console.log(`   rows expected/landed: ${f.expected}/${f.landedExpected} (lost ${f.lost}${f.drift ? `, world drift ${f.drift}` : ''}; warehouse items ${f.landed}); per target: ${f.perTarget.map((t) => `${t.key} ${t.landed}/${t.expected} (${row.summary?.targets.find((x) => x.key === t.key)?.status ?? '?'})`).join('; ')}`);
    console.log(`   duplicates: items ${f.dupItems}, item_metrics per request ${f.dupMetrics}, stats landed twice ${f.statsTwice}; items with their stats call ${f.statsLanded} of ${f.landedExpected} landed`);
    console.log(`   credits charged ${f.charged} vs needed ${f.needed} (landed items need ${f.neededLanded}; extra ${f.extra}); run's figures ${row.summary?.creditsSpent ?? '?'}; budget ${f.budget}, overrun ${Math.max(0, f.charged - f.budget)}`);
    console.log(`   re-paid calls ${f.repaidCalls} (${f.repaidCredits} credits${f.repaidEndpoints.length ? `, ${f.repaidEndpoints.join(', ')}` : ''}); run's callsLost ${row.summary?.callsLost ?? '?'}; ledger calls ${f.ledgerCalls}`);
  }
  console.log(`   ${row.failures.length ? 'FAIL' : 'PASS'} (${row.seconds.toFixed(0)} s)${row.failures.length ? `: ${row.failures.join('; ')}` : ''}`);
}

const wanted = process.env.FAULT_CASE ? process.env.FAULT_CASE.split(',').map((name) => name.trim()) : CASES.map((c) => c.name);
const unknown = wanted.filter((name) => !CASES.some((c) => c.name === name));
if (unknown.length) {
  console.error(`unknown FAULT_CASE ${unknown.join(', ')}; cases: ${CASES.map((c) => c.name).join(', ')}`);
  process.exit(1);
}
console.log(`fault matrix: ${wanted.length} case(s), ${ITEMS} items per target (3 targets, stats on every item); Temporal dev server ${temporalAddress} (${temporalDb}); logs in ${OUT}`);
const began = Date.now();
const rows = [];
for (const def of CASES.filter((c) => wanted.includes(c.name))) rows.push(await runCase(def));
await connection.close();
await stopTemporal();

console.log(`\n| case | phases (final status) | honest | rows expected / landed (lost) | dup items / metrics / stats | items with stats | credits charged / needed (extra) | re-paid calls (credits) / callsLost | budget (overrun) | result |`);
console.log('|---|---|---|---|---|---|---|---|---|---|');
for (const row of rows) {
  const f = row.figures;
  const phases = row.phases.map((phase) => phase.status).join(' → ') || '—';
  if (!f) {
    console.log(`| ${row.name} | ${phases} | ? | ? | ? | ? | ? | ? | ? | FAIL |`);
    continue;
  }
  console.log(
    `| ${row.name} | ${phases} | ${row.honest ? 'yes' : 'no'} | ${f.expected} / ${f.landedExpected} (${f.lost}) | ${f.dupItems} / ${f.dupMetrics} / ${f.statsTwice} | ${f.statsLanded} | ${f.charged} / ${f.needed} (${f.extra >= 0 ? '+' : ''}${f.extra}) | ${f.repaidCalls} (${f.repaidCredits}) / ${row.summary?.callsLost ?? '?'} | ${f.budget} (${Math.max(0, f.charged - f.budget)}) | ${row.failures.length ? 'FAIL' : 'PASS'} |`,
  );
}
const failed = rows.filter((row) => row.failures.length);
console.log(`\n${rows.length - failed.length} of ${rows.length} cases passed in ${((Date.now() - began) / 1000).toFixed(0)} s; logs in ${OUT}`);
for (const row of failed) console.log(`FAIL ${row.name}: ${row.failures.join('; ')}`);
// Exit now: the result deadlines' timers of Promise.race would otherwise hold the process for minutes.
process.exit(failed.length ? 1 : 0);
