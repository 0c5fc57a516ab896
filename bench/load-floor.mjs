#!/usr/bin/env node
/**
 * The floor of a load (issue 40's "final load under 0.3 s"): what a load costs when it has almost
 * nothing to load, and where that time goes.
 *
 * Part 1, the loader: loads of 1, 8 and 64 channel pages (50 items each, shaped like the API's)
 * through the real loader on a warm lake engine (createLakeEngine, as the load process holds one),
 * into a lake the load at a run's start made, then the same items again from a second run (the
 * daily case: every item updated, every observation appended). Each round a new data directory;
 * the pages and the run's final status land in the run's segment and are synced, as a harvest lands
 * them (the store's own code), so the load ends the run and clears its answers, as a final load does. Medians of the load's time and of its
 * steps (step-times.ts). A load of one page is the fixed cost: what a final load pays when the loads
 * during the run kept up and left it one page.
 *
 * Part 2, DuckLake's commit: one transaction appending R rows of 10 text columns to each of T lake
 * tables, with the rows inlined in the SQLite catalog (DATA_INLINING_ROW_LIMIT 1000, the loader's)
 * against the baseline of the same rows written as Parquet files (limit 0), each new file and its
 * folder fsynced before the COMMIT by lake-sync.ts's syncNewLakeFiles, as the loader's are. The
 * whole transaction is timed, and its COMMIT apart.
 *
 *   npm run build && node bench/load-floor.mjs   (BENCH_ROUNDS=7, BENCH_FLOOR_PAGES=1,8,64)
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { median } from './stats.mjs';

const dist = new URL('../dist/src/', import.meta.url).pathname;
const { LocalStore } = await import(join(dist, 'store/store.js'));
const { loadLandings } = await import(join(dist, 'warehouse/loader.js'));
const { createLakeEngine } = await import(join(dist, 'warehouse/lake.js'));
const { extensionLoadStatements } = await import(join(dist, 'warehouse/extension-files.js'));
const { syncNewLakeFiles } = await import(join(dist, 'warehouse/lake-sync.js'));
const { lakeDataFolder } = await import(join(dist, 'store/layout.js'));

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 7);
const PAGE_COUNTS = (process.env.BENCH_FLOOR_PAGES ?? '1,8,64').split(',').map(Number);
const CHANNELS = 8;
/** The steps shown, in the loader's order; the others are a few milliseconds or nothing in this case. */
const STEPS = ['open', 'find new', 'normalize', 'one row per key', 'merge', 'record landings', 'find ended runs', 'count run', 'of which: COMMIT', 'of which: sync new files', 'transaction', 'clear answers', 'snapshot', 'close'];

/** `pages` channel pages of one run, 50 items each, the same items whatever the run, landed as a harvest lands them (its segments, synced). */
async function landPages(dataDir, runId, pages) {
  const store = new LocalStore(dataDir);
  for (let page = 0; page < pages; page++) {
    const handle = `floor_${page % CHANNELS}`;
    const target = `channel:tiktok:${handle}:videos`;
    const data = Array.from({ length: 50 }, (_, index) => {
      const n = page * 50 + index;
      const id = `7${String(n).padStart(18, '0')}`;
      return { id, url: `https://www.tiktok.com/@${handle}/video/${id}`, caption: `Floor ${n} #sourdough`, posted_at: new Date(1_700_000_000_000 + n * 1000).toISOString().replace('.000Z', 'Z'), metrics: { views: n * 3, likes: n, comments: n % 50 } };
    });
    const landing = {
      format: 1, kind: 'page', run_id: runId, harvest: 'floor', target, page: Math.floor(page / CHANNELS) + 1, endpoint: 'tiktok/channel-videos', params: { handle },
      request_id: `req_${runId}_${page}`, observed_at: new Date().toISOString(), call: { request_id: `req_${runId}_${page}`, units: 50, credits: 150, cache: 'MISS' }, rank_offset: 0, data,
    };
    await store.writeLanding(landing);
  }
  // Its status as finishRun lands it: the load that loads it ends the run, and clears its answers.
  const now = new Date().toISOString();
  await store.writeLanding({ format: 1, kind: 'run', run_id: runId, harvest: 'floor', seq: Date.now(), status: 'completed', started_at: now, finished_at: now, budget_credits: 1_000_000, credits_spent: pages * 150, items_landed: pages * 50 });
  await store.makeRunDurable(runId);
}

const engine = await createLakeEngine();
const fmt = (ms) => (ms === undefined ? '—' : ms.toFixed(0));

