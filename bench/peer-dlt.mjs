#!/usr/bin/env node
/**
 * Peer benchmark (issues 10 and 18): the harvester against dlt, the tool users would pick instead,
 * and against a bare client loop, on the same emulator data. Workloads, each at API latency 0 and
 * 250 ms:
 *   channels       8 TikTok channels × 400 videos (channel-videos, pages of 50, following cursors)
 *   enrich         200 videos of one channel (BENCH_ENRICHED), then one stats call per video
 *   wide-channels  32 TikTok channels × 400 videos, the harvester at `--targets 32` (issue 18)
 *   wide-enrich    400 videos of one channel + one stats call each, the harvester at `--calls 64`
 * Contenders, interleaved over BENCH_ROUNDS rounds, the first one rotating:
 *   harvester         `node dist/src/cli/main.js run <harvest> --config <yaml> --json` with its local
 *                     worker, on a fresh data directory (nothing incremental)
 *   harvester-worker  the same with `--no-local-worker`, handed to a `harvester worker` the benchmark
 *                     started once before the rounds (as a deployed worker runs), its data directory
 *                     emptied before each run; its peak RSS is recorded (bench/report-max-rss.mjs)
 *   dlt               dlt 1.31.0's `rest_api` source into DuckDB, parallelized (bench/peer_dlt.py);
 *                     not in the wide workloads, which issue 18 measures against the bare loop
 *   bare              an undici loop here, no Temporal and no warehouse, at the harvester's
 *                     concurrency in that workload: its targets at once (8, or 32 wide), its calls
 *                     in flight after the listing (16, or 64 wide)
 * Every contender must land exactly the expected items; credits are read from the emulator's
 * ledger (one API key per contender). Wall time is the whole command for the harvester and dlt
 * (process start-up included); "in-run" is the run's own duration (the harvester's summary,
 * startedAt to finishedAt; dlt's pipeline.run). The harvester's Temporal history events are
 * counted over every run of its workflow (continue-as-new included).
 *
 * Then, once after the rounds, the rate-limited case (workload `limited`, issue 18): an emulator in
 * this process at 50 requests per second per key (BENCH_LIMITED_RATE), and a 2,000-call enrichment
 * (2,000 videos of one channel + one stats call each, `--calls 64`) by a standing worker of its
 * own, and by the API client alone (SocialApiClient, 64 calls in flight, no Temporal). Every
 * request the emulator answers is counted by status (node:http's diagnostics channel): requests
 * answered 200 per second, from the first request to the last, and the share answered 429.
 *
 *   npm run bench:peer                    (= npm run build && node bench/peer-dlt.mjs)
 *   BENCH_ROUNDS=1 BENCH_LATENCIES=250 BENCH_WORKLOADS=wide-channels,wide-enrich,limited node bench/peer-dlt.mjs
 *
 * Knobs: BENCH_ROUNDS (default 3), BENCH_LATENCIES (ms, default 0,250), BENCH_WORKLOADS (default
 * channels,enrich,wide-channels,wide-enrich,limited), BENCH_ENRICHED (videos in the enrich workload,
 * default 200), BENCH_DLT_WORKERS (dlt's extract threads, default 16), BENCH_LIMITED_RATE
 * (requests per second in the rate-limited case, default 50), BENCH_LIMITED_CALLS (its stats
 * calls, default 2000), BENCH_HARVESTER_CONCURRENCY=1 (write the workload's
 * `concurrency: { targets, calls }` into the harvest; off by default so the YAML also suits an
 * engine without that key; the wide workloads give theirs as `--targets`/`--calls`), PYTHON
 * (default python3).
 * The first run installs dlt[duckdb]==1.31.0 from PyPI into .tools/bench-python (pip --target).
 * Exits 0 whether targets pass or fail; 1 only when the benchmark could not run or a contender
 * landed the wrong items.
 */
import { execFileSync, spawn } from 'node:child_process';
import diagnostics from 'node:diagnostics_channel';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { Agent, request } from 'undici';
import { startEmulatorProcess } from './emulator-process.mjs';
import { median } from './stats.mjs';
import { allEvents, keepPhases, medianPhases, phaseTable, runPhases } from './run-phases.mjs';
import { sampleTreeRss } from './tree-rss.mjs';
import { startWorkerProcess } from './worker-process.mjs';

