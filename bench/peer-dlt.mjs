#!/usr/bin/env node
/**
 * Peer benchmark (issue 10): the harvester against dlt, the tool users would pick instead, and
 * against a bare client loop, on the same emulator data. Two workloads, each at API latency 0 and
 * 250 ms:
 *   channels  8 TikTok channels × 400 videos (channel-videos, pages of 50, following cursors)
 *   enrich    200 videos of one channel (BENCH_ENRICHED), then one stats call per video
 * Four contenders per case, interleaved over BENCH_ROUNDS rounds, the first one rotating:
 *   harvester         `node dist/src/cli/main.js run <harvest> --config <yaml> --json` with its local
 *                     worker, on a fresh data directory (nothing incremental)
 *   harvester-worker  the same with `--no-local-worker`, handed to a `harvester worker` the benchmark
 *                     started once before the rounds (as a deployed worker runs), its data directory
 *                     emptied before each run
 *   dlt               dlt 1.31.0's `rest_api` source into DuckDB, parallelized (bench/peer_dlt.py)
 *   bare              an undici loop here, no Temporal and no warehouse, at the harvester's default
 *                     concurrency (8 channels at once; 16 stats calls in flight after the listing)
 * Every contender must land exactly the expected items; credits are read from the emulator's
 * ledger (one API key per contender). Wall time is the whole command for the harvester and dlt
 * (process start-up included); "in-run" is the run's own duration (the harvester's summary,
 * startedAt to finishedAt; dlt's pipeline.run). The harvester's Temporal history events are
 * counted over every run of its workflow (continue-as-new included).
 *
 *   npm run bench:peer                    (= npm run build && node bench/peer-dlt.mjs)
 *   BENCH_ROUNDS=1 BENCH_LATENCIES=250 BENCH_WORKLOADS=channels node bench/peer-dlt.mjs
 *
 * Knobs: BENCH_ROUNDS (default 3), BENCH_LATENCIES (ms, default 0,250), BENCH_WORKLOADS (default
 * channels,enrich), BENCH_ENRICHED (videos in the enrich workload, default 200), BENCH_DLT_WORKERS
 * (dlt's extract threads, default 16),
 * BENCH_HARVESTER_CONCURRENCY=1 (write `concurrency: { targets: 8, calls: 16 }` into the harvest;
 * off by default so the YAML also suits an engine without that key), PYTHON (default python3).
 * The first run installs dlt[duckdb]==1.31.0 from PyPI into .tools/bench-python (pip --target).
 * Exits 0 whether targets pass or fail; 1 only when the benchmark could not run or a contender
 * landed the wrong items.
 */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { Agent, request } from 'undici';
import { startEmulatorProcess } from './emulator-process.mjs';
import { median } from './stats.mjs';
import { startWorkerProcess } from './worker-process.mjs';

const root = new URL('..', import.meta.url).pathname;
const dist = join(root, 'dist');
const CLI = join(dist, 'src', 'cli', 'main.js');
const { loadPriceTable } = await import(join(dist, 'src/config/prices.js'));
const { ephemeralServerOptions } = await import(join(dist, 'src/temporal/dev-server.js'));
const { freePort } = await import(join(dist, 'src/cli/stack.js'));

Runtime.install({ logger: new DefaultLogger('WARN') });

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const LATENCIES = (process.env.BENCH_LATENCIES ?? '0,250').split(',').map(Number);
const WORKLOADS = (process.env.BENCH_WORKLOADS ?? 'channels,enrich').split(',');
const DLT_WORKERS = Number(process.env.BENCH_DLT_WORKERS ?? 16);
const HARVESTER_CONCURRENCY = process.env.BENCH_HARVESTER_CONCURRENCY === '1';
const PYTHON = process.env.PYTHON ?? 'python3';
const DLT_VERSION = '1.31.0';
const DLT_REQUIREMENT = `dlt[duckdb]==${DLT_VERSION}`;
const DLT_TARGET = join(root, '.tools', 'bench-python');

