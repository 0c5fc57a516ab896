#!/usr/bin/env node
/**
 * End-to-end harvest benchmark at two sizes: harvests of searches of 10,000 results each (taken as
 * async jobs), on a real Temporal dev server, the emulator and a `harvester worker` process, first
 * of BENCH_SIZES[0] items and then of BENCH_SIZES[1] (default 100,000 and 1,000,000). For each it
 * reports items per second end to end, credits spent against credits needed, the worker's peak
 * RSS (flat as items grow, or not), and the Temporal history events per 1,000 items. The baseline,
 * in the same run, is a bare client loop pulling the first size's jobs with no Temporal and no
 * warehouse.
 *
 *   npm run build && node bench/harvest-e2e.mjs          (BENCH_SIZES=100000,1000000 by default)
 *   BENCH_CONCURRENCY=32,64 node bench/harvest-e2e.mjs   (the runs' targets and calls; the harvest's defaults otherwise)
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { startEmulatorProcess } from './emulator-process.mjs';
import { allEvents } from './run-phases.mjs';

const root = new URL('..', import.meta.url).pathname;
const dist = join(root, 'dist');
const CLI = join(dist, 'src', 'cli', 'main.js');
const { SocialApiClient } = await import(join(dist, 'src/api/client.js'));
const { loadPriceTable } = await import(join(dist, 'src/config/prices.js'));
const { parseHarvestConfig } = await import(join(dist, 'src/config/harvest-config.js'));
const { ephemeralServerOptions } = await import(join(dist, 'src/temporal/dev-server.js'));
const { freePort } = await import(join(dist, 'src/cli/free-port.js'));
const { WORKER_NODE_FLAGS: STACK_WORKER_NODE_FLAGS } = await import(join(dist, 'src/cli/stack.js'));
const { TOPICS, hashtagOf } = await import(join(dist, 'src/emulator/world/vocabulary.js'));

Runtime.install({ logger: new DefaultLogger('WARN') });
const PER_TARGET = 10_000;
const SIZES = (process.env.BENCH_SIZES ?? '100000,1000000').split(',').map(Number);
const prices = loadPriceTable();
/** Node flags of the worker process: the stack's (src/cli/stack.ts) unless BENCH_WORKER_NODE_FLAGS says otherwise ('' for none). */
const WORKER_NODE_FLAGS = process.env.BENCH_WORKER_NODE_FLAGS === undefined ? STACK_WORKER_NODE_FLAGS : process.env.BENCH_WORKER_NODE_FLAGS.split(' ').filter(Boolean);
/** The runs' concurrency (`targets,calls`, as `harvester run --targets --calls` gives it), or the harvest's defaults. */
const CONCURRENCY = process.env.BENCH_CONCURRENCY ? Object.fromEntries(['targets', 'calls'].map((key, index) => [key, Number(process.env.BENCH_CONCURRENCY.split(',')[index])])) : undefined;

const { child: emulator, baseUrl, origin } = await startEmulatorProcess([
  '--credits', '1000000000', '--rate-limit', '100000', '--job-step-ms', '50', '--api-key', 'sk_live_bench_harvest', '--api-key', 'sk_live_bench_baseline',
]);
const catalog = (await (await fetch(`${origin}/_emulator/catalog`)).json()).data;

/**
 * `count` search targets of PER_TARGET results, each distinct: keyword and hashtag searches of
 * every topic of the emulator's world on tiktok, then reels searches on instagram (120 in all).
 */
function searchTargets(count) {
  const kinds = [
    (topic) => ({ line: `{ platform: tiktok, query: "${topic}", max_results: ${PER_TARGET} }`, endpoint: 'tiktok/search' }),
    (topic) => ({ line: `{ platform: tiktok, hashtag: "${hashtagOf(topic)}", max_results: ${PER_TARGET} }`, endpoint: 'tiktok/hashtag-search' }),
    (topic) => ({ line: `{ platform: instagram, query: "${topic}", max_results: ${PER_TARGET} }`, endpoint: 'instagram/reels-search' }),
  ];
  const targets = kinds.flatMap((kind) => TOPICS.map(kind));
  if (count > targets.length) throw new Error(`at most ${targets.length * PER_TARGET} items: the world has ${TOPICS.length} topics`);
  return targets.slice(0, count);
}