const root = new URL('..', import.meta.url).pathname;
const dist = join(root, 'dist');
const CLI = join(dist, 'src', 'cli', 'main.js');
const MAX_RSS_PRELOAD = join(root, 'bench', 'report-max-rss.mjs');
const { loadPriceTable } = await import(join(dist, 'src/config/prices.js'));
const { startEmulator, EMULATOR_DEFAULTS } = await import(join(dist, 'src/emulator/server.js'));
const { World } = await import(join(dist, 'src/emulator/world/world.js'));
const { SocialApiClient } = await import(join(dist, 'src/api/client.js'));
const { ephemeralServerOptions } = await import(join(dist, 'src/temporal/dev-server.js'));
const { freePort } = await import(join(dist, 'src/cli/free-port.js'));
const { assertApiKeyAccepted } = await import(join(dist, 'src/cli/api-key-check.js'));
const { apiKeyAcceptedFile } = await import(join(dist, 'src/store/layout.js'));
const { createLogger } = await import(join(dist, 'src/logger.js'));

Runtime.install({ logger: new DefaultLogger('WARN') });

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const LATENCIES = (process.env.BENCH_LATENCIES ?? '0,250').split(',').map(Number);
const WORKLOADS = (process.env.BENCH_WORKLOADS ?? 'channels,enrich,wide-channels,wide-enrich,limited').split(',');
const DLT_WORKERS = Number(process.env.BENCH_DLT_WORKERS ?? 16);
const HARVESTER_CONCURRENCY = process.env.BENCH_HARVESTER_CONCURRENCY === '1';
const PYTHON = process.env.PYTHON ?? 'python3';
const DLT_VERSION = '1.31.0';
const DLT_REQUIREMENT = `dlt[duckdb]==${DLT_VERSION}`;
const DLT_TARGET = join(root, '.tools', 'bench-python');

// The harvester's defaults (config/harvests.yaml), and issue 18's wide settings: the bare loop
// runs at the harvester's concurrency in each workload.
const DEFAULT_CONCURRENCY = { targets: 8, calls: 16 };
const WIDE_TARGETS = 32;
const WIDE_CALLS = 64;
const PAGE = 50;
const CHANNELS = 8;
const PER_CHANNEL = 400;
const ENRICHED = Number(process.env.BENCH_ENRICHED ?? 200);
const WIDE_ENRICHED = 400;
const LIMITED_RATE = Number(process.env.BENCH_LIMITED_RATE ?? 50);
const LIMITED_CALLS = Number(process.env.BENCH_LIMITED_CALLS ?? 2000);
const KEYS = { harvester: 'sk_live_peer_harvester', 'harvester-worker': 'sk_live_peer_standing', dlt: 'sk_live_peer_dlt', bare: 'sk_live_peer_bare', check: 'sk_live_peer_check' };
const LIMITED_KEYS = { 'harvester-worker': 'sk_live_peer_limited_standing', client: 'sk_live_peer_limited_client', check: 'sk_live_peer_limited_check' };
const CONTENDERS = ['harvester', 'harvester-worker', 'dlt', 'bare'];
const HARVESTERS = ['harvester', 'harvester-worker'];
const ROUND_WORKLOADS = WORKLOADS.filter((name) => name !== 'limited');

function ensureDlt() {
  if (existsSync(join(DLT_TARGET, `dlt-${DLT_VERSION}.dist-info`))) return;
  process.stderr.write(`installing ${DLT_REQUIREMENT} from PyPI into ${DLT_TARGET} (first run only)\n`);
  execFileSync(PYTHON, ['-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', '--upgrade', '--target', DLT_TARGET, DLT_REQUIREMENT], { stdio: 'inherit' });
}

ensureDlt();
const prices = loadPriceTable();
const { child: emulator, baseUrl, origin } = await startEmulatorProcess([
  '--rate-limit', '100000', '--credits', '1000000000', '--cursor-ttl', '86400', ...Object.values(KEYS).flatMap((key) => ['--api-key', key]),
]);
const [port, httpPort] = await Promise.all([freePort(), freePort()]);
// With its HTTP API on a known port, where `harvester run` starts its runs (src/temporal/run-start.ts).
const env = await TestWorkflowEnvironment.createLocal({ server: ephemeralServerOptions(port, [], httpPort) });
const agent = new Agent({ connections: 64 });

async function api(path, apiKey) {
  const { statusCode, body } = await request(`${baseUrl}/${path}`, { dispatcher: agent, headers: { authorization: `Bearer ${apiKey}` } });
  const json = await body.json();
  if (statusCode !== 200) throw new Error(`GET ${path}: ${statusCode} ${JSON.stringify(json)}`);
  return json;
}