// The harvester's defaults (config/harvests.yaml): the bare loop runs at the same concurrency.
const TARGETS_IN_FLIGHT = 8;
const CALLS_IN_FLIGHT = 16;
const PAGE = 50;
const CHANNELS = 8;
const PER_CHANNEL = 400;
const ENRICHED = Number(process.env.BENCH_ENRICHED ?? 200);
const KEYS = { harvester: 'sk_live_peer_harvester', 'harvester-worker': 'sk_live_peer_standing', dlt: 'sk_live_peer_dlt', bare: 'sk_live_peer_bare', check: 'sk_live_peer_check' };
const CONTENDERS = ['harvester', 'harvester-worker', 'dlt', 'bare'];
const HARVESTERS = ['harvester', 'harvester-worker'];

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
const port = await freePort();
const env = await TestWorkflowEnvironment.createLocal({ server: ephemeralServerOptions(port) });
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

/** The bare contender: the API calls alone, at the harvester's default concurrency. */
async function bareLoop(workload, apiKey) {
  if (workload.name === 'channels') {
    const lists = await Promise.all(workload.handles.map((handle) => listVideos(handle, PER_CHANNEL, apiKey)));
    return { items: lists.reduce((sum, list) => sum + list.length, 0), stats: 0 };
  }
  const videos = await listVideos(workload.handles[0], ENRICHED, apiKey);
  let next = 0;
  let stats = 0;
  const caller = async () => {
    while (next < videos.length) {
      const video = videos[next++];
      await api(`tiktok/stats?url=${encodeURIComponent(video.url)}`, apiKey);
      stats += 1;
    }
  };
  await Promise.all(Array.from({ length: CALLS_IN_FLIGHT }, caller));
  return { items: videos.length, stats };
}

function harvestYaml(workload) {
  const lines = ['harvests:', `  - name: peer-${workload.name}`, '    budget: { credits: 1000000 }', '    # Above every target: listed page by page, never as an async job.', '    job_threshold: 1000', '    channels:'];
  for (const handle of workload.handles) lines.push(`      - { platform: tiktok, handle: ${handle}, content: videos, max_items: ${workload.perChannel} }`);
  if (workload.stats) lines.push('    enrich: { stats: true }');
  if (HARVESTER_CONCURRENCY) lines.push(`    concurrency: { targets: ${TARGETS_IN_FLIGHT}, calls: ${CALLS_IN_FLIGHT} }`);
  return `${lines.join('\n')}\n`;
}

/** Runs a command to its end; resolves with its output and wall seconds, rejects on a non-zero exit. */
function timedCommand(command, args, options) {
  return new Promise((resolve, reject) => {
    const started = process.hrtime.bigint();
    const child = spawn(command, args, { ...options, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk) => (stderr += chunk));
    child.once('error', reject);
    child.once('close', (code) => {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      if (code === 0) resolve({ stdout, stderr, seconds });
      else reject(new Error(`${command} ${args.join(' ')} exited ${code}\n${stderr.slice(-4000)}`));
    });
  });
}

/** History events of a workflow over all its runs, walking continue-as-new back from the latest. */
async function historyEvents(workflowId) {
  let { runId } = await env.client.workflow.getHandle(workflowId).describe();
  let events = 0;
  while (runId) {
    const history = await env.client.workflow.getHandle(workflowId, runId).fetchHistory();
    events += history.events.length;
    runId = history.events[0]?.workflowExecutionStartedEventAttributes?.continuedExecutionRunId || undefined;
  }
  return events;
}

const STANDING_QUEUE = 'peer-standing';
const standingDataDir = mkdtempSync(join(tmpdir(), 'bench-peer-standing-'));

/**
 * The standing worker: `harvester worker`, started once before the rounds (untimed, as a deployed
 * worker would be), which `harvester run --no-local-worker` hands its runs to. Its data directory
 * is emptied before each of its runs, so every run starts fresh as the local-worker runs do.
 */
function startStandingWorker() {
  return startWorkerProcess({
    cwd: root,
    env: { ...process.env, TEMPORAL_ADDRESS: `127.0.0.1:${port}`, SOCIAL_API_BASE_URL: baseUrl, SOCIAL_API_KEY: KEYS['harvester-worker'], HARVESTER_DATA_DIR: standingDataDir, HARVESTER_TASK_QUEUE: STANDING_QUEUE, LOG_LEVEL: 'error' },
  });
}

