#!/usr/bin/env node
/**
 * `harvester query` on a large result: `SELECT * FROM range(N)` through the built CLI, with the
 * limits lifted (--max-rows 0 --timeout 0), stdout to /dev/null, as CSV at 1M and N rows (to see
 * memory stay flat), as JSON and a table at N rows, and N rows of four columns as CSV. Each run is a child process; its elapsed time
 * and peak RSS come from /usr/bin/time (or, without it, from polling /proc/<pid>/status VmHWM).
 *
 * Baselines, in the same run and on the same warehouse:
 * - what `harvester query` did before it streamed: the whole result read with `runAndReadAll`,
 *   turned into row objects, and printed as one CSV string, in a Node child (at 1M rows only: its
 *   memory grows with the result, 3.7 GB at 10M);
 * - the Python duckdb client from .tools/python (npm run setup): DuckDB's own CSV writer
 *   (`COPY … TO '/dev/stdout'`), the floor; and rows fetched in batches of 10,000 and written with
 *   Python's csv module, a client doing what the CLI does.
 *
 *   npm run build && node bench/query-large.mjs      (BENCH_ROWS=10000000; BENCH_DATA_DIR=<a data dir> to
 *                                                      query its warehouse instead of an empty new one)
 */
import { execFileSync, spawn } from 'node:child_process';
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const root = new URL('..', import.meta.url).pathname;
const cli = join(root, 'dist', 'src', 'cli', 'main.js');
const ROWS = Number(process.env.BENCH_ROWS ?? 10_000_000);
const SMALL = Math.min(1_000_000, ROWS);
const TARGET_PEAK_MIB = 500;
const TIME = existsSync('/usr/bin/time') ? '/usr/bin/time' : undefined;
const PYTHONPATH = join(root, '.tools', 'python');

let dataDir = process.env.BENCH_DATA_DIR;
const ownDataDir = dataDir === undefined;
if (ownDataDir) {
  // A real warehouse, published by the loader into an empty data directory; range() needs no table.
  dataDir = mkdtempSync(join(tmpdir(), 'bench-query-'));
  execFileSync(process.execPath, [cli, 'load'], { env: { ...process.env, HARVESTER_DATA_DIR: dataDir }, stdio: 'ignore' });
}
// How any DuckDB client attaches the warehouse (a DuckLake), read-only: the baselines do too.
const { readerSql } = await import(join(root, 'dist', 'src', 'warehouse', 'lake.js'));
const attachWarehouse = readerSql(dataDir);