console.log(`rounds: ${ROUNDS}; pages of 50 items; a new data directory each round; medians, ms`);
console.log('\nPart 1: a load by its size, into the lake a run\'s start made (first) and into one holding the same items (again)\n');
const columns = PAGE_COUNTS.flatMap((pages) => [`${pages} p. first`, `${pages} p. again`]);
console.log(`| step | ${columns.join(' | ')} |`);
console.log(`|---|${columns.map(() => '---:').join('|')}|`);
const results = new Map();
for (const pages of PAGE_COUNTS) {
  const first = [];
  const again = [];
  for (let round = 0; round < ROUNDS; round++) {
    const dataDir = mkdtempSync(join(tmpdir(), 'bench-floor-'));
    try {
      await loadLandings(dataDir, { engine });
      for (const [runId, into] of [['run-a', first], ['run-b', again]]) {
        await landPages(dataDir, runId, pages);
        const loaded = await loadLandings(dataDir, { engine, countRun: runId });
        if (loaded.landingsLoaded !== pages + 1) throw new Error(`${pages} pages and a run status landed, ${loaded.landingsLoaded} loaded`);
        into.push({ total: loaded.durationMs, ...loaded.steps });
      }
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  }
  results.set(pages, { first, again });
}
const stepMedian = (loads, step) => (loads.some((load) => load[step] !== undefined) ? median(loads.map((load) => load[step] ?? 0)) : undefined);
for (const step of ['total', ...STEPS]) {
  const cells = PAGE_COUNTS.flatMap((pages) => [stepMedian(results.get(pages).first, step), stepMedian(results.get(pages).again, step)]);
  console.log(`| ${step === 'total' ? '**the load**' : step} | ${cells.map(fmt).join(' | ')} |`);
}
const floor = median(results.get(PAGE_COUNTS[0]).again.map((load) => load.total));
console.log(`\nA load of ${PAGE_COUNTS[0]} page(s) into a lake holding its items: ${fmt(floor)} ms (issue 40's final load: under 300 ms, the activity's own steps included).`);

// Part 2: DuckLake's COMMIT, rows inlined in the catalog against rows written as files.
const extensions = extensionLoadStatements(['sqlite_scanner', 'ducklake']);
async function commitCost(tables, rows, inliningLimit) {
  const dir = mkdtempSync(join(tmpdir(), 'bench-commit-'));
  const connection = await engine.connect();
  try {
    for (const statement of extensions) await connection.run(statement);
    // The lake's folders as a data directory's (lakeDataFolder), so lake-sync.ts syncs them as it does the loader's.
    await connection.run(`ATTACH 'ducklake:sqlite:${join(dir, 'catalog.sqlite')}' AS floor_lake (DATA_PATH '${lakeDataFolder(dir)}/', DATA_INLINING_ROW_LIMIT ${inliningLimit})`);
    const values = Array.from({ length: 10 }, (_, k) => `'value ' || i || ' of column ${k}'`).join(', ');
    for (let t = 0; t < tables; t++) await connection.run(`CREATE TABLE floor_lake.t${t} (id BIGINT, ${Array.from({ length: 10 }, (_, k) => `c${k} VARCHAR`).join(', ')})`);
    let names = (await syncNewLakeFiles(dir, new Set())).now;
    const totals = [];
    const commits = [];
    for (let round = 0; round < ROUNDS; round++) {
      const started = performance.now();
      await connection.run('BEGIN TRANSACTION');
      for (let t = 0; t < tables; t++) await connection.run(`INSERT INTO floor_lake.t${t} SELECT i, ${values} FROM range(${rows}) AS r(i)`);
      names = (await syncNewLakeFiles(dir, names)).now;
      const committing = performance.now();
      await connection.run('COMMIT');
      commits.push(performance.now() - committing);
      totals.push(performance.now() - started);
    }
    await connection.run('DETACH floor_lake');
    return { total: median(totals), commit: median(commits) };
  } finally {
    connection.closeSync();
    rmSync(dir, { recursive: true, force: true });
  }
}
console.log('\nPart 2: one transaction appending R rows (an id and 10 text columns) to each of T lake tables: rows inlined in the catalog against the baseline of Parquet files fsynced before the COMMIT\n');
console.log('| tables × rows | inlined: transaction | inlined: COMMIT | files: transaction | files: COMMIT | inlined / files |');
console.log('|---|---:|---:|---:|---:|---:|');
for (const [tables, rows] of [[1, 10], [1, 50], [1, 200], [1, 900], [5, 200], [10, 10]]) {
  const inlined = await commitCost(tables, rows, 1000);
  const files = await commitCost(tables, rows, 0);
  console.log(`| ${tables} × ${rows} | ${fmt(inlined.total)} | ${fmt(inlined.commit)} | ${fmt(files.total)} | ${fmt(files.commit)} | ${(inlined.total / files.total).toFixed(2)}× |`);
}
engine.closeSync?.();
