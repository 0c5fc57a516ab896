#!/usr/bin/env node
/**
 * Tracking benchmark: two TikTok channels that post about every 3 to 4 hours (about 200 items each
 * in 30 days) harvested with `track: { items: { days: 30 } }` over 30 emulated days, once on a
 * daily schedule and once on an hourly one, each on a fresh emulator, through the real workflow
 * (Temporal dev server, in-process worker, warehouse). For each schedule it prints the stats calls
 * per item, the credits per tracked item per month, and how far the views-at-age-1d and -7d columns
 * of `item_metrics_at_age` are from the emulator's true values at those ages (its world model,
 * seed 42). The baseline, in the same run, is a naive tracker that re-buys every known item's
 * stats on every run: its credits are counted from the same runs (the items known at each run,
 * posted within 30 days), its values are the true ones at the run times, interpolated the same way.
 *
 *   npm run build && node bench/tracking.mjs
 *   BENCH_SCHEDULES=24 node bench/tracking.mjs      (hours between runs; default 24,1)
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { startEmulatorProcess } from './emulator-process.mjs';

const dist = new URL('../dist/', import.meta.url).pathname;
const { SocialApiClient } = await import(join(dist, 'src/api/client.js'));
const { loadPriceTable } = await import(join(dist, 'src/config/prices.js'));
const { parseHarvestConfig } = await import(join(dist, 'src/config/harvest-config.js'));
const { ephemeralServerOptions } = await import(join(dist, 'src/temporal/dev-server.js'));
const { freePort } = await import(join(dist, 'src/cli/free-port.js'));
const { createHarvestWorker } = await import(join(dist, 'src/temporal/worker.js'));
const { queryWarehouse } = await import(join(dist, 'src/warehouse/query.js'));
const { World } = await import(join(dist, 'src/emulator/world/world.js'));
const { EMULATOR_DEFAULTS } = await import(join(dist, 'src/emulator/server.js'));

Runtime.install({ logger: new DefaultLogger('WARN') });
const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;
const DAYS = 30;
const SCHEDULES = (process.env.BENCH_SCHEDULES ?? '24,1').split(',').map(Number);
/** What the issue asks of each schedule: credits at most this share of the naive tracker's. */
const CREDIT_TARGET = { 24: 1 / 4, 1: 1 / 50 };
const ERROR_TARGET = 0.05;
const KEY = 'sk_live_bench_tracking';
const prices = loadPriceTable();
const STATS_PRICE = prices['tiktok/stats'];
// The emulator's model of the world, for true values: an item's views depend on its id and age only.
const truth = new World(EMULATOR_DEFAULTS.seed, 0);
const trueViews = (item, ageMs) => truth.metrics({ id: item.id, kind: 'video', postedAtMs: item.postedAtMs }, item.postedAtMs + ageMs).views;

const port = await freePort();
const env = await TestWorkflowEnvironment.createLocal({ server: ephemeralServerOptions(port) });

/** The two catalog channels whose posting interval is nearest 3.6 hours (200 items in 30 days). */
async function channels(client, handles) {
  const intervals = [];
  for (const handle of handles) {
    const { items } = await client.page('tiktok', 'channel-videos', { handle, limit: 2 });
    intervals.push({ handle, hours: (Date.parse(items[0].posted_at) - Date.parse(items[1].posted_at)) / HOUR_MS });
  }
  return intervals.sort((a, b) => Math.abs(a.hours - 3.6) - Math.abs(b.hours - 3.6)).slice(0, 2);
}

/** Linear interpolation at `at` between the samples around it (sorted by time); undefined outside them. */
function interpolate(samples, at) {
  for (let i = 0; i < samples.length; i++) {
    const after = samples[i];
    if (after.at < at) continue;
    if (after.at === at) return after.value;
    const before = samples[i - 1];
    if (!before) return undefined;
    return before.value + ((after.value - before.value) * (at - before.at)) / (after.at - before.at);
  }
  return undefined;
}

