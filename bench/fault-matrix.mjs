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
 *     target "done" and no run "completed" over a shortfall), and budget overrun (ledger > budgets);
 *   - invented rows: warehouse items whose id the emulator's world does not have (an empty id, or
 *     one no target listed that the world does not resolve, asked with the verification key);
 *   - ledger / reported / api_calls + lost: the ledger against the run's creditsSpent and against
 *     the credits of the warehouse's api_calls rows plus what the run's journals count as lost
 *     (attempts charged and never landed: cut, timed out, refused), read from data/journal/ and, for
 *     runs over and loaded, from the lake's call_journal.
 *
 * The case of issue "Past one machine", shared-storage-kills: three workers, each with a scratch
 * directory of its own, share a store of PostgreSQL and MinIO (src/cli/shared-services.ts; MinIO
 * from `npm run setup -- --for-distributed`), and are SIGKILLed in turn, each replaced by a new
 * machine; the figures read the shared lake and the run's journals in the catalog.
 *
 * Cases of issue "Trust nothing from outside" (exact accounting: ledger = reported = api_calls +
 * journaled lost):
 *   - proxy-*: the workers' SOCIAL_API_BASE_URL points at src/emulator/corrupting-proxy.ts (in this
 *     process, on 127.0.0.1), which forwards every call to the emulator, so the emulator serves and
 *     charges each one, and spoils chosen content answers on their way back, by count: bodies cut
 *     mid-way, headers held past the harvest's call_deadline_seconds (5), bodies dripped at 20 B/s,
 *     list pages with more items than their limit, items with empty ids, stats about another item
 *     (and one `harvester call … channel-stats` probe answered about another account). A run that
 *     does not complete is retried once with the proxy passing every answer through.
 *   - disk-full: the data dir is a 4 MiB tmpfs (FAULT_DISK_KIB) mounted in a private mount
 *     namespace (`unshare --mount --propagation private`; the host's mounts are untouched): a
 *     holder process keeps the namespace, the workers and CLI commands enter it with `nsenter -m`,
 *     and this script reads the files through /proc/<holder>/root (and queries a copy of the
 *     warehouse: DuckDB resolves that path to the host's). The run fills it; the tmpfs is then
 *     remounted at 256 MiB ("space freed") and `harvester retry` runs once.
 *   - query-10m: `harvester query "SELECT * FROM range(10000000)" --format csv` to /dev/null with
 *     --max-rows 0 --timeout 0 (exit 0, peak RSS from /proc/<pid>/status VmHWM under 500 MiB), and
 *     with the default limits (exit 4 after 100000 rows, stderr naming --max-rows). FAULT_QUERY_ROWS.
 *
 * Each case states its expectations and prints PASS or FAIL with the reasons; the script exits 1
 * if any case fails.
 *
 *   npm run bench:faults                        (all cases, about 12 minutes on 2 cores; the eight of
 *                                               "Trust nothing from outside" about 2 of them)
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
import { appendFileSync, chmodSync, closeSync, cpSync, createWriteStream, existsSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, statfsSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client, Connection, WorkflowFailedError } from '@temporalio/client';
import { startEmulatorProcess } from './emulator-process.mjs';
import { mountPrivateTmpfs, waitFor as waitUntil } from './private-tmpfs.mjs';

const root = new URL('..', import.meta.url).pathname;
const dist = join(root, 'dist');
const CLI = join(dist, 'src', 'cli', 'main.js');
const { SocialApiClient } = await import(join(dist, 'src/api/client.js'));
const { startCorruptingProxy } = await import(join(dist, 'src/emulator/corrupting-proxy.js'));
const { loadPriceTable } = await import(join(dist, 'src/config/prices.js'));
const { parseHarvestConfig } = await import(join(dist, 'src/config/harvest-config.js'));
const { devServerArgs, TEMPORAL_BINARY } = await import(join(dist, 'src/temporal/dev-server.js'));
const { freePort } = await import(join(dist, 'src/cli/free-port.js'));
const { WORKER_NODE_FLAGS } = await import(join(dist, 'src/cli/stack.js'));
const { queryWarehouse } = await import(join(dist, 'src/warehouse/query.js'));
const { harvestSummary } = await import(join(dist, 'src/temporal/run-summary.js'));
const { filesUnder } = await import(join(dist, 'src/store/landing.js'));
const { landingRoot, segmentRoot } = await import(join(dist, 'src/store/layout.js'));
const { frameOf, framesIn, parseSegmentHeader } = await import(join(dist, 'src/store/segment.js'));
const { LocalStore } = await import(join(dist, 'src/store/store.js'));
const { CallJournal } = await import(join(dist, 'src/store/call-journal.js'));
const { FileJournalLog } = await import(join(dist, 'src/store/file-journal.js'));
const { lakeExists } = await import(join(dist, 'src/warehouse/lake.js'));
const { archivedJournalLogs } = await import(join(dist, 'src/warehouse/journal-archive.js'));
const { STAGED_TABLES } = await import(join(dist, 'src/warehouse/schema.js'));
const { storeFromEnvironment } = await import(join(dist, 'src/store/store-from-environment.js'));

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

/** The matrix polls every 100 ms unless told otherwise. */
function waitFor(check, timeoutMs, what, everyMs = 100) {
  return waitUntil(check, timeoutMs, what, everyMs);
}

/** The harvest of every case: N items of a channel, a keyword search and a reels search, each item's stats. */
function harvestOf(items, budget, extra = '') {
  const yaml = `harvests:
  - name: faults
    budget: { credits: ${budget} }${extra ? `\n    ${extra}` : ''}
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
        // A failed harvest's summary is its failed workflow's details.
        harvestSummary(temporal.workflow.getHandle(workflowId)),
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
    /** The corrupting proxy the workers reach the emulator through (src/emulator/corrupting-proxy.ts), if the case has one. */
    this.proxy = undefined;
    /** The process holding the private mount namespace in which the data dir is a small tmpfs, if the case has one. */
    this.holder = undefined;
    /** Extra harvest config lines (e.g. `call_deadline_seconds: 5`). */
    this.harvestExtra = '';
    /** Failures a case's drive found besides the common checks (e.g. a probe). */
    this.failures = [];
  }

  /** Where this process reads the data dir: through the namespace holder's root when the data dir is its private tmpfs. */
  get readDir() {
    return this.holder ? `/proc/${this.holder.pid}/root${this.dataDir}` : this.dataDir;
  }

  /** A harvester command (node and its arguments), entered into the holder's mount namespace when there is one. */
  command(args) {
    return this.holder ? ['nsenter', ['-t', String(this.holder.pid), '-m', '--', process.execPath, ...args]] : [process.execPath, args];
  }

  /** With shared storage, each worker's own scratch directory: a machine of its own. */
  env(scratch = this.dataDir) {
    return {
      ...process.env,
      ...this.sharedEnv,
      TEMPORAL_ADDRESS: temporalAddress,
      HARVESTER_TASK_QUEUE: this.taskQueue,
      HARVESTER_DATA_DIR: scratch,
      SOCIAL_API_BASE_URL: this.proxy ? this.proxy.baseUrl : this.emulator.baseUrl,
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
    const scratch = this.sharedEnv ? join(this.dir, `machine-${number}`) : this.dataDir;
    mkdirSync(scratch, { recursive: true });
    const child = track(spawn(...this.command([...WORKER_NODE_FLAGS, CLI, 'worker']), { cwd: root, env: this.env(scratch), detached: true, stdio: ['ignore', 'pipe', 'pipe'] }), true);
    child.number = number;
    let text = '';
    child.stdout.pipe(log);
    child.stderr.on('data', (chunk) => {
      log.write(chunk);
      if (text.length < 10_000) text += chunk;
    });
    this.workers.push(child);
    await Promise.race([
      waitFor(() => /polling task queue/.test(text), 30_000, `worker ${number} to poll`, 50),
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
    this.note(`SIGKILLed worker ${child.number} (${signal}) ${why}; ${this.sharedEnv ? 'landings in the shared store' : `${this.landings()} landings`}${loaders.length ? `; its load process(es) ${loaders.join(',')} killed with it` : ''}`);
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
      // Landing files of earlier versions (none are written now), and the frames of the segments.
      return filesUnder(landingRoot(this.readDir)).filter((file) => file.endsWith('.json')).length + framesInSegments(this.readDir);
    } catch {
      return -1;
    }
  }

  waitLandings(count, timeoutMs = 120_000) {
    return waitFor(() => this.landings() >= count, timeoutMs, `${count} landings`, 200);
  }

  /** Waits until the API has charged the harvest key for `count` calls (landings may be on no disk here). */
  async waitCalls(count, timeoutMs = 120_000) {
    return waitFor(async () => (await admin(this.emulator.origin, `ledger?api_key=${HARVEST_KEY}`)).length >= count, timeoutMs, `${count} calls charged`, 200);
  }

  /** Starts the run (through the Temporal client); the workers run it. */
  async startRun(budget) {
    this.runId = `faults-${this.name}-${Date.now()}`;
    this.budgets.push(budget);
    await temporal.workflow.start('harvestWorkflow', { taskQueue: this.taskQueue, workflowId: this.runId, args: [{ harvest: harvestOf(this.items, budget, this.harvestExtra), budgetCredits: budget }] });
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
    this.phases.push({ label, status: summary.status, reason: summary.reason, summary });
    this.summary = summary;
    this.note(`${label}: ${summary.status}${summary.reason ? ` (${summary.reason})` : ''}; items ${summary.itemsLanded}, credits ${summary.creditsSpent} of ${summary.budget}, callsLost ${summary.callsLost}; enrichment ${summary.enrichment.calls} calls, ${summary.enrichment.skipped} skipped, ${summary.enrichment.failed} failed; targets ${summary.targets.map((t) => `${t.status} ${t.items}/${t.wanted}`).join(', ')}`);
    return summary;
  }

  /** `harvester retry <run> --budget N --no-local-worker --json`, on the running workers. */
  async retry(extra) {
    this.budgets.push(extra);
    const child = track(spawn(...this.command([CLI, 'retry', this.runId, '--budget', String(extra), '--no-local-worker', '--json']), { cwd: root, env: { ...this.env(), LOG_LEVEL: 'warn' }, stdio: ['ignore', 'pipe', 'pipe'] }));
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
    this.phases.push({ label: 'retry', status: summary.status, reason: summary.reason, exit: exited.code, summary });
    this.summary = summary;
    this.note(`harvester retry --budget ${extra} (exit ${exited.code}): ${summary.status}${summary.reason ? ` (${summary.reason})` : ''}; items ${summary.itemsLanded}, credits ${summary.creditsSpent} of ${summary.budget}, callsLost ${summary.callsLost}; enrichment ${summary.enrichment.calls} calls, ${summary.enrichment.skipped} skipped, ${summary.enrichment.failed} failed; targets ${summary.targets.map((t) => `${t.status} ${t.items}/${t.wanted}`).join(', ')}`);
    return summary;
  }
}

/** `harvester load`: what an operator can do with landings a failed run left unloaded. */
CaseContext.prototype.load = async function load() {
  const child = track(spawn(...this.command([CLI, 'load']), { cwd: root, env: { ...this.env(), LOG_LEVEL: 'warn' }, stdio: ['ignore', 'pipe', 'pipe'] }));
  let output = '';
  child.stdout.on('data', (chunk) => (output += chunk));
  child.stderr.on('data', (chunk) => (output += chunk));
  const { code } = await child.exited;
  this.phases.push({ label: 'harvester load', status: code === 0 ? 'loaded' : `exit ${code}`, reason: output.trim().split('\n').at(-1) });
  this.note(`harvester load (exit ${code}): ${output.trim().split('\n').at(-1)}`);
};

/**
 * The data dir as a small tmpfs in a private mount namespace: `unshare --mount --propagation
 * private` (root here may not mount on the host, but may in a namespace of its own) runs a holder
 * process that mounts the tmpfs and sleeps; workers and CLI commands enter its namespace with
 * `nsenter -m`, and this process reads the files through /proc/<holder>/root.
 */
CaseContext.prototype.mountSmallDisk = async function mountSmallDisk(kib) {
  const holder = await mountPrivateTmpfs(this.dataDir, kib, track);
  this.holder = holder;
  this.note(`data dir: a ${kib} KiB tmpfs in a private mount namespace (unshare --mount --propagation private, held by pid ${holder.pid}); read here through ${this.readDir}`);
};

/** Used and total KiB of the data dir's filesystem. */
CaseContext.prototype.diskUsage = function diskUsage() {
  const fs = statfsSync(this.readDir);
  return { usedKiB: Math.round(((fs.blocks - fs.bfree) * fs.bsize) / 1024), totalKiB: Math.round((fs.blocks * fs.bsize) / 1024) };
};

/** PostgreSQL and MinIO for the case's shared store (src/cli/shared-services.ts), and the environment every worker gets. */
CaseContext.prototype.startSharedStore = async function startSharedStore() {
  const { startSharedServices } = await import(join(dist, 'src/cli/shared-services.js'));
  // PostgreSQL runs as the postgres user when this runs as root: it must reach its folder.
  chmodSync(OUT, 0o755);
  this.services = await startSharedServices(join(this.dir, 'services'));
  this.sharedEnv = this.services.environment('faults');
  this.note(`shared store: MinIO ${this.services.minio.endpoint} and PostgreSQL on 127.0.0.1; each worker's scratch is ${this.dir}/machine-N`);
};

CaseContext.prototype.stopSharedStore = async function stopSharedStore() {
  await this.services?.stop();
};

/** "Frees space": the tmpfs remounted bigger, in the holder's namespace; its files stay. */
CaseContext.prototype.growDisk = function growDisk(kib) {
  execFileSync('nsenter', ['-t', String(this.holder.pid), '-m', 'mount', '-o', `remount,size=${kib}k`, this.dataDir]);
  const { usedKiB, totalKiB } = this.diskUsage();
  this.note(`tmpfs remounted at ${totalKiB} KiB (${usedKiB} KiB used)`);
};

CaseContext.prototype.unmountSmallDisk = async function unmountSmallDisk() {
  if (!this.holder) return;
  // The tmpfs goes with its namespace: keep the journals and run records for a post-mortem.
  for (const folder of ['journal', 'runs', 'segments']) {
    try {
      cpSync(join(this.readDir, folder), join(this.dir, `tmpfs-${folder}`), { recursive: true });
    } catch {
      /* not there */
    }
  }
  this.holder.kill('SIGKILL');
  await this.holder.exited;
};

/** The figures of a case, from the emulator's ledger, the verification readings and the warehouse. */
async function figuresOf(ctx, expectedStart, expectedEnd) {
  // With shared storage this process reads the shared lake and journals, as any machine would.
  if (ctx.sharedEnv) Object.assign(process.env, ctx.sharedEnv);
  const warehouse = await lakeExists(ctx.readDir);
  let warehouseDir = ctx.readDir;
  if (warehouse && ctx.holder) {
    // DuckDB resolves /proc/<pid>/root/… to the host's path, where the tmpfs is not: read a copy
    // (the lake is attached with its data folder named, so a copied lake reads as the original).
    warehouseDir = join(ctx.dir, 'warehouse-copy');
    mkdirSync(warehouseDir, { recursive: true });
    cpSync(join(ctx.readDir, 'lake'), join(warehouseDir, 'lake'), { recursive: true });
  }
  const q = async (sql) => (warehouse ? (await queryWarehouse(warehouseDir, sql)).rows : []);
  const items = await q(`SELECT platform || ':' || item_id AS id FROM items`);
  const [itemCounts] = await q('SELECT count(*) AS n, count(DISTINCT (platform, item_id)) AS d FROM items');
  const [metricCounts] = await q('SELECT count(*) AS n, count(DISTINCT (platform, item_id, request_id)) AS d FROM item_metrics');
  const [statsCounts] = await q(`SELECT count(*) AS n, count(DISTINCT CAST(params AS VARCHAR)) AS d FROM api_calls WHERE endpoint LIKE '%/stats'`);
  const statsUrls = new Set((await q(`SELECT DISTINCT json_extract_string(params, '$.url') AS url FROM api_calls WHERE endpoint LIKE '%/stats'`)).map((row) => row.url));
  const urls = await q(`SELECT platform || ':' || item_id AS id, url FROM items`);
  const calls = new Set((await q('SELECT request_id FROM api_calls')).map((row) => row.request_id));
  const [apiCalls] = await q('SELECT count(*) AS n, coalesce(sum(credits), 0) AS credits FROM api_calls');
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
  const invented = await inventedRows(ctx, await q('SELECT platform, item_id, kind, author_handle FROM items'), new Set([...Object.values(expectedStart).flat(), ...Object.values(expectedEnd).flat()]));
  const journal = ctx.sharedEnv ? await sharedJournalTotals(ctx) : await journalTotals(ctx.readDir, warehouse ? warehouseDir : undefined);
  const rebuildMismatch = warehouse ? await rebuildMismatchOf(warehouseDir, q) : [];
  for (const name of Object.keys(ctx.sharedEnv ?? {})) delete process.env[name];
  return {
    warehouse,
    rebuildMismatch,
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
    /** Warehouse item rows whose id the emulator's world does not have. */
    invented: invented.length,
    inventedSample: invented.slice(0, 3),
    /** What the warehouse's api_calls rows were charged, and what the run's journals count as lost (charged, never landed: cut, timed out, refused). */
    apiCalls: Number(apiCalls?.n ?? 0),
    apiCallsCredits: Number(apiCalls?.credits ?? 0),
    journalCredits: journal.credits,
    journalLostCalls: journal.lostCalls,
    journalLostCredits: journal.lostCredits,
    journalLandedOpen: journal.landedOpen,
    spoiled: ctx.proxy ? Object.fromEntries(Object.entries(ctx.proxy.spoiled).filter(([, n]) => n > 0)) : undefined,
  };
}

/**
 * The journals of every run in the data dir, added up (src/store/call-journal.ts reads them).
 * An intent left open whose landing exists, and that no journal settled, is the call that landed
 * before its settlement could be written (a kill, a full disk): counted settled at the landing's
 * charge, as the harvester's own reading counts it, not lost.
 */
async function journalTotals(dataDir, lakeDir) {
  const folder = join(dataDir, 'journal');
  const replayed = [];
  // The journals of runs over for good are in the lake (call_journal), copied by the load that cleared their answers.
  if (lakeDir !== undefined) for (const logs of (await archivedJournalLogs(lakeDir)).values()) for (const log of logs) replayed.push(await CallJournal.replay(log));
  for (const run of existsSync(folder) ? readdirSync(folder) : []) {
    for (const entry of readdirSync(join(folder, run), { withFileTypes: true })) {
      if (entry.isFile() && entry.name.endsWith('.ndjson')) replayed.push(await CallJournal.replay(new FileJournalLog(join(folder, run, entry.name))));
    }
  }
  // An open intent's landing: in the data directory while its run's answers are there, else in the lake's raw answers.
  const store = new LocalStore(dataDir);
  const landings = new Map();
  const missing = [];
  for (const journal of replayed) {
    for (const key of journal.openKeys()) {
      const landing = await store.findLanding(key);
      if (landing) landings.set(key, landing);
      else missing.push(key);
    }
  }
  if (missing.length > 0 && lakeDir !== undefined) {
    const rows = await queryWarehouse(lakeDir, `SELECT landing, answer FROM raw_answers WHERE landing IN (${missing.map((key) => `'${key.replaceAll("'", "''")}'`).join(', ')})`);
    for (const row of rows.rows) landings.set(String(row.landing), typeof row.answer === 'string' ? JSON.parse(row.answer) : row.answer);
  }
  return addUpJournals(replayed, (key) => landings.get(key));
}

/** The segment files of a data directory, oldest run first. */
function segmentFiles(dataDir) {
  const root = segmentRoot(dataDir);
  if (!existsSync(root)) return [];
  return readdirSync(root).sort().flatMap((run) => readdirSync(join(root, run)).sort().map((name) => join(root, run, name)));
}

/** Bytes in a data directory's segments. */
function segmentBytes(dataDir) {
  return segmentFiles(dataDir).reduce((sum, file) => {
    try {
      return sum + statSync(file).size;
    } catch {
      return sum;
    }
  }, 0);
}

/** The whole frames in a data directory's segments: the landings written so far, read without blocking long. */
function framesInSegments(dataDir) {
  const root = segmentRoot(dataDir);
  if (!existsSync(root)) return 0;
  let frames = 0;
  for (const run of readdirSync(root)) {
    for (const name of readdirSync(join(root, run))) {
      const bytes = readFileSync(join(root, run, name));
      const header = parseSegmentHeader(bytes);
      if (header) frames += framesIn(bytes.subarray(header.framesStart), header.framesStart).frames.length;
    }
  }
  return frames;
}

/** The run's journals in the shared catalog, and its landings in the object store. */
async function sharedJournalTotals(ctx) {
  const store = await storeFromEnvironment(mkdtempSync(join(OUT, 'reader-')), { ...process.env, ...ctx.sharedEnv });
  try {
    const replayed = [];
    for (const log of await store.journals.runJournalLogs(ctx.runId)) replayed.push(await CallJournal.replay(log));
    // Once the run is over and loaded, its journals are in the shared lake (call_journal).
    if (await lakeExists(store.dataDir)) for (const log of (await archivedJournalLogs(store.dataDir, ctx.runId)).get(ctx.runId) ?? []) replayed.push(await CallJournal.replay(log));
    const landings = new Map();
    for (const journal of replayed) for (const key of journal.openKeys()) landings.set(key, await store.findLanding(key));
    return addUpJournals(replayed, (key) => landings.get(key));
  } finally {
    await store.close();
  }
}

function addUpJournals(journals, landingOf) {
  const totals = { credits: 0, lostCalls: 0, lostCredits: 0, files: 0, landedOpen: 0 };
  const settled = new Set(journals.flatMap((journal) => [...journal.settledKeys]));
  for (const journal of journals) {
    for (const key of journal.openKeys()) {
      if (settled.has(key)) continue;
      const landing = landingOf(key);
      if (!landing) continue;
      journal.countAsSettled(key, landing.call?.credits ?? 0);
      settled.add(key);
      totals.landedOpen++;
    }
    const t = journal.totals();
    totals.credits += t.credits;
    totals.lostCalls += t.lostCalls;
    totals.lostCredits += t.lostCredits;
    totals.files++;
  }
  return totals;
}

/**
 * Warehouse items the emulator's world does not have: an empty id, or one that none of the targets
 * listed (in either verification reading) and that the world does not resolve, asked with the
 * verification key by a URL built from the row's own id (not its url column, which a forged copy
 * may have kept): a 404 or 400 means invented. Free for a 404; an item the world has costs the
 * verification key a stats call, never the harvest's.
 */
async function inventedRows(ctx, rows, listed) {
  const invented = [];
  const unknown = rows.filter((row) => !listed.has(`${row.platform}:${row.item_id}`));
  if (unknown.length === 0) return invented;
  const client = new SocialApiClient({ baseUrl: ctx.emulator.baseUrl, apiKey: VERIFY_KEY, prices, retry: { maxElapsedMs: 5_000 } });
  try {
    for (const row of unknown) {
      const id = `${row.platform}:${row.item_id}`;
      if (!row.item_id) {
        invented.push(id);
        continue;
      }
      const url = row.platform === 'tiktok' ? `https://www.tiktok.com/@${row.author_handle}/video/${row.item_id}` : `https://www.instagram.com/${row.kind === 'post' ? 'p' : 'reel'}/${row.item_id}/`;
      try {
        await client.get(row.platform, 'stats', { url });
      } catch (error) {
        if (error.status === 404 || error.status === 400 || error.code === 'invalid_argument') invented.push(id);
        else throw error;
      }
    }
  } finally {
    await client.close();
  }
  if (unknown.length > invented.length) ctx.note(`${unknown.length - invented.length} warehouse items outside the targets' listings, but the world has them (drift)`);
  return invented;
}

/**
 * The checks of every case: nothing duplicated, the budget held, every credit the API charged is
 * in the run's figures, calls paid twice are at most the calls the run says a crash lost, no
 * target "done" and no run "completed" over a shortfall; and, unless the case expects a
 * shortfall, every expected row landed and the run (or its retry) completed.
 */
/**
 * `harvester rebuild` on the case's warehouse (issue "A run's cost depends on its own work"): every
 * table the loads made, row for row, before and after. Returns the tables that differ.
 */
async function rebuildMismatchOf(warehouseDir, q) {
  const tables = async () => Object.fromEntries(await Promise.all(STAGED_TABLES.map(async (table) => [table, (await q(`SELECT * FROM ${table}`)).map((row) => JSON.stringify(row)).sort()])));
  const loaded = await tables();
  execFileSync(process.execPath, [CLI, 'rebuild'], { env: { ...process.env, HARVESTER_DATA_DIR: warehouseDir, LOG_LEVEL: 'warn' }, stdio: 'ignore' });
  const rebuilt = await tables();
  return STAGED_TABLES.filter((table) => JSON.stringify(loaded[table]) !== JSON.stringify(rebuilt[table])).map((table) => `${table} (${loaded[table].length} rows loaded, ${rebuilt[table].length} rebuilt)`);
}

function verdictOf(ctx, figures, expect) {
  const failures = [];
  if (figures.rebuildMismatch?.length) failures.push(`harvester rebuild made other rows than the loads: ${figures.rebuildMismatch.join(', ')}`);
  const summary = ctx.summary;
  for (const phase of ctx.phases) {
    if (phase.status === 'workflow failed') failures.push(`the ${phase.label} failed as a workflow, with no summary and no checkpoint (${phase.reason})`);
    if (phase.status === 'refused') failures.push(`harvester retry refused: ${phase.reason}`);
  }
  if (!figures.warehouse) failures.push('no warehouse was loaded');
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
  if (figures.invented) failures.push(`${figures.invented} invented rows in items (ids the world does not have: ${figures.inventedSample.join(', ')})`);
  if (expect.exactLedger) {
    if (summary && figures.charged !== summary.creditsSpent) failures.push(`the ledger charged ${figures.charged}, the run reports ${summary.creditsSpent}`);
    const accounted = figures.apiCallsCredits + figures.journalLostCredits;
    if (accounted !== figures.charged) failures.push(`the ledger charged ${figures.charged}, api_calls hold ${figures.apiCallsCredits} and the journals ${figures.journalLostCredits} lost (${accounted})`);
  }
  for (const kind of expect.faultKinds ?? []) if (!ctx.proxy?.spoiled[kind]) failures.push(`the fault never happened: no answer spoiled as ${kind}`);
  const first = ctx.phases[0];
  if (expect.firstNotCompleted && first?.status === 'completed') failures.push(`the ${first.label} says completed over the fault, expected a shortfall reported`);
  if (expect.refused && first?.summary) failures.push(...refusalFailures(ctx, first, expect.refused));
  return { failures, honest };
}

/**
 * The checks of a run whose answers the proxy spoiled so that the client must refuse them: not
 * completed; each target with a refused answer (a list page, or an item's stats) not "done"; a
 * refused list page is the target's error, with its request id; refused stats are failed calls
 * with their request ids.
 */
function refusalFailures(ctx, phase, refused) {
  const failures = [];
  const summary = phase.summary;
  const calls = ctx.proxy.spoiledCalls.filter((call) => refused.kinds.includes(call.kind));
  if (summary.status === 'completed') failures.push(`the ${phase.label} says completed over ${calls.length} refused answers`);
  const targetOf = (call) => {
    const byEndpoint = TARGETS.find(([, platform, endpoint]) => call.endpoint === `${platform}/${endpoint}`);
    if (byEndpoint) return byEndpoint[0];
    const itemId = /\/(?:video|reel|p)\/([^/?]+)/.exec(call.query.url ?? '')?.[1];
    return TARGETS.find(([key, platform]) => call.endpoint.startsWith(`${platform}/`) && ctx.expected?.[key]?.includes(`${platform}:${itemId}`))?.[0];
  };
  const affected = new Map();
  for (const call of calls) {
    const key = targetOf(call);
    if (key) affected.set(key, [...(affected.get(key) ?? []), call]);
  }
  for (const [key, spoiled] of affected) {
    const target = summary.targets.find((t) => t.key === key);
    ctx.note(`refused answers of ${key}: ${spoiled.length} (${spoiled.map((call) => call.requestId).slice(0, 3).join(', ')}${spoiled.length > 3 ? ', …' : ''}); the ${phase.label} says ${target?.status} ${target?.items}/${target?.wanted}${target?.error ? `, error ${target.error.type} (request ${target.error.requestId ?? 'none'}): ${target.error.message.slice(0, 160)}` : ''}`);
    if (target?.status === 'done') failures.push(`${key} "done" after ${spoiled.length} refused answer(s) (${[...new Set(spoiled.map((c) => c.kind))].join(', ')})`);
    const lists = spoiled.filter((call) => !call.query.url);
    if (lists.length && !lists.some((call) => call.requestId && target?.error?.requestId === call.requestId)) {
      failures.push(`${key}: its error does not name a refused page's request id (${target?.error ? `${target.error.type}: ${target.error.requestId ?? 'no request id'}` : 'no error'})`);
    }
  }
  const objects = calls.filter((call) => call.query.url);
  if (objects.length) {
    ctx.note(`refused enrichment answers: ${objects.length}; the ${phase.label} lists ${summary.failedCalls?.total ?? 0} failed calls, e.g. ${JSON.stringify(summary.failedCalls?.first?.[0] ?? null).slice(0, 300)}`);
    const named = new Set((summary.failedCalls?.first ?? []).map((failure) => failure.request_id ?? failure.requestId));
    if ((summary.failedCalls?.total ?? 0) < objects.length) failures.push(`${objects.length} enrichment answers refused, the run lists ${summary.failedCalls?.total ?? 0} failed calls`);
    if (!objects.some((call) => named.has(call.requestId))) failures.push('no failed call listed with a refused answer\'s request id');
  }
  return failures;
}

// ---------------------------------------------------------------------------------------------
// The cases.

const fastEmulator = ['--rate-limit', '1000'];
const [CHANNEL, TT_SEARCH, IG_REELS] = TARGETS.map(([key]) => key);
/** The endpoint ("tiktok/channel-videos") a target lists. */
const endpointOf = (key) => {
  const [, platform, endpoint] = TARGETS.find(([k]) => k === key);
  return `${platform}/${endpoint}`;
};
const DISK_KIB = Number(process.env.FAULT_DISK_KIB ?? 4096);
const QUERY_ROWS = Number(process.env.FAULT_QUERY_ROWS ?? 10_000_000);
const QUERY_PEAK_MIB = 500;

/** A proxy case: one run through the proxy; if it did not complete, the proxy lets every answer through and `harvester retry` runs once. */
async function proxyDrive(ctx) {
  await ctx.startWorker();
  await ctx.startRun(BUDGET);
  const first = await ctx.runResult('run');
  if (first?.status === 'completed') return;
  ctx.proxy.passThrough();
  ctx.note(`the proxy passes every answer through from now on (spoiled so far: ${JSON.stringify(Object.fromEntries(Object.entries(ctx.proxy.spoiled).filter(([, n]) => n > 0)))})`);
  await ctx.retry(BUDGET);
}

/**
 * `harvester call tiktok channel-stats --handle happy_otter0` through the proxy, with the
 * verification key (the harvest key's ledger stays the run's), its answer about another account:
 * the client must refuse it. A harvest never calls channel-stats, so this is its only check here.
 */
async function channelStatsProbe(ctx) {
  const choose = (call) => (call.endpoint === 'tiktok/channel-stats' ? { kind: 'other_entity' } : undefined);
  ctx.proxy.setChoice(choose);
  const child = track(spawn(process.execPath, [CLI, 'call', 'tiktok', 'channel-stats', '--handle', 'happy_otter0'], { cwd: root, env: { ...ctx.env(), SOCIAL_API_KEY: VERIFY_KEY, LOG_LEVEL: 'warn' }, stdio: ['ignore', 'pipe', 'pipe'] }));
  let output = '';
  child.stdout.on('data', (chunk) => (output += chunk));
  child.stderr.on('data', (chunk) => (output += chunk));
  const { code } = await child.exited;
  ctx.proxy.setChoice(ctx.proxyChoice);
  const spoiled = ctx.proxy.spoiledCalls.filter((call) => call.endpoint === 'tiktok/channel-stats');
  const line = output.trim().split('\n').at(-1);
  ctx.note(`channel-stats probe (${spoiled.length} answer(s) spoiled, handle -> another account): exit ${code}: ${line}`);
  // Not the harvest's: the refusal checks of the run leave it out.
  ctx.proxy.spoiledCalls.splice(0, ctx.proxy.spoiledCalls.length, ...ctx.proxy.spoiledCalls.filter((call) => call.endpoint !== 'tiktok/channel-stats'));
  ctx.proxy.spoiled.other_entity -= spoiled.length;
  if (spoiled.length === 0) ctx.failures.push('channel-stats probe: the proxy spoiled nothing');
  else if (code === 0 || !/account/.test(output)) ctx.failures.push(`channel-stats probe: an answer about another account was not refused (exit ${code}: ${line})`);
}

/** `harvester query` as a child, stdout to /dev/null or counted; its exit, seconds, peak RSS (VmHWM, polled) and stderr. */
async function queryRun(dataDir, args, { count = false } = {}) {
  const devNull = count ? undefined : openSync('/dev/null', 'w');
  const startedAt = Date.now();
  const child = track(spawn(process.execPath, [CLI, 'query', ...args], { env: { ...process.env, HARVESTER_DATA_DIR: dataDir }, stdio: ['ignore', count ? 'pipe' : devNull, 'pipe'] }));
  let stderr = '';
  let lines = 0;
  child.stderr.on('data', (chunk) => (stderr += chunk));
  child.stdout?.on('data', (chunk) => {
    for (let i = chunk.indexOf(10); i !== -1; i = chunk.indexOf(10, i + 1)) lines++;
  });
  let peakKiB = 0;
  const poll = setInterval(() => {
    try {
      peakKiB = Math.max(peakKiB, Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'))?.[1] ?? 0));
    } catch {
      /* exited between two polls */
    }
  }, 20);
  const timer = setTimeout(() => child.kill('SIGKILL'), 600_000);
  const { code, signal } = await child.exited;
  clearInterval(poll);
  clearTimeout(timer);
  if (devNull !== undefined) closeSync(devNull);
  return { code, signal, seconds: (Date.now() - startedAt) / 1000, peakMiB: peakKiB / 1024, lines, stderr: stderr.trim() };
}

/** The large query: on an empty warehouse (range() needs no table), limits lifted, then the default limits. */
async function queryCase(dir) {
  const dataDir = join(dir, 'data');
  mkdirSync(dataDir, { recursive: true });
  execFileSync(process.execPath, [CLI, 'load'], { env: { ...process.env, HARVESTER_DATA_DIR: dataDir, LOG_LEVEL: 'warn' }, stdio: 'ignore' });
  const sql = `SELECT * FROM range(${QUERY_ROWS})`;
  const failures = [];
  const lifted = await queryRun(dataDir, [sql, '--format', 'csv', '--max-rows', '0', '--timeout', '0']);
  const limited = await queryRun(dataDir, [sql, '--format', 'csv'], { count: true });
  if (lifted.code !== 0) failures.push(`limits lifted: exit ${lifted.code ?? lifted.signal}, expected 0 (${lifted.stderr.split('\n').at(-1)})`);
  if (lifted.peakMiB >= QUERY_PEAK_MIB) failures.push(`limits lifted: peak RSS ${lifted.peakMiB.toFixed(0)} MiB, expected under ${QUERY_PEAK_MIB}`);
  if (limited.code !== 4) failures.push(`default limits: exit ${limited.code ?? limited.signal}, expected 4`);
  if (limited.lines !== 100_001) failures.push(`default limits: ${limited.lines} lines printed, expected 100001 (a header and 100000 rows)`);
  if (!/--max-rows/.test(limited.stderr)) failures.push(`default limits: stderr does not name --max-rows: ${JSON.stringify(limited.stderr)}`);
  return {
    failures,
    lines: [
      `--max-rows 0 --timeout 0: exit ${lifted.code ?? lifted.signal}, ${lifted.seconds.toFixed(1)} s, peak RSS ${lifted.peakMiB.toFixed(0)} MiB`,
      `default limits: exit ${limited.code ?? limited.signal}, ${limited.lines} lines, ${limited.seconds.toFixed(1)} s, peak RSS ${limited.peakMiB.toFixed(0)} MiB; stderr: ${limited.stderr.split('\n').at(-1)}`,
    ],
  };
}

const CASES = [
  {
    name: 'shared-storage-kills',
    describe: 'three workers, each with a scratch directory of its own and no disk in common, sharing one store (PostgreSQL + MinIO), SIGKILLed in turn mid-run (latency 150 ms), each replaced by a new machine',
    expect: 'all rows, completed, re-paid <= callsLost, ledger = reported',
    shared: true,
    emulator: [...fastEmulator, '--latency-ms', '150'],
    faults: { latency_ms: 150 },
    async drive(ctx) {
      const workers = [await ctx.startWorker(), await ctx.startWorker(), await ctx.startWorker()];
      await ctx.startRun(BUDGET);
      for (const [index, calls] of [
        [0, 150],
        [1, 500],
        [2, 900],
      ]) {
        await ctx.waitCalls(calls);
        await ctx.killWorker(workers[index], `at >= ${calls} calls charged`);
        workers[index] = await ctx.startWorker();
      }
      await ctx.runResult('run');
    },
  },
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
  // ---- Segments (issue "A run's cost depends on its own work"): answers framed in segment files.
  {
    name: 'segment-kill-in-group-commit',
    describe: 'worker SIGKILLed twice the moment its segment grows (a group of answers being written), a new worker each time (no latency, 16 calls in flight)',
    expect: 'all rows, completed, re-paid <= callsLost, no invented rows',
    emulator: fastEmulator,
    async drive(ctx) {
      let worker = await ctx.startWorker();
      await ctx.startRun(BUDGET);
      for (const landings of [200, 600]) {
        await ctx.waitLandings(landings);
        // Polled every millisecond: the kill follows a write of the segment by at most that.
        const before = segmentBytes(ctx.readDir);
        await waitFor(() => segmentBytes(ctx.readDir) > before || undefined, 60_000, 'the segment to grow', 1);
        await ctx.killWorker(worker, `as its segment grew past ${before} bytes`);
        worker = await ctx.startWorker();
      }
      await ctx.runResult('run');
    },
  },
  {
    name: 'segment-torn-tail',
    describe: "worker SIGKILLed mid-run; a frame cut in the middle (a crash's torn write) appended to its segment, and garbage after the last frame of another; a new worker",
    expect: 'all rows, completed, re-paid <= callsLost, no invented rows: a torn frame is never loaded',
    emulator: [...fastEmulator, '--latency-ms', '50'],
    faults: { latency_ms: 50 },
    async drive(ctx) {
      const worker = await ctx.startWorker();
      await ctx.startRun(BUDGET);
      await ctx.waitLandings(300);
      await ctx.killWorker(worker, 'at >= 300 landings');
      const segments = segmentFiles(ctx.readDir);
      // A whole frame of an item no world has, cut before its end: its checksum cannot hold.
      const torn = frameOf(`${segments[0].split('/').at(-2)}/item_tiktok_torn/page-000001.json`, JSON.stringify({ format: 1, kind: 'page', run_id: ctx.runId, harvest: 'torn', target: 'item:tiktok:torn', page: 1, endpoint: 'tiktok/stats', params: { url: 'https://www.tiktok.com/@torn/video/1' }, request_id: 'torn', observed_at: new Date().toISOString(), data: { entity_id: 'invented-torn-item' } }));
      appendFileSync(segments[0], torn.subarray(0, torn.length - 7));
      ctx.note(`appended ${torn.length - 7} of a ${torn.length}-byte frame to ${segments[0]}`);
      await ctx.startWorker();
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
    describe: "worker (and its load process) SIGKILLed during a load, during the run or its final one (the loader's .loader/ folder, made when a data dir's first load starts, seen), a new worker at once",
    expect: 'all rows, completed, loaded once',
    emulator: fastEmulator,
    noRepaid: true,
    async drive(ctx) {
      const worker = await ctx.startWorker();
      await ctx.startRun(BUDGET);
      // The load process is started (warm) when the run begins; the load itself starts with .loader/.
      await waitFor(() => existsSync(join(ctx.dataDir, '.loader')) || undefined, 180_000, 'a load to start', 10);
      const loaders = loadProcessPids(worker.pid);
      ctx.note(`load process ${loaders.join(',')} running`);
      await ctx.killWorker(worker, 'during a load');
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
  // ---- Trust nothing from outside: answers spoiled between the API and the client (src/emulator/corrupting-proxy.ts).
  {
    name: 'proxy-cut-body',
    describe: 'corrupting proxy: every 7th content call (after the emulator served and charged it) gets its headers and half its body, then the socket is destroyed',
    expect: 'completed in one run, all rows, 0 duplicates, 0 invented; ledger = reported credits = api_calls + journaled lost attempts; re-paid <= callsLost',
    emulator: fastEmulator,
    proxy: (call) => (call.number % 7 === 0 ? { kind: 'cut_body' } : undefined),
    faultKinds: ['cut_body'],
    phases: ['completed'],
    exactLedger: true,
    drive: proxyDrive,
  },
  {
    name: 'proxy-slow-headers',
    describe: 'corrupting proxy, call_deadline_seconds 5: every 50th content call, and the 5th page of the TikTok channel, answered only after 8 s (nothing at all before)',
    expect: 'completed in one run (the held calls made again), all rows, 0 duplicates, 0 invented; ledger = reported = api_calls + journaled lost',
    emulator: fastEmulator,
    harvestExtra: 'call_deadline_seconds: 5',
    proxy: (call) => (call.number % 50 === 0 || (call.endpoint === endpointOf(CHANNEL) && call.endpointNumber === 5) ? { kind: 'slow_headers', ms: 8_000 } : undefined),
    faultKinds: ['slow_headers'],
    phases: ['completed'],
    exactLedger: true,
    drive: proxyDrive,
  },
  {
    name: 'proxy-slow-drip',
    describe: 'corrupting proxy, call_deadline_seconds 5: every 50th content call, and the 5th page of the TikTok search, get their headers at once, then the body 4 bytes every 200 ms (20 B/s; every answer is over 100 B)',
    expect: 'completed in one run (the dripped calls made again), all rows, 0 duplicates, 0 invented; ledger = reported = api_calls + journaled lost',
    emulator: fastEmulator,
    harvestExtra: 'call_deadline_seconds: 5',
    proxy: (call) => (call.number % 50 === 0 || (call.endpoint === endpointOf(TT_SEARCH) && call.endpointNumber === 5) ? { kind: 'slow_drip', bytes: 4, everyMs: 200 } : undefined),
    faultKinds: ['slow_drip'],
    phases: ['completed'],
    exactLedger: true,
    drive: proxyDrive,
  },
  {
    name: 'proxy-oversize',
    describe: 'corrupting proxy: the 4th page of the TikTok channel and of the TikTok search comes back with its 50 items twice, the copies under new ids (100 items for limit 50); the Instagram search untouched; then harvester retry with the proxy passing answers through',
    expect: 'run not completed, channel and TikTok search not done (error = the page\'s request id), nothing of the refused pages landed; retry completed, all rows, 0 duplicates, 0 invented; ledger = reported = api_calls + journaled lost',
    emulator: fastEmulator,
    proxy: (call) => ([endpointOf(CHANNEL), endpointOf(TT_SEARCH)].includes(call.endpoint) && call.endpointNumber === 4 ? { kind: 'oversize' } : undefined),
    faultKinds: ['oversize'],
    refused: { kinds: ['oversize'] },
    firstNotCompleted: true,
    phases: [undefined, 'completed'],
    exactLedger: true,
    drive: proxyDrive,
  },
  {
    name: 'proxy-empty-id',
    describe: 'corrupting proxy: item 8 of the 3rd Instagram reels-search page and of the 6th TikTok channel page has the id ""; the TikTok search untouched; then harvester retry with the proxy passing answers through',
    expect: 'run not completed, the two targets not done (error = the page\'s request id); retry completed, all rows, 0 duplicates, 0 invented (no row with an empty id); ledger = reported = api_calls + journaled lost',
    emulator: fastEmulator,
    proxy: (call) =>
      (call.endpoint === endpointOf(IG_REELS) && call.endpointNumber === 3) || (call.endpoint === endpointOf(CHANNEL) && call.endpointNumber === 6) ? { kind: 'empty_id', index: 7 } : undefined,
    faultKinds: ['empty_id'],
    refused: { kinds: ['empty_id'] },
    firstNotCompleted: true,
    phases: [undefined, 'completed'],
    exactLedger: true,
    drive: proxyDrive,
  },
  {
    name: 'proxy-other-entity',
    describe: "corrupting proxy: every 40th stats answer of each platform is about another item (its entity_id set to the last other item's id the proxy saw); first a probe: `harvester call tiktok channel-stats` (verification key) answered with another account's handle; then harvester retry with the proxy passing answers through",
    expect: 'probe refused; run not completed, the affected targets not done, each refused stats call a failed call with its request id; retry completed, all rows with their stats, 0 duplicates, 0 invented; ledger = reported = api_calls + journaled lost',
    emulator: fastEmulator,
    proxy: (call) => (call.endpoint.endsWith('/stats') && call.endpointNumber % 40 === 0 ? { kind: 'other_entity' } : undefined),
    faultKinds: ['other_entity'],
    refused: { kinds: ['other_entity'] },
    firstNotCompleted: true,
    phases: [undefined, 'completed'],
    exactLedger: true,
    async drive(ctx) {
      await channelStatsProbe(ctx);
      await proxyDrive(ctx);
    },
  },
  // ---- A disk that fills.
  {
    name: 'disk-full',
    describe: `data dir on a ${DISK_KIB} KiB tmpfs (a private mount namespace: unshare --mount), which fills mid-run; then the tmpfs is remounted at 256 MiB and harvester retry runs once`,
    expect: 'run stops, not completed (the data dir cannot be written); retry completed, all rows, 0 duplicates, 0 invented; ledger = reported = api_calls + journaled lost; budgets held',
    emulator: [...fastEmulator, '--latency-ms', '50'],
    faults: { latency_ms: 50 },
    smallDisk: DISK_KIB,
    firstNotCompleted: true,
    phases: [undefined, 'completed'],
    exactLedger: true,
    async drive(ctx) {
      await ctx.startWorker();
      await ctx.startRun(BUDGET);
      const first = await ctx.runResult('run');
      const { usedKiB, totalKiB } = ctx.diskUsage();
      ctx.note(`the tmpfs holds ${usedKiB} of ${totalKiB} KiB, ${ctx.landings()} landings`);
      ctx.growDisk(256 * 1024);
      if (first?.status !== 'completed') await ctx.retry(BUDGET);
    },
  },
  // ---- A 10M-row query.
  {
    name: 'query-10m',
    describe: `harvester query "SELECT * FROM range(${QUERY_ROWS})" --format csv, stdout to /dev/null: with --max-rows 0 --timeout 0, and with the default limits`,
    expect: 'limits lifted: exit 0, peak RSS (VmHWM) under 500 MiB; default limits: exit 4 after 100000 rows, stderr naming the limit and --max-rows',
    standalone: queryCase,
  },
];

async function runCase(def) {
  const items = def.items ?? ITEMS;
  console.log(`\n== ${def.name}: ${def.describe}\n   expected: ${def.expect}`);
  if (def.standalone) return runStandalone(def);
  const emulator = await startEmulatorProcess(['--seed', '42', '--credits', '100000000', '--api-key', HARVEST_KEY, '--api-key', VERIFY_KEY, ...def.emulator]);
  track(emulator.child);
  const ctx = new CaseContext(def.name, { ...emulator }, items);
  const restore = { fault_rate: def.faults?.fault_rate ?? 0, latency_ms: def.faults?.latency_ms ?? 0 };
  const row = { name: def.name, items };
  try {
    const expectedStart = await expectedItems(ctx.emulator, items, restore);
    ctx.expected = expectedStart;
    if (def.harvestExtra) ctx.harvestExtra = def.harvestExtra;
    if (def.proxy) {
      const catalog = await admin(ctx.emulator.origin, 'catalog');
      ctx.proxyChoice = def.proxy;
      ctx.proxy = await startCorruptingProxy({ upstream: ctx.emulator.origin, choose: def.proxy, otherHandles: { tiktok: catalog.tiktok.handles, instagram: catalog.instagram.handles } });
      ctx.note(`corrupting proxy on ${ctx.proxy.baseUrl} -> ${ctx.emulator.origin}`);
    }
    if (def.smallDisk) await ctx.mountSmallDisk(def.smallDisk);
    if (def.shared) await ctx.startSharedStore();
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
    if (ctx.proxy) ctx.note(`proxy: ${ctx.proxy.forwarded} content calls forwarded, spoiled ${JSON.stringify(figures.spoiled)}`);
    const { failures, honest } = verdictOf(ctx, figures, def);
    if (driveError) failures.unshift(`the case did not finish: ${driveError.message}`);
    failures.push(...ctx.failures);
    if (ctx.firstOverrun) failures.push(`the first run charged ${ctx.firstOverrun} over its budget of ${ctx.budgets[0]}`);
    Object.assign(row, { figures, failures, honest, phases: ctx.phases, summary: ctx.summary, seconds: (Date.now() - ctx.started) / 1000 });
  } catch (error) {
    Object.assign(row, { failures: [`the case could not be measured: ${error.stack ?? error.message}`], phases: ctx.phases, seconds: (Date.now() - ctx.started) / 1000 });
  } finally {
    await ctx.stopWorkers();
    await ctx.proxy?.close();
    await ctx.unmountSmallDisk();
    await ctx.stopSharedStore();
    emulator.child.kill('SIGTERM');
    await emulator.child.exited;
  }
  printCase(row);
  return row;
}

/** A case without a harvest (the large query): its own figures and verdict. */
async function runStandalone(def) {
  const started = Date.now();
  const dir = join(OUT, def.name);
  mkdirSync(dir, { recursive: true });
  const row = { name: def.name, standalone: true, phases: [] };
  try {
    const { lines, failures } = await def.standalone(dir);
    Object.assign(row, { lines, failures });
  } catch (error) {
    Object.assign(row, { lines: [], failures: [`the case could not be measured: ${error.stack ?? error.message}`] });
  }
  row.seconds = (Date.now() - started) / 1000;
  printCase(row);
  return row;
}

function printCase(row) {
  const f = row.figures;
  for (const line of row.lines ?? []) console.log(`   ${line}`);
  if (f) {
    console.log(`   phases: ${row.phases.map((phase) => `${phase.label} ${phase.status}${phase.reason ? ` (${phase.reason})` : ''}`).join(' -> ')}`);
    console.log(`   rows expected/landed: ${f.expected}/${f.landedExpected} (lost ${f.lost}${f.drift ? `, world drift ${f.drift}` : ''}; warehouse items ${f.landed}); per target: ${f.perTarget.map((t) => `${t.key} ${t.landed}/${t.expected} (${row.summary?.targets.find((x) => x.key === t.key)?.status ?? '?'})`).join('; ')}`);
    console.log(`   duplicates: items ${f.dupItems}, item_metrics per request ${f.dupMetrics}, stats landed twice ${f.statsTwice}; items with their stats call ${f.statsLanded} of ${f.landedExpected} landed`);
    console.log(`   credits charged ${f.charged} vs needed ${f.needed} (landed items need ${f.neededLanded}; extra ${f.extra}); run's figures ${row.summary?.creditsSpent ?? '?'}; budget ${f.budget}, overrun ${Math.max(0, f.charged - f.budget)}`);
    console.log(`   re-paid calls ${f.repaidCalls} (${f.repaidCredits} credits${f.repaidEndpoints.length ? `, ${f.repaidEndpoints.join(', ')}` : ''}); run's callsLost ${row.summary?.callsLost ?? '?'}; ledger calls ${f.ledgerCalls}`);
    console.log(`   ledger ${f.charged} / run's creditsSpent ${row.summary?.creditsSpent ?? '?'} / api_calls ${f.apiCallsCredits} (${f.apiCalls} calls) + journaled lost ${f.journalLostCredits} (${f.journalLostCalls} calls) = ${f.apiCallsCredits + f.journalLostCredits}; journals' total ${f.journalCredits}${f.journalLandedOpen ? ` (${f.journalLandedOpen} open intents found landed, counted settled)` : ''}; invented rows ${f.invented}${f.spoiled ? `; spoiled by the proxy ${JSON.stringify(f.spoiled)}` : ''}`);
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

console.log(`\n| case | phases (final status) | honest | rows expected / landed (lost) | invented | dup items / metrics / stats | items with stats | credits charged / needed (extra) | ledger / reported / api_calls + lost | re-paid calls (credits) / callsLost | budget (overrun) | result |`);
console.log('|---|---|---|---|---|---|---|---|---|---|---|---|');
for (const row of rows) {
  const f = row.figures;
  const phases = row.phases.map((phase) => phase.status).join(' → ') || '—';
  if (row.standalone) {
    console.log(`| ${row.name} | ${row.lines.join('; ').replaceAll('|', '/')} | | | | | | | | | | ${row.failures.length ? 'FAIL' : 'PASS'} |`);
    continue;
  }
  if (!f) {
    console.log(`| ${row.name} | ${phases} | ? | ? | ? | ? | ? | ? | ? | ? | ? | FAIL |`);
    continue;
  }
  console.log(
    `| ${row.name} | ${phases} | ${row.honest ? 'yes' : 'no'} | ${f.expected} / ${f.landedExpected} (${f.lost}) | ${f.invented} | ${f.dupItems} / ${f.dupMetrics} / ${f.statsTwice} | ${f.statsLanded} | ${f.charged} / ${f.needed} (${f.extra >= 0 ? '+' : ''}${f.extra}) | ${f.charged} / ${row.summary?.creditsSpent ?? '?'} / ${f.apiCallsCredits} + ${f.journalLostCredits} | ${f.repaidCalls} (${f.repaidCredits}) / ${row.summary?.callsLost ?? '?'} | ${f.budget} (${Math.max(0, f.charged - f.budget)}) | ${row.failures.length ? 'FAIL' : 'PASS'} |`,
  );
}
const failed = rows.filter((row) => row.failures.length);
console.log(`\n${rows.length - failed.length} of ${rows.length} cases passed in ${((Date.now() - began) / 1000).toFixed(0)} s; logs in ${OUT}`);
for (const row of failed) console.log(`FAIL ${row.name}: ${row.failures.join('; ')}`);
// Exit now: the result deadlines' timers of Promise.race would otherwise hold the process for minutes.
process.exit(failed.length ? 1 : 0);