async function admin(method, path, body) {
  const response = await fetch(`${origin}/_emulator/${path}`, { method, headers: { 'content-type': 'application/json' }, body: body && JSON.stringify(body) });
  if (!response.ok) throw new Error(`${method} /_emulator/${path}: ${response.status} ${await response.text()}`);
  return (await response.json()).data;
}

async function creditsCharged(apiKey) {
  const rows = await admin('GET', `ledger?api_key=${apiKey}`);
  return rows.reduce((sum, row) => sum + row.credits, 0);
}

/** The first `max` videos of a channel, newest first, a page of up to 50 at a time. */
async function listVideos(handle, max, apiKey) {
  const videos = [];
  let cursor;
  while (videos.length < max) {
    const limit = Math.min(PAGE, max - videos.length);
    const page = await api(`tiktok/channel-videos?handle=${encodeURIComponent(handle)}&limit=${limit}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`, apiKey);
    videos.push(...page.data);
    if (!page.meta.has_more) break;
    cursor = page.meta.cursor;
  }
  return videos;
}

/** Runs `calls` of `call(index)` with `inFlight` of them in flight at a time. */
async function inFlightLoop(calls, inFlight, call) {
  let next = 0;
  const caller = async () => {
    while (next < calls) await call(next++);
  };
  await Promise.all(Array.from({ length: Math.min(inFlight, calls) }, caller));
}

/** The bare contender: the API calls alone, at the harvester's concurrency in the workload. */
async function bareLoop(workload, apiKey) {
  if (!workload.stats) {
    let items = 0;
    await inFlightLoop(workload.handles.length, workload.concurrency.targets, async (index) => {
      const videos = await listVideos(workload.handles[index], workload.perChannel, apiKey);
      items += videos.length;
    });
    return { items, stats: 0 };
  }
  const videos = await listVideos(workload.handles[0], workload.perChannel, apiKey);
  let stats = 0;
  await inFlightLoop(videos.length, workload.concurrency.calls, async (index) => {
    await api(`tiktok/stats?url=${encodeURIComponent(videos[index].url)}`, apiKey);
    stats += 1;
  });
  return { items: videos.length, stats };
}

function harvestYaml(workload) {
  const lines = ['harvests:', `  - name: peer-${workload.name}`, '    budget: { credits: 1000000 }', '    # Above every target: listed page by page, never as an async job.', '    job_threshold: 100000', '    channels:'];
  for (const handle of workload.handles) lines.push(`      - { platform: tiktok, handle: ${handle}, content: videos, max_items: ${workload.perChannel} }`);
  if (workload.stats) lines.push('    enrich: { stats: true }');
  if (HARVESTER_CONCURRENCY) lines.push(`    concurrency: { targets: ${workload.concurrency.targets}, calls: ${workload.concurrency.calls} }`);
  return `${lines.join('\n')}\n`;
}

/** Runs a command to its end; resolves with its output and wall seconds, rejects on a non-zero exit. */
function timedCommand(command, args, options) {
  return new Promise((resolve, reject) => {
    const started = process.hrtime.bigint();
    const spawnedAt = Date.now();
    const child = spawn(command, args, { ...options, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk) => (stderr += chunk));
    child.once('error', reject);
    child.once('close', (code) => {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      if (code === 0) resolve({ stdout, stderr, seconds, spawnedAt, exitedAt: Date.now() });
      else reject(new Error(`${command} ${args.join(' ')} exited ${code}\n${stderr.slice(-4000)}`));
    });
  });
}

const STANDING_QUEUE = 'peer-standing';
const standingDataDir = mkdtempSync(join(tmpdir(), 'bench-peer-standing-'));

/**
 * The standing worker: `harvester worker`, started once before the rounds (untimed, as a deployed
 * worker would be), which `harvester run --no-local-worker` hands its runs to. Its data directory
 * is emptied before each of its runs, so every run starts fresh as the local-worker runs do.
 */
function startStandingWorker({ apiBaseUrl = baseUrl, apiKey = KEYS['harvester-worker'], dataDir = standingDataDir, queue = STANDING_QUEUE } = {}) {
  return startWorkerProcess({
    cwd: root,
    env: { ...process.env, TEMPORAL_ADDRESS: `127.0.0.1:${port}`, SOCIAL_API_BASE_URL: apiBaseUrl, SOCIAL_API_KEY: apiKey, HARVESTER_DATA_DIR: dataDir, HARVESTER_TASK_QUEUE: queue, LOG_LEVEL: 'error' },
  });
}

/**
 * One `harvester run` of the workload, timed, with its local worker or handed to a standing one
 * (`standing`: the API, key, data directory and task queue it serves, its data directory emptied first).
 */