function errorStats(errors) {
  if (errors.length === 0) return { n: 0, mean: NaN, p95: NaN };
  const sorted = [...errors].sort((a, b) => a - b);
  return { n: errors.length, mean: errors.reduce((sum, error) => sum + error, 0) / errors.length, p95: sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.95))] };
}

async function runSchedule(everyHours) {
  const { child, baseUrl, origin } = await startEmulatorProcess(['--credits', '1000000000', '--rate-limit', '100000', '--api-key', KEY]);
  const client = new SocialApiClient({ baseUrl, apiKey: KEY, prices });
  const dataDir = mkdtempSync(join(tmpdir(), 'bench-tracking-'));
  const taskQueue = `bench-tracking-${everyHours}`;
  const worker = await createHarvestWorker({ connection: env.nativeConnection, namespace: 'default', taskQueue, deps: { client, dataDir } });
  const running = worker.run();
  try {
    const catalog = (await (await fetch(`${origin}/_emulator/catalog`)).json()).data;
    const chosen = await channels(client, catalog.tiktok.handles);
    const harvest = parseHarvestConfig(
      `harvests:
  - name: tracked-${everyHours}h
    budget: { credits: 1000000 }
    track: { items: { days: ${DAYS} } }
    channels:
${chosen.map((channel) => `      - { platform: tiktok, handle: ${channel.handle}, content: videos, max_items: 50 }`).join('\n')}
`,
      'bench-tracking.yaml',
    ).harvests[0];
    const startMs = (await client.serverTime()).getTime();
    const runTimes = [];
    const started = Date.now();
    const runs = Math.round((DAYS * 24) / everyHours) + 1;
    for (let run = 0; run < runs; run++) {
      if (run > 0) await fetch(`${origin}/_emulator/clock`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ advance_seconds: everyHours * 3600 }) });
      runTimes.push((await client.serverTime()).getTime());
      const summary = await env.client.workflow.execute('harvestWorkflow', { taskQueue, workflowId: `tracking-${everyHours}h-${run}-${Date.now()}`, args: [{ harvest }] });
      if (summary.status !== 'completed') throw new Error(`run ${run}: ${summary.status} (${summary.reason})`);
      if (run % Math.max(1, Math.floor(runs / 10)) === 0) process.stderr.write(`  every ${everyHours} h: run ${run + 1}/${runs} (${((Date.now() - started) / 1000).toFixed(0)} s)\n`);
    }
    const endMs = runTimes.at(-1);
    const rows = async (sql) => (await queryWarehouse(dataDir, sql)).rows;
    const items = (await rows(`SELECT item_id, epoch_ms(posted_at) AS posted, epoch_ms(first_seen_at) AS seen FROM items`)).map((row) => ({ id: row.item_id, postedAtMs: Number(row.posted), seenAtMs: Number(row.seen) }));
    // The items tracked over the whole of their first week: posted during the 30 days, a week before the end.
    const measured = items.filter((item) => item.postedAtMs > startMs && item.postedAtMs + 7 * DAY_MS + everyHours * HOUR_MS <= endMs);
    const statsCalls = await rows(`SELECT count(*) AS calls, sum(credits) AS credits, count(*) FILTER (cache_status = 'MISS') AS fresh FROM api_calls WHERE endpoint = 'tiktok/stats'`);
    const perItem = await rows(`SELECT count(*) AS n FROM api_calls WHERE endpoint = 'tiktok/stats' GROUP BY params->>'url'`);
    const trackerCredits = Number(statsCalls[0].credits ?? 0);
    // The naive tracker: every run re-buys the stats of every item known by then, posted within the window.
    let naiveCredits = 0;
    for (const at of runTimes) naiveCredits += items.filter((item) => item.seenAtMs <= at && item.postedAtMs >= at - DAYS * DAY_MS).length * STATS_PRICE;
    const atAge = new Map((await rows(`SELECT item_id, age, views FROM item_metrics_at_age WHERE age IN ('1d', '7d')`)).map((row) => [`${row.item_id}/${row.age}`, Number(row.views)]));
    const errors = { tracker: { '1d': [], '7d': [] }, naive: { '1d': [], '7d': [] } };
    for (const item of measured) {
      const naiveSamples = runTimes.filter((at) => at >= item.seenAtMs).map((at) => ({ at, value: trueViews(item, at - item.postedAtMs) }));
      for (const [age, ageMs] of [['1d', DAY_MS], ['7d', 7 * DAY_MS]]) {
        const exact = trueViews(item, ageMs);
        if (exact === 0) continue;
        const tracked = atAge.get(`${item.id}/${age}`);
        if (tracked !== undefined) errors.tracker[age].push(Math.abs(tracked - exact) / exact);
        const naive = interpolate(naiveSamples, item.postedAtMs + ageMs);
        if (naive !== undefined) errors.naive[age].push(Math.abs(naive - exact) / exact);
      }
    }
    const trackedItems = items.filter((item) => item.postedAtMs > startMs).length;
    return {
      everyHours,
      runs,
      channels: chosen.map((channel) => `${channel.handle} (every ${channel.hours.toFixed(1)} h)`).join(', '),
      items: trackedItems,
      measured: measured.length,
      statsCalls: Number(statsCalls[0].calls),
      freshCalls: Number(statsCalls[0].fresh),
      callsPerItem: perItem.length === 0 ? 0 : Number(statsCalls[0].calls) / perItem.length,
      trackerCredits,
      naiveCredits,
      trackerPerItemMonth: trackerCredits / Math.max(1, trackedItems),
      naivePerItemMonth: naiveCredits / Math.max(1, trackedItems),
      errors: Object.fromEntries(Object.entries(errors).map(([who, ages]) => [who, Object.fromEntries(Object.entries(ages).map(([age, list]) => [age, errorStats(list)]))])),
      seconds: (Date.now() - started) / 1000,
    };
  } finally {
    worker.shutdown();
    await running;
    await client.close();
    child.kill();
  }
}

