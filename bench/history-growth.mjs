#!/usr/bin/env node
/**
 * Does a run cost more as history grows? The same 1,000-call run (1,000 `tiktok/channel-stats`
 * answers from the emulator, landed through the product's store into the run's segment, then the
 * run's final load), and then a load with nothing new, on data directories whose lakes already hold
 * HISTORY_SIZES answers (default 10,000 and 1,000,000), loaded and cleared by the product's own
 * loader. Each measured step runs in a child process of its own, so its peak memory (maxRSS) is its
 * own. The target: times and the load's peak memory at the largest history within 20% of the smallest.
 *
 * The history is made with the product's segment writer (LocalStore.writeLanding) and loader, then
 * maintained as the daily maintenance does (harvester maintain: small files merged): runs of
 * HISTORY_RUN answers each, every answer a channel-stats observation of one of 1,000 accounts (a
 * team tracking the same accounts every day), each run ended `completed` and loaded, so its
 * segments are removed and only the lake grows: `account_metrics`, `api_calls`, `loaded_landings`
 * and `raw_answers` each hold a row per answer.
 *
 *   npm run build && node bench/history-growth.mjs
 *   HISTORY_SIZES=10000,100000 node bench/history-growth.mjs
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startEmulatorProcess } from './emulator-process.mjs';

const root = new URL('..', import.meta.url).pathname;
const dist = join(root, 'dist');
const SIZES = (process.env.HISTORY_SIZES ?? '10000,1000000').split(',').map(Number);
const HISTORY_RUN = Number(process.env.HISTORY_RUN ?? 10_000);
const RUN_CALLS = 1000;
const ACCOUNTS = 1000;

const OUT = mkdtempSync(join(tmpdir(), 'history-growth-'));
const step = join(OUT, 'step.mjs');
// One measured step, in a process of its own: `history <dir> <answers>`, `run <dir> <baseUrl>` or `load <dir>`.
writeFileSync(
  step,
  `
const [what, dataDir, arg] = process.argv.slice(2);
const dist = ${JSON.stringify(dist)};
const { LocalStore } = await import(dist + '/src/store/store.js');
const { loadLandings } = await import(dist + '/src/warehouse/loader.js');
const started = performance.now();
const runLanding = (runId, seq, status) => ({ format: 1, kind: 'run', run_id: runId, harvest: 'history', seq, status, started_at: new Date(Date.UTC(2026, 0, 1)).toISOString(), ...(status === 'completed' ? { finished_at: new Date().toISOString() } : {}) });
let result = {};
if (what === 'history') {
  const total = Number(arg);
  const perRun = ${HISTORY_RUN};
  for (let run = 0; run * perRun < total; run++) {
    const store = new LocalStore(dataDir);
    const runId = 'history-' + String(run).padStart(5, '0');
    const writes = [];
    for (let i = 0; i < Math.min(perRun, total - run * perRun); i++) {
      const handle = 'acct' + (i % ${ACCOUNTS});
      const observed = new Date(Date.UTC(2026, 0, 1) + run * 86_400_000 + i * 1000).toISOString();
      writes.push(store.writeLanding({ format: 1, kind: 'page', run_id: runId, harvest: 'history', target: 'account:tiktok:' + handle + ':' + i, page: 1, endpoint: 'tiktok/channel-stats', params: { handle }, request_id: runId + '-' + i, observed_at: observed,
        call: { request_id: runId + '-' + i, units: 1, credits: 2 },
        data: { handle, name: 'Account ' + handle, bio: 'bio', verified: false, metrics: { followers: 1000 + run, following: 10, posts: 100 } } }));
      if (writes.length >= 2000) await Promise.all(writes.splice(0));
    }
    await Promise.all(writes);
    await store.writeLanding(runLanding(runId, 2, 'completed'));
    await loadLandings(dataDir);
  }
  // As the daily maintenance after a run's final load leaves it (small files merged; snapshots
  // kept a week, none older here). A lake the harvester keeps is maintained so every day.
  const { maintainLake } = await import(dist + '/src/warehouse/maintenance.js');
  result = { maintenance: await maintainLake(dataDir) };
} else if (what === 'run') {
  const { SocialApiClient } = await import(dist + '/src/api/client.js');
  const { landingOfCall } = await import(dist + '/activities/page-landing.js');
  const { loadPriceTable } = await import(dist + '/src/config/prices.js');
  const client = new SocialApiClient({ baseUrl: arg, apiKey: 'sk_live_emulator_42', prices: loadPriceTable() });
  const catalog = (await (await fetch(new URL('/_emulator/catalog', arg))).json()).data;
  const store = new LocalStore(dataDir);
  const runId = 'measured-' + Date.now();
  await store.writeLanding(runLanding(runId, 1, 'running'));
  const handles = catalog.tiktok.handles;
  let next = 0;
  await Promise.all(Array.from({ length: 16 }, async () => {
    while (next < ${RUN_CALLS}) {
      const i = next++;
      const handle = handles[i % handles.length];
      const answer = await client.get('tiktok', 'channel-stats', { handle, fresh: true });
      await store.writeLanding(landingOfCall({ runId, harvest: 'measured', target: 'account:tiktok:' + handle + ':' + i, page: 1, params: { handle } }, answer, answer.data));
    }
  }));
  await store.writeLanding(runLanding(runId, 2, 'completed'));
  await client.close();
  const landed = performance.now();
  const load = await loadLandings(dataDir);
  result = { landMs: landed - started, loadMs: performance.now() - landed, landings: load.landingsLoaded };
} else {
  const load = await loadLandings(dataDir);
  result = { loadMs: performance.now() - started, landings: load.landingsLoaded };
}
process.stdout.write(JSON.stringify({ ...result, ms: performance.now() - started, maxRssMiB: process.resourceUsage().maxRSS / 1024 }) + '\\n');
`,
);

function runStep(args) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [step, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (chunk) => (out += chunk));
    child.once('exit', (code) => (code === 0 ? resolve(JSON.parse(out.trim().split('\n').at(-1))) : reject(new Error(`step ${args[0]} exited ${code}`))));
  });
}

/** Each measured step this many times; the median is reported (the machine is shared). */
const REPEATS = Number(process.env.HISTORY_REPEATS ?? 3);
const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