/**
 * Puts in a fresh data directory the record that the API accepted `apiKey` (asked once per key
 * before the rounds): a worker's start asks the API about its key once a day (src/cli/api-key-check.ts),
 * so every run of a user's data directory but the day's first starts without that round trip, and
 * a fresh one each round would time the day's first run only.
 */
const acceptedKeys = new Map();
async function acceptKey(apiKey) {
  const template = mkdtempSync(join(tmpdir(), 'bench-peer-key-'));
  const saved = { base: process.env.SOCIAL_API_BASE_URL, key: process.env.SOCIAL_API_KEY };
  Object.assign(process.env, { SOCIAL_API_BASE_URL: baseUrl, SOCIAL_API_KEY: apiKey });
  try {
    await assertApiKeyAccepted(createLogger({ level: 'silent' }), template);
  } finally {
    for (const [name, value] of [['SOCIAL_API_BASE_URL', saved.base], ['SOCIAL_API_KEY', saved.key]]) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  }
  acceptedKeys.set(apiKey, template);
}
function withAcceptedKey(dataDir, apiKey) {
  const record = apiKeyAcceptedFile(dataDir);
  mkdirSync(dirname(record), { recursive: true });
  copyFileSync(apiKeyAcceptedFile(acceptedKeys.get(apiKey)), record);
}