const results = [];
for (const everyHours of SCHEDULES) results.push(await runSchedule(everyHours));
await env.teardown();

const pct = (value) => `${(value * 100).toFixed(2)} %`;
let failed = 0;
for (const result of results) {
  const share = result.trackerCredits / result.naiveCredits;
  const target = CREDIT_TARGET[result.everyHours];
  const creditsMet = target === undefined || share <= target;
  const e = result.errors;
  const errorsMet = ['1d', '7d'].every((age) => e.tracker[age].n > 0 && e.tracker[age].mean <= ERROR_TARGET);
  if (!creditsMet || !errorsMet) failed++;
  console.log(`\nschedule: every ${result.everyHours} h, ${result.runs} runs over ${DAYS} emulated days (${result.seconds.toFixed(0)} s); channels ${result.channels}`);
  console.log(`  items posted during the window: ${result.items}; tracked through their first week: ${result.measured}`);
  console.log(`  stats calls: ${result.statsCalls} (${result.freshCalls} answered fresh, X-Cache MISS), ${result.callsPerItem.toFixed(2)} per item`);
  console.log(`  credits per tracked item per month: tracker ${result.trackerPerItemMonth.toFixed(1)}, naive ${result.naivePerItemMonth.toFixed(1)}`);
  console.log(`  credits: tracker ${result.trackerCredits}, naive ${result.naiveCredits}: ${pct(share)} of naive (target ≤ ${target === undefined ? '—' : pct(target)}): ${creditsMet ? 'met' : 'MISSED'}`);
  for (const age of ['1d', '7d']) {
    console.log(`  views at ${age}, mean |error| (p95) over ${e.tracker[age].n} items: tracker ${pct(e.tracker[age].mean)} (${pct(e.tracker[age].p95)}), naive ${pct(e.naive[age].mean)} (${pct(e.naive[age].p95)}); target ≤ ${pct(ERROR_TARGET)}`);
  }
}
console.log(`\n${failed === 0 ? 'all targets met' : `${failed} schedule(s) missed a target`}`);
process.exitCode = failed === 0 ? 0 : 1;