// Baseline: the first size's pulls with the bare client: start each job, wait, page its results.
const baselineClient = new SocialApiClient({ baseUrl, apiKey: 'sk_live_bench_baseline', prices });
let baselineItems = 0;
const baselineStarted = Date.now();
for (const query of catalog.tiktok.queries.slice(0, Math.max(1, SIZES[0] / PER_TARGET))) {
  const { job } = await baselineClient.startJob('tiktok', 'search', { query, limit: PER_TARGET });
  await baselineClient.waitForJob(job.job_id, { pollMinMs: 50, pollMaxMs: 200 });
  for await (const page of baselineClient.jobResults(job.job_id)) baselineItems += page.items.length;
}
const baselineMs = Date.now() - baselineStarted;
await baselineClient.close();
const baselineRate = Math.round(baselineItems / (baselineMs / 1000));

const port = await freePort();
const env = await TestWorkflowEnvironment.createLocal({ server: ephemeralServerOptions(port) });

async function harvestOf(items) {
  const dataDir = mkdtempSync(join(tmpdir(), 'bench-harvest-'));
  const worker = spawn(process.execPath, [...WORKER_NODE_FLAGS, CLI, 'worker'], {
    env: { ...process.env, TEMPORAL_ADDRESS: `127.0.0.1:${port}`, HARVESTER_TASK_QUEUE: 'bench', HARVESTER_DATA_DIR: dataDir, SOCIAL_API_BASE_URL: baseUrl, SOCIAL_API_KEY: 'sk_live_bench_harvest', LOG_LEVEL: 'error' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const peakRss = () => Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${worker.pid}/status`, 'utf8'))?.[1] ?? 0) / 1024;
  const targets = searchTargets(Math.ceil(items / PER_TARGET));
  const harvest = parseHarvestConfig(`harvests:\n  - name: bench\n    budget: { credits: 1000000000 }\n    searches:\n${targets.map((target) => `      - ${target.line}`).join('\n')}\n`, 'bench.yaml').harvests[0];
  const workflowId = `bench-${items}-${Date.now()}`;
  const started = Date.now();
  const summary = await env.client.workflow.execute('harvestWorkflow', { taskQueue: 'bench', workflowId, args: [{ harvest, ...(CONCURRENCY ? { concurrency: CONCURRENCY } : {}) }] });
  const elapsedMs = Date.now() - started;
  const rss = peakRss();
  worker.kill('SIGTERM');
  await new Promise((resolve) => worker.once('exit', resolve));
  const needed = summary.targets.reduce((sum, target, index) => sum + target.items * prices[targets[index].endpoint], 0);
  return { items, summary, elapsedMs, rss, needed, events: (await allEvents(env.client, workflowId)).length };
}

const results = [];
for (const size of SIZES) results.push(await harvestOf(size));
await env.teardown();
emulator.kill('SIGTERM');

console.log(`worker node flags: ${WORKER_NODE_FLAGS.join(' ') || '(none)'}; concurrency: ${CONCURRENCY ? `targets ${CONCURRENCY.targets}, calls ${CONCURRENCY.calls}` : "the harvest's defaults"}`);
console.log(`baseline: bare client pulling ${baselineItems} items of ${Math.round(baselineItems / PER_TARGET)} jobs: ${baselineRate} items/s (${(baselineMs / 1000).toFixed(1)} s)`);
console.log('| harvest | status | items landed | end-to-end items/s | vs baseline | credits spent / needed | worker peak RSS | history events per 1,000 items |');
console.log('|---|---|---|---|---|---|---|---|');
for (const { items, summary, elapsedMs, rss, needed, events } of results) {
  const rate = Math.round(summary.itemsLanded / (elapsedMs / 1000));
  console.log(
    `| ${items} items, ${summary.targets.length} searches as jobs | ${summary.status} | ${summary.itemsLanded} (${(elapsedMs / 1000).toFixed(1)} s, loaded ${summary.landingsLoaded} landings) | ${rate} | ${((rate / baselineRate) * 100).toFixed(0)} % | ${summary.creditsSpent} / ${needed} = ${(summary.creditsSpent / needed).toFixed(3)} | ${rss.toFixed(0)} MiB | ${((events / summary.itemsLanded) * 1000).toFixed(2)} |`,
  );
}
const [small, large] = results;
if (large) console.log(`worker peak RSS grew ${(large.rss - small.rss).toFixed(0)} MiB (${(((large.rss - small.rss) / small.rss) * 100).toFixed(0)} %) from ${small.items} to ${large.items} items (target: at most 250 MiB, flat)`);