const emulator = await startEmulatorProcess(['--latency-ms', '0', '--rate-limit', '100000']);
const rows = [];
try {
  // A first run warms the emulator (its JIT, its world's caches): not measured.
  await runStep(['run', join(OUT, 'warm-up'), emulator.baseUrl]);
  for (const size of SIZES) {
    const dataDir = join(OUT, `history-${size}`);
    const made = await runStep(['history', dataDir, String(size)]);
    console.log(JSON.stringify({ history: size, maintenance: made.maintenance }));
    const left = readdirSync(join(dataDir, 'segments')).length;
    const runs = [];
    const idles = [];
    for (let repeat = 0; repeat < REPEATS; repeat++) {
      runs.push(await runStep(['run', dataDir, emulator.baseUrl]));
      idles.push(await runStep(['load', dataDir]));
    }
    const of = (steps, key) => Math.round(median(steps.map((step) => step[key])));
    rows.push({ history: size, historyMadeS: +(made.ms / 1000).toFixed(1), segmentFoldersLeft: left, runMs: of(runs, 'ms'), runLoadMs: of(runs, 'loadMs'), runMaxRssMiB: of(runs, 'maxRssMiB'), idleLoadMs: of(idles, 'ms'), idleMaxRssMiB: of(idles, 'maxRssMiB'), loaded: runs[0].landings });
    console.log(JSON.stringify(rows.at(-1)));
  }
} finally {
  emulator.child.kill('SIGTERM');
  rmSync(OUT, { recursive: true, force: true });
}
const [first, last] = [rows[0], rows.at(-1)];
const ratio = (key) => +(last[key] / first[key]).toFixed(2);
console.log(`\nhistory ${first.history} -> ${last.history}: run ${ratio('runMs')}x, its load ${ratio('runLoadMs')}x, its peak memory ${ratio('runMaxRssMiB')}x; a load with nothing new ${ratio('idleLoadMs')}x, its peak memory ${ratio('idleMaxRssMiB')}x (target: each within 1.2x)`);
