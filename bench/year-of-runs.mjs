#!/usr/bin/env node
/**
 * A year of daily runs (issue 44): does the 365th run cost what the 30th did? A scheduled tracking
 * harvest (2 TikTok channels × 60 videos and 1 Instagram account × 40 reels, stats, items tracked
 * 30 days, accounts tracked) runs once per emulated day for BENCH_DAYS days (default 365) on one
 * standing worker (Temporal dev server, the real workflow, its warm loader), against the emulator
 * in a process of its own, its clock moved a day before each run.
 *
 * Time is compressed as in bench/history-growth.mjs and bench/tracking.mjs: before each run the
 * daily maintenance's mark is backdated two days, so the run's final load maintains the lake (as
 * it does once a day in production); and every 7th day `harvester maintain --keep-hours 0` expires
 * the week's snapshots (the days pass in seconds here, so the 168-hour default would expire none).
 *
 * Per day it prints (and appends as a JSON line to BENCH_OUT, default year-of-runs.jsonl in the
 * system's temporary folder): the run's time (the workflow's, start to summary), the final load's
 * time (the loader's `ms`), every table's data file count (`ducklake_table_info`), the Parquet
 * files on disk, the catalog's size (catalog.sqlite and its WAL), and a reader's query time (a
 * fresh read-only DuckDB attach, as an analyst's Python or CLI, median of 3 after one warm-up) on
 * `items` and on the history view `item_metrics_at_age`.
 * At the end, or with `--summarize FILE` for a series cut short, the summary the issue asks for:
 * days 31 and 106, the medians of days 183–192 and 356–365, and the growth between those two.
 *
 *   npm run build && node bench/year-of-runs.mjs
 *   BENCH_DAYS=40 node bench/year-of-runs.mjs
 *   node bench/year-of-runs.mjs --summarize /tmp/year-of-runs.jsonl
 */
import { spawn } from 'node:child_process';
import { appendFileSync, existsSync, mkdtempSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const root = new URL('..', import.meta.url).pathname;
const dist = join(root, 'dist');
const GROWTH_TARGET = 0.25;

const median = (values) => {
  const sorted = values.filter((value) => value !== undefined && Number.isFinite(value)).sort((a, b) => a - b);
  return sorted.length === 0 ? NaN : sorted[Math.floor((sorted.length - 1) / 2)];
};

/** The summary of a series of days (JSON lines), as a Markdown table. */
function summarize(days) {
  const byDay = new Map(days.map((day) => [day.day, day]));
  const window = (from, to) => days.filter((day) => day.day >= from && day.day <= to);
  const columns = [
    ['run (s)', (day) => day.runMs / 1000, 1],
    ['final load (ms)', (day) => day.finalLoadMs, 0],
    ['items: files', (day) => day.files.items, 0],
    ['items: files, most in the window', (day) => day.files.items, 0, 'max'],
    ['accounts: files', (day) => day.files.accounts, 0],
    ['comments: files', (day) => day.files.comments ?? 0, 0],
    ['item_metrics: files', (day) => day.files.item_metrics, 0],
    ['all tables: files', (day) => day.dataFiles, 0],
    ['Parquet files on disk', (day) => day.parquetOnDisk, 0],
    ['catalog (KB)', (day) => day.catalogBytes / 1024, 0],
    ['query on items (ms)', (day) => day.itemsQueryMs, 1],
    ['query on item_metrics_at_age (ms)', (day) => day.historyQueryMs, 1],
    ['items: rows', (day) => day.itemRows, 0],
  ];
  // Every other table that held a file on any day, each its own row: a table that grows is seen.
  const shownTables = new Set(['items', 'accounts', 'comments', 'item_metrics']);
  const otherTables = [...new Set(days.flatMap((day) => Object.keys(day.files)))].filter((table) => !shownTables.has(table)).sort();
  const tableRows = otherTables.filter((table) => days.some((day) => (day.files[table] ?? 0) > 0)).map((table) => [`${table}: files`, (day) => day.files[table] ?? 0, 0]);
  columns.splice(columns.findIndex(([name]) => name === 'all tables: files'), 0, ...tableRows);
  const cell = (value, digits) => (Number.isFinite(value) ? value.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits }) : '—');
  const mid = window(183, 192);
  // A series cut short (the machine is shared): its last 10 days stand for days 356–365, and say so.
  const lastDay = days.at(-1)?.day ?? 0;
  const [lateFrom, lateTo] = lastDay >= 365 ? [356, 365] : [Math.max(193, lastDay - 9), lastDay];
  const late = window(lateFrom, lateTo);
  const lines = [
    `| | day 31 | day 106 | days 183–192 (median) | days ${lateFrom}–${lateTo} (median) | growth 183–192 → ${lateFrom}–${lateTo} |`,
    '|---|---|---|---|---|---|',
  ];
  for (const [name, of, digits, statistic] of columns) {
    const summary = statistic === 'max' ? (values) => (values.length ? Math.max(...values) : NaN) : median;
    const [a, b] = [summary(mid.map(of)), summary(late.map(of))];
    const growth = Number.isFinite(a) && Number.isFinite(b) && a > 0 ? `${b >= a ? '+' : ''}${(((b - a) / a) * 100).toFixed(0)}%` : '—';
    const at = (n) => (byDay.has(n) ? cell(of(byDay.get(n)), digits) : '—');
    lines.push(`| ${name} | ${at(31)} | ${at(106)} | ${mid.length ? cell(a, digits) : '—'} | ${late.length ? cell(b, digits) : '—'} | ${growth} |`);
  }
  lines.push('', `${days.length} days measured (the last: day ${lastDay}); target: run, items' files, catalog and the query on items each grow at most ${GROWTH_TARGET * 100}% from days 183–192 to 356–365.`);
  return lines.join('\n');
}

