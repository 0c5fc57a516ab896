#!/usr/bin/env node
/**
 * Load throughput of the warehouse: synthetic landings (channel pages and search pages, 50 items
 * each, shaped like the API's) are loaded by the real loader with its default batches, twice: a
 * first harvest into an empty warehouse (items inserted), then a re-harvest of the same items by a
 * second run (every item updated, every observation appended), in several rounds (median shown).
 * The rows per second are compared with a baseline in the same run: DuckDB appending the same rows
 * from NDJSON with no merge.
 * Growth: the same number of new landings loaded ten times into one lake, so the warehouse grows
 * from 1× to 10× the batch: each load's time, against the second load's (the first also makes the
 * tables), and the lake's files before each load checked untouched after it (no load rewrites or
 * copies what is there: DuckLake adds files, and a snapshot naming them).
 * Memory: peak RSS is measured in child processes for two batch sizes over the same landings, and
 * for the same batch size over warehouses three and six times larger.
 *
 *   npm run build && node bench/warehouse-load.mjs   (BENCH_LANDINGS=8000, BENCH_ROUNDS=5, BENCH_GROWTH_LANDINGS=2000)
 */
import { execFileSync } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const dist = new URL('../dist/src/warehouse/', import.meta.url).pathname;
const store = new URL('../dist/src/store/', import.meta.url).pathname;
// Landings as earlier versions wrote them, one file per page, which loads still read: what this bench has always measured.
const WRITE_LANDING_FILE = `
  const { writeDurableFile } = await import(${JSON.stringify(join(store, 'durable-file.js'))});
  const { landingKey, landingText } = await import(${JSON.stringify(join(store, 'landing.js'))});
  const { landingFile } = await import(${JSON.stringify(join(store, 'layout.js'))});
  const writeLanding = (dataDir, landing) => writeDurableFile(landingFile(dataDir, landingKey(landing)), landingText(landing), { what: 'landing' });`;
const { writeDurableFile } = await import(join(store, 'durable-file.js'));
const { landingKey, landingText } = await import(join(store, 'landing.js'));
const { landingFile } = await import(join(store, 'layout.js'));
const writeLanding = (dataDir, landing) => writeDurableFile(landingFile(dataDir, landingKey(landing)), landingText(landing), { what: 'landing' });
const { loadLandings } = await import(join(dist, 'loader.js'));
const { openDatabase, closeDatabase, sqlString } = await import(join(dist, 'duckdb.js'));