async function harvesterRun(workload, label, { standing }) {
  const dir = mkdtempSync(join(tmpdir(), 'bench-peer-harvester-'));
  try {
    if (standing) {
      rmSync(standingDataDir, { recursive: true, force: true });
      mkdirSync(standingDataDir);
    }
    const config = join(dir, 'harvests.yaml');
    writeFileSync(config, harvestYaml(workload));
    const args = [CLI, 'run', `peer-${workload.name}`, '--config', config, '--json', ...(standing ? ['--no-local-worker'] : [])];
    const { stdout, stderr, seconds } = await timedCommand(process.execPath, args, {
      cwd: root,
      env: {
        ...process.env,
        TEMPORAL_ADDRESS: `127.0.0.1:${port}`,
        SOCIAL_API_BASE_URL: baseUrl,
        SOCIAL_API_KEY: KEYS[standing ? 'harvester-worker' : 'harvester'],
        HARVESTER_DATA_DIR: standing ? standingDataDir : join(dir, 'data'),
        HARVESTER_TASK_QUEUE: standing ? STANDING_QUEUE : `peer-${label}`,
        LOG_LEVEL: 'error',
      },
    });
    const summary = JSON.parse(stdout);
    const workflowId = /^started (\S+)$/m.exec(stderr)?.[1];
    if (!workflowId) throw new Error(`harvester run printed no "started <workflow id>" line; stderr: ${stderr}`);
    if (summary.status !== 'completed' || summary.itemsLanded !== workload.items || summary.enrichment.calls !== workload.statsCalls) {
      throw new Error(`harvester ${label}: ${summary.status}, ${summary.itemsLanded} items and ${summary.enrichment.calls} enrichment calls; expected completed, ${workload.items} and ${workload.statsCalls}`);
    }
    return {
      seconds,
      inRun: (Date.parse(summary.finishedAt) - Date.parse(summary.startedAt)) / 1000,
      items: summary.itemsLanded,
      stats: summary.enrichment.calls,
      events: await historyEvents(workflowId),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const run = {
  harvester: (workload, label) => harvesterRun(workload, label, { standing: false }),
  'harvester-worker': (workload, label) => harvesterRun(workload, label, { standing: true }),

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

// The dev server and the emulator go away also when the set-up or a contender fails.
let handles;
let workloads;
let cases;
let standingWorker;
try {
  standingWorker = await startStandingWorker();
  // Same data for everyone: the emulator's catalog handles whose channels hold at least 400 videos,
  // and for enrich the first that holds max(400, BENCH_ENRICHED) (the channels' first by default).
  const catalog = await admin('GET', 'catalog');
  handles = [];
  let enrichHandle;
  for (const handle of catalog.tiktok.handles) {
    const profile = await api(`tiktok/channel-stats?handle=${encodeURIComponent(handle)}`, KEYS.check);
    const posts = profile.data.metrics.posts;
    if (posts >= PER_CHANNEL && handles.length < CHANNELS) handles.push(handle);
    if (posts >= Math.max(PER_CHANNEL, ENRICHED)) enrichHandle ??= handle;
    if (handles.length === CHANNELS && enrichHandle) break;
  }
  if (handles.length < CHANNELS) throw new Error(`only ${handles.length} catalog channels have ${PER_CHANNEL} videos: ${handles.join(', ')}`);
  if (!enrichHandle) throw new Error(`no catalog channel has ${ENRICHED} videos (BENCH_ENRICHED)`);

  workloads = {
    channels: { name: 'channels', title: `channels: ${CHANNELS} TikTok channels × ${PER_CHANNEL} videos`, handles, perChannel: PER_CHANNEL, stats: false, items: CHANNELS * PER_CHANNEL, statsCalls: 0 },
    enrich: { name: 'enrich', title: `enrich: ${ENRICHED} videos of one channel + one stats call each`, handles: [enrichHandle], perChannel: ENRICHED, stats: true, items: ENRICHED, statsCalls: ENRICHED },
  };
  for (const workload of Object.values(workloads)) {
    workload.credits = workload.items * prices['tiktok/channel-videos'] + workload.statsCalls * prices['tiktok/stats'];
  }

  // Warm-up, untimed: one pass over every workload's calls, so the emulator's caches hold every
  // page and stats answer before anyone is timed, and each channel is checked to list 400 videos.
  await admin('POST', 'faults', { latency_ms: 0 });
  for (const handle of handles) {
    const ids = new Set((await listVideos(handle, PER_CHANNEL, KEYS.check)).map((video) => video.id));
    if (ids.size !== PER_CHANNEL) throw new Error(`channel ${handle} listed ${ids.size} distinct videos, not ${PER_CHANNEL}`);
  }
  await bareLoop(workloads.enrich, KEYS.check);

  cases = LATENCIES.flatMap((latencyMs) => WORKLOADS.map((name) => ({ latencyMs, workload: workloads[name], results: Object.fromEntries(CONTENDERS.map((c) => [c, []])) })));
  for (let round = 0; round < ROUNDS; round++) {
    const order = CONTENDERS.map((_, index) => CONTENDERS[(index + round) % CONTENDERS.length]);
    for (const benchCase of cases) {
      await admin('POST', 'faults', { latency_ms: benchCase.latencyMs });
      for (const contender of order) {
        const label = `${benchCase.workload.name}-${benchCase.latencyMs}ms-r${round + 1}-${contender}`;
        const before = await creditsCharged(KEYS[contender]);
        const result = await run[contender](benchCase.workload, label);
        result.credits = (await creditsCharged(KEYS[contender])) - before;
        benchCase.results[contender].push(result);
        process.stderr.write(`${label}: ${result.seconds.toFixed(2)} s (in-run ${result.inRun.toFixed(2)} s), ${result.items} items, ${result.stats} stats, ${result.credits} credits${result.events === undefined ? '' : `, ${result.events} history events`}\n`);
      }
    }
  }
} finally {
  standingWorker?.kill('SIGTERM');
  rmSync(standingDataDir, { recursive: true, force: true });
  await env.teardown();
  await agent.close();
  emulator.kill('SIGTERM');
}

const verdict = (ok) => (ok ? 'PASS' : 'FAIL');
const s = (seconds) => seconds.toFixed(2);

console.log(`peer benchmark: ${ROUNDS} round(s), dlt ${DLT_VERSION} rest_api (parallelized, ${DLT_WORKERS} extract workers), harvester concurrency block in YAML: ${HARVESTER_CONCURRENCY ? 'yes' : 'no (engine defaults)'}, node ${process.version}, channels ${handles.join(', ')}`);
for (const { latencyMs, workload, results } of cases) {
  const med = Object.fromEntries(CONTENDERS.map((c) => [c, { wall: median(results[c].map((r) => r.seconds)), inRun: median(results[c].map((r) => r.inRun)) }]));
  const eventsTarget = workload.stats ? 50 : 20;
  const dltTarget = latencyMs >= 250 ? 3 : 1;
  console.log(`\n### ${workload.title}, latency ${latencyMs} ms\n`);
  console.log('| contender | wall s, median | wall s, min–max | in-run s, median | items landed | stats landed | credits charged / expected |');
  console.log('|---|---|---|---|---|---|---|');
  for (const c of CONTENDERS) {
    const walls = results[c].map((r) => r.seconds);
    const last = results[c].at(-1);
    const credits = results[c].map((r) => r.credits);
    const creditsShown = new Set(credits).size === 1 ? String(credits[0]) : credits.join(', ');
    console.log(`| ${c} | ${s(med[c].wall)} | ${s(Math.min(...walls))}–${s(Math.max(...walls))} | ${s(med[c].inRun)} | ${last.items} | ${last.stats} | ${creditsShown} / ${workload.credits} |`);
  }
  console.log('');
  console.log(`- dlt's extract step alone (the API calls): ${s(median(results.dlt.map((r) => r.extract)))} s, median`);
  for (const h of HARVESTERS) {
    const dltRatio = med.dlt.wall / med[h].wall;
    const bareRatio = med[h].wall / med.bare.wall;
    const events = median(results[h].map((r) => (r.events / r.items) * 1000));
    console.log(`- dlt / ${h}, wall: ${dltRatio.toFixed(2)}× (target ≥ ${dltTarget}×): ${verdict(dltRatio >= dltTarget)}; in-run: ${(med.dlt.inRun / med[h].inRun).toFixed(2)}×`);
    console.log(`- ${h} / bare, wall: ${bareRatio.toFixed(2)}× (target ≤ 1.5×): ${verdict(bareRatio <= 1.5)}; in-run: ${(med[h].inRun / med.bare.inRun).toFixed(2)}×`);
    console.log(`- ${h} history events per 1,000 items: ${events.toFixed(1)} (${results[h].map((r) => r.events).join(', ')} events for ${workload.items} items; target ≤ ${eventsTarget}): ${verdict(events <= eventsTarget)}`);
  }
}