if (process.argv[2] === '--summarize') {
  const days = readFileSync(process.argv[3], 'utf8').split('\n').filter(Boolean).map((line) => JSON.parse(line));
  console.log(summarize(days));
  process.exit(0);
}

const { TestWorkflowEnvironment } = await import('@temporalio/testing');
const { DefaultLogger, Runtime } = await import('@temporalio/worker');
const { DuckDBInstance } = await import('@duckdb/node-api');
const { default: pino } = await import('pino');
const { startEmulatorProcess } = await import('./emulator-process.mjs');
const { SocialApiClient } = await import(join(dist, 'src/api/client.js'));
const { loadPriceTable } = await import(join(dist, 'src/config/prices.js'));
const { parseHarvestConfig } = await import(join(dist, 'src/config/harvest-config.js'));
const { ephemeralServerOptions } = await import(join(dist, 'src/temporal/dev-server.js'));
const { freePort } = await import(join(dist, 'src/cli/free-port.js'));
const { createHarvestWorker } = await import(join(dist, 'src/temporal/worker.js'));
const { LocalStore } = await import(join(dist, 'src/store/store.js'));
const { lakeCatalogFile, lakeDataFolder } = await import(join(dist, 'src/store/layout.js'));
const { readerSql } = await import(join(dist, 'src/warehouse/lake.js'));
const { DUCKDB_CONFIG } = await import(join(dist, 'src/warehouse/duckdb.js'));

Runtime.install({ logger: new DefaultLogger('WARN') });
// Temporal's runtime stops the worker, quietly, on these signals: a year cut short so is said to be.
for (const signal of ['SIGINT', 'SIGTERM', 'SIGQUIT', 'SIGUSR2']) process.on(signal, () => process.stderr.write(`the bench received ${signal}: the Temporal worker stops\n`));
const DAY_MS = 24 * 3_600_000;
const DAYS = Number(process.env.BENCH_DAYS ?? 365);
const KEY = 'sk_live_bench_year';
const OUT = process.env.BENCH_OUT ?? join(tmpdir(), 'year-of-runs.jsonl');
const dataDir = process.env.BENCH_DATA_DIR ?? mkdtempSync(join(tmpdir(), 'bench-year-'));
const prices = loadPriceTable();