const LANDINGS = Number(process.env.BENCH_LANDINGS ?? 8000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const TARGET_ROWS_PER_SECOND = 300_000;

function synthesize(dataDir, landings, runId, firstItem = 0) {
  const started = Date.now();
  for (let page = 0; page < landings; page++) {
    const search = page % 4 === 3;
    const items = Array.from({ length: 50 }, (_, i) => {
      const n = firstItem + page * 50 + i;
      const id = `7${String(n).padStart(18, '0')}`;
      const url = `https://www.tiktok.com/@bench_${page % 97}/video/${id}`;
      const base = { id, url, caption: `Quick guide to sourdough, part ${n} #sourdough`, posted_at: new Date(1_700_000_000_000 + n * 1000).toISOString().replace('.000Z', 'Z') };
      return search
        ? { ...base, author: { handle: `bench_${page % 97}` }, metrics: { views: n * 3, likes: n } }
        : { ...base, metrics: { views: n * 3, likes: n, comments: n % 50 } };
    });
    writeLanding(dataDir, {
      format: 1, kind: 'page', run_id: runId, harvest: 'bench', target: search ? 'search:tiktok:keyword:sourdough' : `channel:tiktok:bench_${page % 97}:videos`,
      page: page + 1, endpoint: search ? 'tiktok/search' : 'tiktok/channel-videos', params: search ? { query: 'sourdough' } : { handle: `bench_${page % 97}` },
      request_id: `req_${runId}_${page}`, observed_at: new Date().toISOString(), call: { request_id: `req_${runId}_${page}`, units: 50, credits: 150, cache: 'MISS' },
      rank_offset: page * 50, data: items,
    });
  }
  return Date.now() - started;
}

async function baseline(dataDir, rows) {
  // The same number of rows, appended by DuckDB's JSON reader into a table with no key: the floor
  // of what any loader built on DuckDB can do on this machine.
  const file = join(dataDir, 'baseline.jsonl');
  const lines = [];
  for (let n = 0; n < rows; n++) lines.push(JSON.stringify({ platform: 'tiktok', item_id: `7${String(n).padStart(18, '0')}`, observed_at: new Date().toISOString(), views: n, likes: n, comments: n, request_id: `req_${n >> 6}` }));
  writeFileSync(file, lines.join('\n'));
  const db = await openDatabase(join(dataDir, 'baseline.duckdb'));
  try {
    await db.connection.run('CREATE TABLE t (platform VARCHAR, item_id VARCHAR, observed_at TIMESTAMPTZ, views BIGINT, likes BIGINT, comments BIGINT, request_id VARCHAR)');
    const started = Date.now();
    await db.connection.run(`INSERT INTO t SELECT * FROM read_json(${sqlString(file)}, format='newline_delimited', columns={platform:'VARCHAR', item_id:'VARCHAR', observed_at:'TIMESTAMPTZ', views:'BIGINT', likes:'BIGINT', comments:'BIGINT', request_id:'VARCHAR'})`);
    return Date.now() - started;
  } finally {
    closeDatabase(db);
  }
}

/** Peak RSS (MiB) of a child process that loads `landings` landings with a given batch size. */
function peakRss(landings, batch, preloadRuns) {
  const dir = mkdtempSync(join(tmpdir(), 'bench-rss-'));
  const script = `
    ${WRITE_LANDING_FILE}
    const { loadLandings } = await import(${JSON.stringify(join(dist, 'loader.js'))});
    ${synthesize.toString()}
    for (let run = 0; run < ${preloadRuns}; run++) { synthesize(${JSON.stringify(dir)}, ${landings}, 'pre' + run); await loadLandings(${JSON.stringify(dir)}); }
    synthesize(${JSON.stringify(dir)}, ${landings}, 'measured');
    const before = process.memoryUsage().rss;
    await loadLandings(${JSON.stringify(dir)}, { batchLandings: ${batch} });
    process.stdout.write(String(process.resourceUsage().maxRSS / 1024));`;
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
  rmSync(dir, { recursive: true, force: true });
  return Number(out).toFixed(0);
}

// Both runs' landings are written once; each round loads copies of them into a new data directory.
const sourceDir = mkdtempSync(join(tmpdir(), 'bench-landings-'));
const synthMs = synthesize(sourceDir, LANDINGS, 'run-1');
synthesize(sourceDir, LANDINGS, 'run-2');
const rate = (rows, ms) => Math.round(rows / (ms / 1000));
const rounds = { first: [], again: [], baseline: [] };
let shape;
for (let round = 0; round < ROUNDS; round++) {
  const dataDir = mkdtempSync(join(tmpdir(), 'bench-load-'));
  // Harvests land their pages with fsync, so a loader never meets them unwritten: the copies are
  // flushed too, or the kernel's writeback of them would run during the measured load.
  cpSync(join(sourceDir, 'landing', 'run-1'), join(dataDir, 'landing', 'run-1'), { recursive: true });
  execFileSync('sync');
  const first = await loadLandings(dataDir);
  cpSync(join(sourceDir, 'landing', 'run-2'), join(dataDir, 'landing', 'run-2'), { recursive: true });
  execFileSync('sync');
  const again = await loadLandings(dataDir);
  const baselineMs = await baseline(dataDir, first.rowsLoaded);
  rmSync(dataDir, { recursive: true, force: true });
  shape = { rows: first.rowsLoaded, batches: first.batches };
  rounds.first.push(rate(first.rowsLoaded, first.durationMs));
  rounds.again.push(rate(again.rowsLoaded, again.durationMs));
  rounds.baseline.push(rate(first.rowsLoaded, baselineMs));
}
rmSync(sourceDir, { recursive: true, force: true });

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const spread = (values) => `${Math.min(...values)}–${Math.max(...values)}`;
console.log(`landings per run: ${LANDINGS} (written in ${synthMs} ms), rows per load: ${shape.rows}, batches per load: ${shape.batches}, rounds: ${ROUNDS}`);
console.log('| scenario | rows per load | rows/s, median | rows/s, min–max | target | result |');
console.log('|---|---|---|---|---|---|');
for (const [name, rates] of [['loader, first harvest into an empty warehouse', rounds.first], ['loader, re-harvest of the same items (updates + history)', rounds.again]]) {
  console.log(`| ${name} | ${shape.rows} | ${median(rates)} | ${spread(rates)} | ≥ ${TARGET_ROWS_PER_SECOND} | ${median(rates) >= TARGET_ROWS_PER_SECOND ? 'PASS' : 'FAIL'} |`);
}
console.log(`| baseline: DuckDB append from NDJSON, no keys | ${shape.rows} | ${median(rounds.baseline)} | ${spread(rounds.baseline)} | — | loader at ${((median(rounds.first) / median(rounds.baseline)) * 100).toFixed(0)} % / ${((median(rounds.again) / median(rounds.baseline)) * 100).toFixed(0)} % of it |`);

// Growth: ten loads of new items into one lake.
const GROWTH_LANDINGS = Number(process.env.BENCH_GROWTH_LANDINGS ?? 2000);
const GROWTH_LOADS = 10;
const growthDir = mkdtempSync(join(tmpdir(), 'bench-growth-'));
const lakeFiles = () => {
  const files = new Map();
  const walk = (dir) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else files.set(path, statSync(path).mtimeMs);
    }
  };
  walk(join(growthDir, 'lake', 'data'));
  return files;
};
const growth = [];
let rewritten = 0;
for (let load = 1; load <= GROWTH_LOADS; load++) {
  synthesize(growthDir, GROWTH_LANDINGS, `grow-${load}`, load * GROWTH_LANDINGS * 50);
  execFileSync('sync');
  const before = load > 1 ? lakeFiles() : new Map();
  const result = await loadLandings(growthDir);
  const after = lakeFiles();
  for (const [file, mtime] of before) if (after.get(file) !== mtime) rewritten++;
  growth.push({ load, rows: result.rowsLoaded, ms: result.durationMs, files: after.size });
}
const { queryWarehouse } = await import(join(dist, 'query.js'));
const items = (await queryWarehouse(growthDir, 'SELECT count(*) AS n FROM items')).rows[0].n;
rmSync(growthDir, { recursive: true, force: true });
const reference = growth[1].ms;
console.log(`\nlakehouse growth: ${GROWTH_LANDINGS} new landings per load, ${GROWTH_LOADS} loads into one lake (${items} items at the end)`);
console.log('| load | warehouse size before, × the batch | rows | ms | rows/s | vs load 2 | lake data files after |');
console.log('|---|---|---|---|---|---|---|');
for (const { load, rows, ms, files } of growth) console.log(`| ${load} | ${load - 1}× | ${rows} | ${ms} | ${rate(rows, ms)} | ${((ms / reference - 1) * 100).toFixed(0)} % | ${files} |`);
const worst = Math.max(...growth.slice(1).map(({ ms }) => ms / reference - 1));
console.log(`load time, 2nd to 10th load: worst ${(worst * 100).toFixed(0)} % over the 2nd (target: within 20 %): ${worst <= 0.2 ? 'PASS' : 'FAIL'}`);
console.log(`files of the lake changed by a later load: ${rewritten} (target 0: no load copies or rewrites the warehouse): ${rewritten === 0 ? 'PASS' : 'FAIL'}`);

const memoryLandings = Math.min(LANDINGS, 5000);
console.log('\n| peak RSS of a load | MiB |');
console.log('|---|---|');
console.log(`| ${memoryLandings} landings, batch 1000, empty warehouse | ${peakRss(memoryLandings, 1000, 0)} |`);
console.log(`| ${memoryLandings} landings, batch 5000, empty warehouse | ${peakRss(memoryLandings, 5000, 0)} |`);
console.log(`| ${memoryLandings} landings, batch 1000, warehouse already 3× that size | ${peakRss(memoryLandings, 1000, 3)} |`);
console.log(`| ${memoryLandings} landings, batch 1000, warehouse already 6× that size | ${peakRss(memoryLandings, 1000, 6)} |`);