async function harvesterRun(workload, label, { standing }) {
  const dir = mkdtempSync(join(tmpdir(), 'bench-peer-harvester-'));
  let treeRss;
  try {
    if (standing) {
      rmSync(standing.dataDir, { recursive: true, force: true });
      mkdirSync(standing.dataDir);
    }
    const config = join(dir, 'harvests.yaml');
    writeFileSync(config, harvestYaml(workload));
    if (!standing) withAcceptedKey(join(dir, 'data'), KEYS.harvester);
    const args = ['--import', MAX_RSS_PRELOAD, CLI, 'run', `peer-${workload.name}`, '--config', config, '--json', ...workload.runFlags, ...(standing ? ['--no-local-worker'] : [])];
    // The standing worker's tree (the worker and its load process), sampled through the run.
    treeRss = standing && standingWorker ? sampleTreeRss(standingWorker.pid) : undefined;
    const { stdout, stderr, seconds, spawnedAt, exitedAt } = await timedCommand(process.execPath, args, {
      cwd: root,
      env: {
        ...process.env,
        TEMPORAL_ADDRESS: `127.0.0.1:${port}`,
        TEMPORAL_HTTP_ADDRESS: `127.0.0.1:${httpPort}`,
        SOCIAL_API_BASE_URL: standing?.apiBaseUrl ?? baseUrl,
        SOCIAL_API_KEY: standing?.apiKey ?? KEYS.harvester,
        HARVESTER_DATA_DIR: standing?.dataDir ?? join(dir, 'data'),
        HARVESTER_TASK_QUEUE: standing?.queue ?? `peer-${label}`,
        LOG_LEVEL: 'error',
      },
    });
    const summary = JSON.parse(stdout);
    const maxRssKib = Number(/^max-rss-kib (\d+)$/m.exec(stderr)?.[1]);
    const workflowId = /^started (\S+)$/m.exec(stderr)?.[1];
    if (!workflowId) throw new Error(`harvester run printed no "started <workflow id>" line; stderr: ${stderr}`);
    if (summary.status !== 'completed' || summary.itemsLanded !== workload.items || summary.enrichment.calls !== workload.statsCalls) {
      throw new Error(`harvester ${label}: ${summary.status}, ${summary.itemsLanded} items and ${summary.enrichment.calls} enrichment calls; expected completed, ${workload.items} and ${workload.statsCalls}`);
    }
    // Every event of the run's workflow, continue-as-new included: counted, and read for its phases.
    const history = await allEvents(env.client, workflowId);
    return {
      seconds,
      inRun: (Date.parse(summary.finishedAt) - Date.parse(summary.startedAt)) / 1000,
      items: summary.itemsLanded,
      stats: summary.enrichment.calls,
      events: history.length,
      maxRssMb: (maxRssKib * 1024) / 1e6,
      phases: runPhases(history, { spawnedAt, exitedAt }),
      ...(treeRss ? { treePeakMb: treeRss.stop() / 1e6 } : {}),
    };
  } finally {
    treeRss?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

const run = {
  harvester: (workload, label) => harvesterRun(workload, label, { standing: undefined }),
  'harvester-worker': (workload, label) => harvesterRun(workload, label, { standing: { apiBaseUrl: baseUrl, apiKey: KEYS['harvester-worker'], dataDir: standingDataDir, queue: STANDING_QUEUE } }),

  async dlt(workload) {
    const dir = mkdtempSync(join(tmpdir(), 'bench-peer-dlt-'));
    try {
      const spec = { base_url: baseUrl, api_key: KEYS.dlt, workload: workload.name, handles: workload.handles, per_channel: workload.perChannel, workers: DLT_WORKERS, dir };
      const { stdout, seconds } = await timedCommand(PYTHON, [join(root, 'bench', 'peer_dlt.py'), JSON.stringify(spec)], {
        cwd: dir,
        env: { ...process.env, PYTHONPATH: DLT_TARGET, PYTHONNOUSERSITE: '1', DLT_DATA_DIR: join(dir, 'dlt') },
      });
      const result = JSON.parse(stdout.trim().split('\n').at(-1));
      const rows = Object.entries(result.rows);
      return {
        seconds,
        inRun: result.seconds,
        extract: result.steps.extract,
        items: rows.filter(([table]) => table !== 'stats').reduce((sum, [, count]) => sum + count, 0),
        stats: result.rows.stats ?? 0,
      };
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },

  async bare(workload, label) {
    const started = process.hrtime.bigint();
    const landed = await bareLoop(workload, KEYS.bare);
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    if (landed.items !== workload.items || landed.stats !== workload.statsCalls) throw new Error(`bare ${label}: ${landed.items} items, ${landed.stats} stats`);
    return { seconds, inRun: seconds, ...landed };
  },
};

/**
 * The first `count` TikTok handles of the emulator's world whose channels hold at least `min`
 * videos: the catalog's handles first, then the world's other accounts, named as the emulator's
 * World names them (the catalog lists 12; the wide workload needs 32 channels).
 */
async function channelsWith(min, count) {
  const world = new World(EMULATOR_DEFAULTS.seed, 0);
  const found = [];
  for (let index = 0; found.length < count && index < world.accountsPerPlatform; index++) {
    const handle = world.account('tiktok', index).handle;
    const profile = await api(`tiktok/channel-stats?handle=${encodeURIComponent(handle)}`, KEYS.check);
    if (profile.data.metrics.posts >= min) found.push(handle);
  }
  if (found.length < count) throw new Error(`only ${found.length} channels have ${min} videos: ${found.join(', ')}`);
  return found;
}

function workloadOf(name, title, handles, perChannel, stats, concurrency, runFlags, contenders) {
  const items = handles.length * perChannel;
  const statsCalls = stats ? items : 0;
  const credits = items * prices['tiktok/channel-videos'] + statsCalls * prices['tiktok/stats'];
  return { name, title, handles, perChannel, stats, items, statsCalls, credits, concurrency, runFlags, contenders, wide: runFlags.length > 0 };
}

/**
 * The rate-limited case: an emulator here at LIMITED_RATE requests per second per key, a standing
 * worker of its own, and a 2,000-call enrichment by that worker and by the API client alone. Every
 * request the emulator answers is counted by status as its HTTP server sees it.
 */
async function rateLimitedCase() {
  const limited = await startEmulator({ host: '127.0.0.1', port: 0, apiKeys: Object.values(LIMITED_KEYS), rateLimit: LIMITED_RATE, credits: 1_000_000_000, cursorTtlSeconds: 86_400 });
  const limitedPort = Number(new URL(limited.origin).port);
  let counted = { byStatus: new Map(), firstMs: undefined, lastMs: undefined };
  const ours = ({ request: incoming }) => incoming.socket.localPort === limitedPort && incoming.url.startsWith('/v1/');
  const onStart = (message) => {
    if (ours(message)) counted.firstMs ??= performance.now();
  };
  const onFinish = (message) => {
    if (!ours(message)) return;
    counted.lastMs = performance.now();
    const status = message.response.statusCode;
    counted.byStatus.set(status, (counted.byStatus.get(status) ?? 0) + 1);
  };
  diagnostics.subscribe('http.server.request.start', onStart);
  diagnostics.subscribe('http.server.response.finish', onFinish);
  const dataDir = mkdtempSync(join(tmpdir(), 'bench-peer-limited-'));
  let worker;
  const checkClient = new SocialApiClient({ baseUrl: limited.baseUrl, apiKey: LIMITED_KEYS.check, prices });
  try {
    let handle;
    for (const candidate of (await (await fetch(`${limited.origin}/_emulator/catalog`)).json()).data.tiktok.handles) {
      if ((await checkClient.get('tiktok', 'channel-stats', { handle: candidate })).data.metrics.posts >= LIMITED_CALLS) {
        handle = candidate;
        break;
      }
    }
    if (!handle) throw new Error(`no catalog channel has ${LIMITED_CALLS} videos (BENCH_LIMITED_CALLS)`);
    const workload = workloadOf('limited', `limited: ${LIMITED_CALLS} videos of one channel + one stats call each, the API at ${LIMITED_RATE} requests/s`, [handle], LIMITED_CALLS, true, { targets: DEFAULT_CONCURRENCY.targets, calls: WIDE_CALLS }, ['--calls', String(WIDE_CALLS)], []);
    const standing = { apiBaseUrl: limited.baseUrl, apiKey: LIMITED_KEYS['harvester-worker'], dataDir, queue: 'peer-limited' };
    worker = await startStandingWorker(standing);
    const contenders = {
      'harvester-worker': () => harvesterRun(workload, 'limited-harvester-worker', { standing }),
      async client() {
        const client = new SocialApiClient({ baseUrl: limited.baseUrl, apiKey: LIMITED_KEYS.client, prices });
        try {
          const urls = [];
          for await (const page of client.pages('tiktok', 'channel-videos', { handle }, { maxItems: LIMITED_CALLS })) urls.push(...page.items.map((video) => video.url));
          await inFlightLoop(urls.length, WIDE_CALLS, (index) => client.get('tiktok', 'stats', { url: urls[index] }));
          return { items: urls.length, stats: urls.length };
        } finally {
          await client.close();
        }
      },
    };
    const results = {};
    for (const [name, contend] of Object.entries(contenders)) {
      counted = { byStatus: new Map(), firstMs: undefined, lastMs: undefined };
      const landed = await contend();
      if (landed.items !== workload.items || landed.stats !== workload.statsCalls) throw new Error(`limited ${name}: ${landed.items} items, ${landed.stats} stats`);
      const requests = [...counted.byStatus.values()].reduce((sum, count) => sum + count, 0);
      const seconds = (counted.lastMs - counted.firstMs) / 1000;
      results[name] = { requests, answered: counted.byStatus.get(200) ?? 0, refused: counted.byStatus.get(429) ?? 0, seconds, maxRssMb: landed.maxRssMb };
      process.stderr.write(`limited-${name}: ${requests} requests in ${seconds.toFixed(1)} s, ${results[name].refused} answered 429\n`);
    }
    return { workload, results };
  } finally {
    diagnostics.unsubscribe('http.server.request.start', onStart);
    diagnostics.unsubscribe('http.server.response.finish', onFinish);
    worker?.kill('SIGTERM');
    await checkClient.close();
    await limited.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

// The dev server and the emulators go away also when the set-up or a contender fails.
let channelHandles;
let cases = [];
let limitedResult;
let standingWorker;
try {
  standingWorker = await startStandingWorker();
  // Same data for everyone: the first channels that hold at least 400 videos (the catalog's first),
  // for enrich the first that holds max(400, BENCH_ENRICHED).
  const wideHandles = ROUND_WORKLOADS.includes('wide-channels') ? await channelsWith(PER_CHANNEL, WIDE_TARGETS) : await channelsWith(PER_CHANNEL, CHANNELS);
  channelHandles = wideHandles.slice(0, CHANNELS);
  const [enrichHandle] = await channelsWith(Math.max(PER_CHANNEL, ENRICHED, WIDE_ENRICHED), 1);
  const workloads = {
    channels: workloadOf('channels', `channels: ${CHANNELS} TikTok channels × ${PER_CHANNEL} videos`, channelHandles, PER_CHANNEL, false, DEFAULT_CONCURRENCY, [], CONTENDERS),
    enrich: workloadOf('enrich', `enrich: ${ENRICHED} videos of one channel + one stats call each`, [enrichHandle], ENRICHED, true, DEFAULT_CONCURRENCY, [], CONTENDERS),
    'wide-channels': workloadOf('wide-channels', `wide-channels: ${WIDE_TARGETS} TikTok channels × ${PER_CHANNEL} videos, --targets ${WIDE_TARGETS}`, wideHandles, PER_CHANNEL, false, { ...DEFAULT_CONCURRENCY, targets: WIDE_TARGETS }, ['--targets', String(WIDE_TARGETS)], ['harvester', 'harvester-worker', 'bare']),
    'wide-enrich': workloadOf('wide-enrich', `wide-enrich: ${WIDE_ENRICHED} videos of one channel + one stats call each, --calls ${WIDE_CALLS}`, [enrichHandle], WIDE_ENRICHED, true, { ...DEFAULT_CONCURRENCY, calls: WIDE_CALLS }, ['--calls', String(WIDE_CALLS)], ['harvester', 'harvester-worker', 'bare']),
  };

  await acceptKey(KEYS.harvester);
  // Warm-up, untimed: one pass over every workload's calls, so the emulator's caches hold every
  // page and stats answer before anyone is timed, and each channel is checked to list 400 videos.
  await admin('POST', 'faults', { latency_ms: 0 });
  for (const handle of wideHandles) {
    const ids = new Set((await listVideos(handle, PER_CHANNEL, KEYS.check)).map((video) => video.id));
    if (ids.size !== PER_CHANNEL) throw new Error(`channel ${handle} listed ${ids.size} distinct videos, not ${PER_CHANNEL}`);
  }
  await bareLoop(ENRICHED >= WIDE_ENRICHED ? workloads.enrich : workloads['wide-enrich'], KEYS.check);

  cases = LATENCIES.flatMap((latencyMs) => ROUND_WORKLOADS.map((name) => ({ latencyMs, workload: workloads[name], results: Object.fromEntries(workloads[name].contenders.map((c) => [c, []])) })));
  for (let round = 0; round < ROUNDS; round++) {
    const order = CONTENDERS.map((_, index) => CONTENDERS[(index + round) % CONTENDERS.length]);
    for (const benchCase of cases) {
      await admin('POST', 'faults', { latency_ms: benchCase.latencyMs });
      for (const contender of order.filter((c) => benchCase.workload.contenders.includes(c))) {
        const label = `${benchCase.workload.name}-${benchCase.latencyMs}ms-r${round + 1}-${contender}`;
        const before = await creditsCharged(KEYS[contender]);
        const result = await run[contender](benchCase.workload, label);
        result.credits = (await creditsCharged(KEYS[contender])) - before;
        benchCase.results[contender].push(result);
        process.stderr.write(`${label}: ${result.seconds.toFixed(2)} s (in-run ${result.inRun.toFixed(2)} s), ${result.items} items, ${result.stats} stats, ${result.credits} credits${result.events === undefined ? '' : `, ${result.events} history events`}${result.maxRssMb === undefined ? '' : `, peak RSS ${result.maxRssMb.toFixed(0)} MB`}\n`);
      }
    }
  }
  if (WORKLOADS.includes('limited')) limitedResult = await rateLimitedCase();
} finally {
  standingWorker?.kill('SIGTERM');
  rmSync(standingDataDir, { recursive: true, force: true });
  for (const template of acceptedKeys.values()) rmSync(template, { recursive: true, force: true });
  await env.teardown();
  await agent.close();
  emulator.kill('SIGTERM');
}

const verdict = (ok) => (ok ? 'PASS' : 'FAIL');
const s = (seconds) => seconds.toFixed(2);

/** The bare-loop target of a harvester in a case: issue 18's for the wide workloads and the standing worker at 0 ms, else issue 10's. */
function bareTarget(workload, latencyMs, harvester) {
  if (workload.wide) return { ratio: 1.4, issue: 18 };
  if (latencyMs === 0 && harvester === 'harvester-worker') return { ratio: 2, issue: 18 };
  return { ratio: 1.5, issue: 10 };
}

console.log(`peer benchmark: ${ROUNDS} round(s), dlt ${DLT_VERSION} rest_api (parallelized, ${DLT_WORKERS} extract workers), harvester concurrency block in YAML: ${HARVESTER_CONCURRENCY ? 'yes' : 'no (engine defaults, or the wide workloads\' flags)'}, node ${process.version}, channels ${channelHandles.join(', ')}`);
for (const { latencyMs, workload, results } of cases) {
  const contenders = workload.contenders;
  const med = Object.fromEntries(contenders.map((c) => [c, { wall: median(results[c].map((r) => r.seconds)), inRun: median(results[c].map((r) => r.inRun)) }]));
  const eventsTarget = workload.stats ? 50 : 20;
  const dltTarget = latencyMs >= 250 ? 3 : 1;
  console.log(`\n### ${workload.title}, latency ${latencyMs} ms\n`);
  console.log(`The bare loop: ${workload.stats ? `${workload.concurrency.calls} stats calls in flight after the listing` : `${workload.concurrency.targets} channels listed at once`}.\n`);
  console.log('| contender | wall s, median | wall s, min–max | in-run s, median | items landed | stats landed | credits charged / expected |');
  console.log('|---|---|---|---|---|---|---|');
  for (const c of contenders) {
    const walls = results[c].map((r) => r.seconds);
    const last = results[c].at(-1);
    const credits = results[c].map((r) => r.credits);
    const creditsShown = new Set(credits).size === 1 ? String(credits[0]) : credits.join(', ');
    console.log(`| ${c} | ${s(med[c].wall)} | ${s(Math.min(...walls))}–${s(Math.max(...walls))} | ${s(med[c].inRun)} | ${last.items} | ${last.stats} | ${creditsShown} / ${workload.credits} |`);
  }
  console.log('');
  if (med.dlt) console.log(`- dlt's extract step alone (the API calls): ${s(median(results.dlt.map((r) => r.extract)))} s, median`);
  for (const h of HARVESTERS) {
    const bareRatio = med[h].wall / med.bare.wall;
    const target = bareTarget(workload, latencyMs, h);
    const events = median(results[h].map((r) => (r.events / r.items) * 1000));
    if (med.dlt) {
      const dltRatio = med.dlt.wall / med[h].wall;
      console.log(`- dlt / ${h}, wall: ${dltRatio.toFixed(2)}× (target ≥ ${dltTarget}×): ${verdict(dltRatio >= dltTarget)}; in-run: ${(med.dlt.inRun / med[h].inRun).toFixed(2)}×`);
    }
    console.log(`- ${h} / bare, wall: ${bareRatio.toFixed(2)}× (target ≤ ${target.ratio}×, issue ${target.issue}): ${verdict(bareRatio <= target.ratio)}; in-run: ${(med[h].inRun / med.bare.inRun).toFixed(2)}×`);
    console.log(`- ${h} history events per 1,000 items: ${events.toFixed(1)} (${results[h].map((r) => r.events).join(', ')} events for ${workload.items} items; target ≤ ${eventsTarget}): ${verdict(events <= eventsTarget)}`);
  }
  const tree = results['harvester-worker'].flatMap((r) => (r.treePeakMb === undefined ? [] : [r.treePeakMb]));
  if (tree.length > 0) console.log(`- the standing worker's tree (worker and load process) peak RSS during its runs: ${median(tree).toFixed(0)} MB median (${Math.min(...tree).toFixed(0)}–${Math.max(...tree).toFixed(0)}; target < 400 MiB = 419 MB, issue 40): ${verdict(median(tree) < 419.4)}`);
  const rss = results['harvester-worker'].map((r) => r.maxRssMb);
  console.log(`- \`run --no-local-worker\` peak RSS: ${median(rss).toFixed(0)} MB median (${Math.min(...rss).toFixed(0)}–${Math.max(...rss).toFixed(0)}; target ≤ 60 MB, issue 18): ${verdict(median(rss) <= 60)}`);
  console.log(`\nWhere the harvester's time went (issue 40): phases from the run's Temporal history and the command's start and exit; the final load's steps from finishRun's result (\`load/…\` are the load process's; \`transaction\` holds merge, record … and the sync of new files).\n`);
  console.log(phaseTable(`${workload.name}@${latencyMs}`, Object.fromEntries(HARVESTERS.map((h) => [h, medianPhases(results[h].map((r) => r.phases))]))));
}
keepPhases();

if (limitedResult) {
  const { workload, results } = limitedResult;
  console.log(`\n### ${workload.title}\n`);
  console.log('A standing worker at `--calls 64`, and the API client alone (SocialApiClient, 64 stats calls in flight after the listing). Requests as the emulator answered them, first request to last.\n');
  console.log('| contender | requests | answered 200 | answered 429 | seconds | answered 200 per second |');
  console.log('|---|---|---|---|---|---|');
  for (const [name, r] of Object.entries(results)) console.log(`| ${name} | ${r.requests} | ${r.answered} | ${r.refused} (${((r.refused / r.requests) * 100).toFixed(2)} %) | ${r.seconds.toFixed(1)} | ${(r.answered / r.seconds).toFixed(1)} |`);
  console.log('');
  for (const [name, r] of Object.entries(results)) {
    const rate = r.answered / r.seconds;
    const share = r.refused / r.requests;
    console.log(`- ${name}: ${rate.toFixed(1)} requests/s sustained (target ≥ ${(LIMITED_RATE * 0.9).toFixed(0)}, issue 18): ${verdict(rate >= LIMITED_RATE * 0.9)}; ${(share * 100).toFixed(2)} % answered 429 (target ≤ 1 %): ${verdict(share <= 0.01)}`);
  }
}