// The final load's time, as the run's activity logs it ('run loaded into the warehouse', its `ms`).
const finalLoads = new Map();
const logger = pino({ level: 'info' }, {
  write(line) {
    const entry = JSON.parse(line);
    if (entry.msg === 'run loaded into the warehouse') finalLoads.set(entry.run, entry.ms);
    else if (entry.level >= 50) process.stderr.write(line);
  },
});

/** Data files in the lake's folder, those a maintenance has yet to delete included. */
function parquetFiles(folder) {
  if (!existsSync(folder)) return 0;
  let count = 0;
  for (const entry of readdirSync(folder, { withFileTypes: true, recursive: true })) if (entry.isFile() && entry.name.endsWith('.parquet')) count++;
  return count;
}

function catalogBytes() {
  const file = lakeCatalogFile(dataDir);
  return [file, `${file}-wal`].reduce((sum, path) => sum + (existsSync(path) ? statSync(path).size : 0), 0);
}

/** What a reader sees: each table's data files, and its queries' times, on a fresh read-only attach. */
async function readerView() {
  const instance = await DuckDBInstance.create(':memory:', DUCKDB_CONFIG);
  const connection = await instance.connect();
  try {
    for (const statement of readerSql(dataDir).split('; ')) await connection.run(statement);
    const rows = async (sql) => (await connection.runAndReadAll(sql)).getRowObjectsJson();
    const files = Object.fromEntries((await rows(`SELECT table_name, file_count FROM ducklake_table_info('lake')`)).map((row) => [row.table_name, Number(row.file_count)]));
    const timed = async (sql) => {
      await rows(sql);
      const times = [];
      for (let repeat = 0; repeat < 3; repeat++) {
        const started = performance.now();
        await rows(sql);
        times.push(performance.now() - started);
      }
      return median(times);
    };
    const itemsQueryMs = await timed('SELECT count(*), count(DISTINCT author_handle), sum(length(caption)) FROM items');
    const historyQueryMs = await timed(`SELECT age, count(*), avg(views) FROM item_metrics_at_age GROUP BY age`);
    const itemRows = Number((await rows('SELECT count(*) AS n FROM items'))[0].n);
    return { files, itemsQueryMs, historyQueryMs, itemRows };
  } finally {
    connection.closeSync();
    instance.closeSync();
  }
}

/** `harvester maintain --keep-hours 0`, the product's command, in a process of its own. */
function maintainNow() {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(dist, 'src/cli/main.js'), 'maintain', '--keep-hours', '0'], { env: { ...process.env, HARVESTER_DATA_DIR: dataDir }, stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    child.stderr.on('data', (chunk) => (err += chunk));
    child.once('exit', (code) => (code === 0 ? resolve(err.trim()) : reject(new Error(`harvester maintain exited ${code}: ${err}`))));
  });
}

