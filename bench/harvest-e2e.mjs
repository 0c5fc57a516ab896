#!/usr/bin/env node
/**
 * End-to-end harvest benchmark: a 100k-item harvest (ten keyword searches of 10,000 results, taken
 * as async jobs) on a real Temporal dev server, the emulator and a `harvester worker` process.
 * It reports items per second end to end, credits spent against credits needed, and the worker's
 * peak RSS; the baseline, in the same run, is a bare client loop pulling the same jobs' items
 * with no Temporal and no warehouse.
 *
 *   npm run build && node bench/harvest-e2e.mjs        (BENCH_RESULTS_PER_QUERY=10000 by default)
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { startEmulatorProcess } from './emulator-process.mjs';

const root = new URL('..', import.meta.url).pathname;
const dist = join(root, 'dist');
const CLI = join(dist, 'src', 'cli', 'main.js');
const { SocialApiClient } = await import(join(dist, 'src/api/client.js'));
const { loadPriceTable } = await import(join(dist, 'src/config/prices.js'));
const { parseHarvestConfig } = await import(join(dist, 'src/config/harvest-config.js'));
const { ephemeralServerOptions } = await import(join(dist, 'src/temporal/dev-server.js'));
const { freePort } = await import(join(dist, 'src/cli/stack.js'));

Runtime.install({ logger: new DefaultLogger('WARN') });
const PER_QUERY = Number(process.env.BENCH_RESULTS_PER_QUERY ?? 10_000);
const prices = loadPriceTable();

function child(args, env) {
  const process_ = spawn(process.execPath, [CLI, ...args], { env: { ...process.env, ...env, LOG_LEVEL: 'error' }, stdio: ['ignore', 'pipe', 'inherit'] });
  return process_;
}

const { child: emulator, baseUrl, origin } = await startEmulatorProcess([
  '--credits', '100000000', '--rate-limit', '100000', '--job-step-ms', '50', '--api-key', 'sk_live_bench_harvest', '--api-key', 'sk_live_bench_baseline',
]);
const catalog = (await (await fetch(`${origin}/_emulator/catalog`)).json()).data;
const queries = catalog.tiktok.queries.slice(0, 10);

// Baseline: the same pulls with the bare client: start each job, wait, page its results.
const baselineClient = new SocialApiClient({ baseUrl, apiKey: 'sk_live_bench_baseline', prices });
let baselineItems = 0;
const baselineStarted = Date.now();
for (const query of queries) {
  const { job } = await baselineClient.startJob('tiktok', 'search', { query, limit: PER_QUERY });
  await baselineClient.waitForJob(job.job_id, { pollMinMs: 50, pollMaxMs: 200 });
  for await (const page of baselineClient.jobResults(job.job_id)) baselineItems += page.items.length;
}
const baselineMs = Date.now() - baselineStarted;
await baselineClient.close();

const port = await freePort();
const env = await TestWorkflowEnvironment.createLocal({
  server: ephemeralServerOptions(port),
});
const dataDir = mkdtempSync(join(tmpdir(), 'bench-harvest-'));
const worker = child(['worker'], { TEMPORAL_ADDRESS: `127.0.0.1:${port}`, HARVESTER_TASK_QUEUE: 'bench', HARVESTER_DATA_DIR: dataDir, SOCIAL_API_BASE_URL: baseUrl, SOCIAL_API_KEY: 'sk_live_bench_harvest' });
const peakRss = () => Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${worker.pid}/status`, 'utf8'))?.[1] ?? 0) / 1024;

const harvest = parseHarvestConfig(
  `harvests:\n  - name: bench\n    budget: { credits: 10000000 }\n    searches:\n${queries.map((query) => `      - { platform: tiktok, query: "${query}", max_results: ${PER_QUERY} }`).join('\n')}\n`,
  'bench.yaml',
).harvests[0];
const started = Date.now();
const summary = await env.client.workflow.execute('harvestWorkflow', { taskQueue: 'bench', workflowId: `bench-${Date.now()}`, args: [{ harvest }] });
const elapsedMs = Date.now() - started;
const rss = peakRss();
worker.kill('SIGTERM');
await new Promise((resolve) => worker.once('exit', resolve));
await env.teardown();
emulator.kill('SIGTERM');

const needed = summary.itemsLanded * prices['tiktok/search'];
const rate = Math.round(summary.itemsLanded / (elapsedMs / 1000));
const baselineRate = Math.round(baselineItems / (baselineMs / 1000));
console.log(`harvest: ${summary.status}, ${summary.itemsLanded} items in ${summary.pagesLanded} pages (${queries.length} searches; jobs above the 500-result threshold), loaded ${summary.landingsLoaded} landings`);
console.log('| measure | value |');
console.log('|---|---|');
console.log(`| end-to-end items/s (fetch, land, checkpoint, load into DuckDB) | ${rate} (${summary.itemsLanded} items in ${(elapsedMs / 1000).toFixed(1)} s) |`);
console.log(`| baseline: bare client pulling the same jobs, items/s | ${baselineRate} (${baselineItems} items in ${(baselineMs / 1000).toFixed(1)} s) |`);
console.log(`| harvest speed relative to the baseline | ${((rate / baselineRate) * 100).toFixed(0)} % |`);
console.log(`| credits spent / credits needed | ${summary.creditsSpent} / ${needed} = ${(summary.creditsSpent / needed).toFixed(3)} |`);
console.log(`| worker peak RSS | ${rss.toFixed(0)} MiB |`);