/** Runs a command with stdout to /dev/null; its exit code, elapsed seconds and peak RSS in MiB. */
async function measure(command, args, env = {}) {
  const devNull = openSync('/dev/null', 'w');
  const report = join(tmpdir(), `bench-query-time-${process.pid}-${Date.now()}`);
  const [file, argv] = TIME ? [TIME, ['-f', '%e %M', '-o', report, command, ...args]] : [command, args];
  const started = process.hrtime.bigint();
  const child = spawn(file, argv, { env: { ...process.env, ...env }, stdio: ['ignore', devNull, 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (chunk) => (stderr += chunk));
  let polledKiB = 0;
  const poll = TIME
    ? undefined
    : setInterval(() => {
        try {
          polledKiB = Math.max(polledKiB, Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'))?.[1] ?? 0));
        } catch {
          // Exited between two polls.
        }
      }, 20);
  const code = await new Promise((resolve) => child.once('close', resolve));
  clearInterval(poll);
  closeSync(devNull);
  let seconds = Number(process.hrtime.bigint() - started) / 1e9;
  let peakKiB = polledKiB;
  if (TIME) {
    const [elapsed, maxRss] = readFileSync(report, 'utf8').trim().split('\n').at(-1).split(' ').map(Number);
    rmSync(report, { force: true });
    [seconds, peakKiB] = [elapsed, maxRss];
  }
  if (code !== 0) throw new Error(`${command} ${args.join(' ')} exited ${code}: ${stderr}`);
  return { seconds, peakMiB: peakKiB / 1024 };
}

const harvester = (rows, format, sql = `SELECT * FROM range(${rows})`) => measure(process.execPath, [cli, 'query', sql, '--format', format, '--max-rows', '0', '--timeout', '0'], { HARVESTER_DATA_DIR: dataDir });
// Four columns of the warehouse's kinds: a key, a caption, a number and a timestamp.
// (TIMESTAMP, not TIMESTAMPTZ: Python's client needs pytz for the latter, and .tools/python has none.)
const wide = (rows) => `SELECT range AS id, 'caption of item ' || range AS caption, range * 1.5 AS score, TIMESTAMP '2026-11-23 00:00:00' + to_seconds(range) AS at FROM range(${rows})`;

// The command as it was before streaming (src/cli/commands/warehouse.ts and src/warehouse/query.ts).
const inMemory = (rows) =>
  measure(process.execPath, [
    '--input-type=module',
    '-e',
    `const { DuckDBInstance } = await import(${JSON.stringify(join(root, 'node_modules', '@duckdb', 'node-api', 'lib', 'index.js'))});
     const { csvLine } = await import(${JSON.stringify(join(root, 'dist', 'src', 'text', 'csv.js'))});
     const instance = await DuckDBInstance.create(':memory:', { autoinstall_known_extensions: 'false' });
     const connection = await instance.connect();
     await connection.run(${JSON.stringify(attachWarehouse)});
     const reader = await connection.runAndReadAll('SELECT * FROM range(${rows})');
     const result = { columns: reader.columnNames(), rows: reader.getRowObjectsJson() };
     process.stdout.write(\`\${[result.columns, ...result.rows.map((row) => result.columns.map((column) => row[column]))].map(csvLine).join('\\r\\n')}\\r\\n\`);
     connection.closeSync();
     instance.closeSync();`,
  ]);

const python = (script) => measure('python3', ['-c', script], { PYTHONPATH });
const pythonAvailable = existsSync(join(PYTHONPATH, 'duckdb'));
const pythonCopy = (rows) => python(`import duckdb
con = duckdb.connect()
con.execute(${JSON.stringify(attachWarehouse)})
con.execute("COPY (SELECT * FROM range(${rows})) TO '/dev/stdout' (FORMAT csv, HEADER)")`);
const pythonFetch = (rows, sql = `SELECT * FROM range(${rows})`) => python(`import csv, duckdb, sys
con = duckdb.connect()
con.execute(${JSON.stringify(attachWarehouse)})
cursor = con.execute(${JSON.stringify(sql)})
out = csv.writer(sys.stdout, lineterminator="\\r\\n")
out.writerow([column[0] for column in cursor.description])
while batch := cursor.fetchmany(10000):
    out.writerows(batch)`);

const cases = [
  ['harvester query --format csv', SMALL, () => harvester(SMALL, 'csv')],
  ['harvester query --format csv', ROWS, () => harvester(ROWS, 'csv')],
  ['harvester query --format json', ROWS, () => harvester(ROWS, 'json')],
  ['harvester query --format table', ROWS, () => harvester(ROWS, 'table')],
  ['harvester query --format csv, 4 columns (BIGINT, VARCHAR, DOUBLE, TIMESTAMP)', ROWS, () => harvester(ROWS, 'csv', wide(ROWS))],
  ['baseline: before streaming (runAndReadAll, one CSV string)', SMALL, () => inMemory(SMALL)],
  ...(pythonAvailable
    ? [
        ['baseline: Python duckdb, COPY TO /dev/stdout (DuckDB writes the CSV)', ROWS, () => pythonCopy(ROWS)],
        ['baseline: Python duckdb, fetchmany(10000) + csv module', ROWS, () => pythonFetch(ROWS)],
        ['baseline: Python duckdb, fetchmany(10000) + csv module, 4 columns', ROWS, () => pythonFetch(ROWS, wide(ROWS))],
      ]
    : []),
];

console.log(`harvester query, SELECT * FROM range(N) to /dev/null, limits lifted; Node ${process.version}; peak RSS from ${TIME ? '/usr/bin/time' : '/proc VmHWM polling'}`);
console.log('\n| what | rows | seconds | rows/s | peak RSS (MiB) |');
console.log('|---|---:|---:|---:|---:|');
const results = new Map();
try {
  for (const [label, rows, run] of cases) {
    const { seconds, peakMiB } = await run();
    results.set(`${label}@${rows}`, { seconds, peakMiB });
    console.log(`| ${label} | ${rows.toLocaleString('en-US')} | ${seconds.toFixed(2)} | ${Math.round(rows / seconds).toLocaleString('en-US')} | ${peakMiB.toFixed(0)} |`);
  }
} finally {
  if (ownDataDir) rmSync(dataDir, { recursive: true, force: true });
}
if (!pythonAvailable) console.log('\n(no Python duckdb under .tools/python: run `npm run setup` for the Python baselines)');

const small = results.get(`harvester query --format csv@${SMALL}`);
const large = results.get(`harvester query --format csv@${ROWS}`);
const worst = Math.max(...[...results].filter(([key]) => key.startsWith('harvester')).map(([, result]) => result.peakMiB));
console.log(`\nharvester query peak RSS: ${small.peakMiB.toFixed(0)} MiB at ${SMALL.toLocaleString('en-US')} rows, ${large.peakMiB.toFixed(0)} MiB at ${ROWS.toLocaleString('en-US')} (CSV); at most ${worst.toFixed(0)} MiB in any format (target: flat, under ${TARGET_PEAK_MIB} MiB): ${worst < TARGET_PEAK_MIB ? 'met' : 'NOT met'}`);