async function waitFor(check, what, timeoutMs = 600_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

const port = await freePort();
const env = await TestWorkflowEnvironment.createLocal({ server: ephemeralServerOptions(port) });
const { child, baseUrl, origin } = await startEmulatorProcess(['--credits', '1000000000', '--rate-limit', '100000', '--api-key', KEY]);
const client = new SocialApiClient({ baseUrl, apiKey: KEY, prices });
const taskQueue = 'bench-year';
const worker = await createHarvestWorker({ connection: env.nativeConnection, namespace: 'default', taskQueue, deps: { client, dataDir, logger } });
const running = worker.run();
const store = new LocalStore(dataDir);
try {
  const catalog = (await (await fetch(`${origin}/_emulator/catalog`)).json()).data;
  const harvest = parseHarvestConfig(
    `harvests:
  - name: daily-tracking
    budget: { credits: 1000000 }
    enrich: { stats: true }
    track: { items: { days: 30 }, accounts: true }
    channels:
      - { platform: tiktok, handle: ${catalog.tiktok.handles[0]}, content: videos, max_items: 60 }
      - { platform: tiktok, handle: ${catalog.tiktok.handles[1]}, content: videos, max_items: 60 }
      - { platform: instagram, handle: ${catalog.instagram.handles[0]}, content: reels, max_items: 40 }
`,
    'bench-year.yaml',
  ).harvests[0];
  process.stderr.write(`data directory ${dataDir}; series in ${OUT}\n`);
  for (let day = 1; day <= DAYS; day++) {
    if (day > 1) await fetch(`${origin}/_emulator/clock`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ advance_seconds: DAY_MS / 1000 }) });
    // The daily maintenance is due: the run's final load maintains the lake after its answer. (Before
    // the first run there is no lake: its final load only sets the mark, as for any new lake.)
    const backdated = (await store.lakeMaintainedAt()) === undefined ? undefined : Date.now() - 2 * DAY_MS;
    if (backdated !== undefined) await store.markLakeMaintained(backdated);
    const workflowId = `year-day-${day}-${Date.now()}`;
    const started = performance.now();
    const summary = await env.client.workflow.execute('harvestWorkflow', { taskQueue, workflowId, args: [{ harvest }] });
    const runMs = performance.now() - started;
    if (summary.status !== 'completed') throw new Error(`day ${day}: the run ended ${summary.status} (${summary.reason})`);
    // Measured once the day's maintenance is done (its mark moved), as the lake stands until the next run.
    await waitFor(async () => (await store.lakeMaintainedAt()) > (backdated ?? -1), `day ${day}'s maintenance`);
    const weekly = day % 7 === 0 ? await maintainNow() : undefined;
    const reader = await readerView();
    const record = {
      day,
      runMs: Math.round(runMs),
      finalLoadMs: finalLoads.get(summary.runId ?? summary.run_id) ?? [...finalLoads.values()].at(-1),
      files: reader.files,
      dataFiles: Object.values(reader.files).reduce((sum, count) => sum + count, 0),
      parquetOnDisk: parquetFiles(lakeDataFolder(dataDir)),
      catalogBytes: catalogBytes(),
      itemsQueryMs: +reader.itemsQueryMs.toFixed(2),
      historyQueryMs: +reader.historyQueryMs.toFixed(2),
      itemRows: reader.itemRows,
      ...(weekly ? { weeklyMaintenance: weekly } : {}),
    };
    finalLoads.clear();
    appendFileSync(OUT, `${JSON.stringify(record)}\n`);
    const shown = ['items', 'accounts', 'comments', 'item_metrics', 'account_metrics', 'api_calls', 'raw_answers', 'loaded_landings', 'harvest_runs'].map((table) => `${table} ${reader.files[table] ?? 0}`).join(', ');
    console.log(
      `day ${day}: run ${(runMs / 1000).toFixed(1)} s, final load ${record.finalLoadMs} ms; files ${record.dataFiles} (${shown}); on disk ${record.parquetOnDisk}; catalog ${(record.catalogBytes / 1024).toFixed(0)} KB; items ${record.itemRows} rows, query ${record.itemsQueryMs} ms; item_metrics_at_age ${record.historyQueryMs} ms`,
    );
  }
} catch (error) {
  // Said before the teardown, which may fail too: a stopped worker's shutdown() threw "Not running"
  // over the error that ended the year (at day 66 once, and the cause was lost).
  process.stderr.write(`the year stopped: ${error instanceof Error ? error.stack : String(error)}\n`);
  process.exitCode = 1;
} finally {
  process.stderr.write(`the Temporal worker is ${worker.getState()}\n`);
  if (worker.getState() === 'RUNNING') worker.shutdown();
  await running.catch((error) => process.stderr.write(`the worker failed: ${error instanceof Error ? error.message : String(error)}\n`));
  await client.close();
  child.kill();
  await env.teardown();
}
console.log(`\n${summarize(readFileSync(OUT, 'utf8').split('\n').filter(Boolean).map((line) => JSON.parse(line)))}`);
