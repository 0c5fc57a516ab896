#!/usr/bin/env node
/**
 * Throughput benchmark of the built emulator (dist/), driven by autocannon.
 *
 *   npm run bench:emulator                 # builds, then runs this file
 *   BENCH_SECONDS=10 node bench/emulator-throughput.mjs
 *
 * The emulator runs in a child process (`harvester emulator --port 0 ...`), so the load generator
 * and the server do not share one event loop. A bare node:http server, also in a child process,
 * answers the very same response bodies with the same headers, and gives the baseline: what this
 * machine (load generator included) can serve at all.
 *
 * Scenarios:
 *   stats (cache HIT)        GET /v1/tiktok/stats?url=<video>, warmed once so every call is a HIT.
 *                            Target: >= 5,000 req/s.
 *   channel-videos, cached   GET /v1/tiktok/channel-videos?handle=<h>&limit=50[&cursor=<c>] over every
 *                            catalog handle and the first BENCH_PAGES pages of each, walked once
 *                            beforehand so every page is a HIT. items/s = 2xx req/s x 50.
 *                            Target: >= 50,000 items/s.
 *   channel-videos, fresh    The same paths with fresh=true: every page is generated again (extra
 *                            information; the same items/s target is shown for comparison).
 *
 * Environment: BENCH_SECONDS (default 5) per scenario, BENCH_WARMUP_SECONDS (default 1, not
 * measured), BENCH_CONNECTIONS (default 32), BENCH_PAGES (default 8), BENCH_ROUNDS (default 1: with
 * more, every scenario runs that many times, interleaved, and the table shows the median and range).
 * Only 127.0.0.1 is contacted. The exit code is 0 whether targets are met or missed; it is 1 only
 * when the benchmark itself could not run (build missing, a server not starting, a broken warm-up).
 */
import { fork } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { request as httpRequest, createServer } from 'node:http';
import { availableParallelism } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { startEmulatorProcess } from './emulator-process.mjs';

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const cliMain = join(root, 'dist', 'src', 'cli', 'main.js');
const HOST = '127.0.0.1';
const API_KEY = 'sk_live_bench';
const PAGE_LIMIT = 50;

// ---- baseline server mode: `node bench/emulator-throughput.mjs --baseline-server` (forked) --------

if (process.argv[2] === '--baseline-server') {
  process.once('message', (answers) => {
    const routes = new Map(
      Object.entries(answers).map(([path, { headers, body }]) => {
        const bytes = Buffer.from(body);
        return [path, { bytes, headers: { ...headers, 'content-type': 'application/json; charset=utf-8', 'content-length': String(bytes.length) } }];
      }),
    );
    const server = createServer((req, res) => {
      const route = routes.get(req.url?.split('?')[0] ?? '');
      if (!route) {
        res.writeHead(404, { 'content-type': 'application/json; charset=utf-8', 'content-length': '2' });
        res.end('{}');
        return;
      }
      res.writeHead(200, route.headers);
      res.end(route.bytes);
    });
    server.keepAliveTimeout = 65_000;
    server.listen(0, HOST, () => process.send?.({ port: server.address().port }));
    process.once('disconnect', () => process.exit(0));
  });
} else {
  await main();
}

// ---- the benchmark ----------------------------------------------------------------------------

function envNumber(name, fallback, min) {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value < min) throw new BenchError(`${name} must be a number >= ${min}, got ${JSON.stringify(raw)}`);
  return value;
}

class BenchError extends Error {}

async function main() {
  const children = [];
  const stopChildren = () => {
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
  };
  process.once('SIGINT', () => {
    stopChildren();
    process.exit(130);
  });
  try {
    const settings = {
      seconds: envNumber('BENCH_SECONDS', 5, 1),
      warmupSeconds: envNumber('BENCH_WARMUP_SECONDS', 1, 0),
      connections: Math.floor(envNumber('BENCH_CONNECTIONS', 32, 1)),
      pages: Math.floor(envNumber('BENCH_PAGES', 8, 1)),
      rounds: Math.floor(envNumber('BENCH_ROUNDS', 1, 1)),
    };
    if (!existsSync(cliMain)) throw new BenchError(`${cliMain} is missing; run \`npm run build\` first (npm run bench:emulator does)`);
    const autocannonVersion = JSON.parse(readFileSync(join(root, 'node_modules', 'autocannon', 'package.json'), 'utf8')).version;
    process.stdout.write(
      `emulator throughput: ${settings.seconds} s per scenario (+${settings.warmupSeconds} s warm-up), ${settings.rounds} round(s), ` +
        `${settings.connections} connections, ` +
        `node ${process.version}, ${availableParallelism()} CPUs, autocannon ${autocannonVersion}\n`,
    );

    const emulator = await startBenchEmulator(children);
    const plan = await prepare(emulator.origin, settings.pages);
    const baseline = await startBaselineProcess(children, { '/stats': plan.stats, '/list': plan.list });

    const auth = { authorization: `Bearer ${API_KEY}` };
    const statsBytes = Buffer.byteLength(plan.stats.body);
    const listBytes = Buffer.byteLength(plan.list.body);
    const scenarios = [
      { name: 'baseline: node:http, fixed stats answer', origin: baseline.origin, paths: ['/stats'], headers: {}, itemsPerRequest: 0, bodyBytes: statsBytes },
      {
        name: 'emulator: tiktok/stats (cache HIT)',
        origin: emulator.origin,
        paths: [plan.statsPath],
        headers: auth,
        itemsPerRequest: 0,
        bodyBytes: statsBytes,
        target: { kind: 'req/s', value: 5_000 },
        baseline: 'baseline: node:http, fixed stats answer',
      },
      { name: 'baseline: node:http, fixed 50-item page', origin: baseline.origin, paths: ['/list'], headers: {}, itemsPerRequest: PAGE_LIMIT, bodyBytes: listBytes },
      {
        name: `emulator: tiktok/channel-videos limit=50, cached (${plan.listPaths.length} pages)`,
        origin: emulator.origin,
        paths: plan.listPaths,
        headers: auth,
        itemsPerRequest: PAGE_LIMIT,
        bodyBytes: listBytes,
        target: { kind: 'items/s', value: 50_000 },
        baseline: 'baseline: node:http, fixed 50-item page',
      },
      {
        name: `emulator: tiktok/channel-videos limit=50, fresh=true (${plan.listPaths.length} pages)`,
        origin: emulator.origin,
        paths: plan.listPaths.map((path) => `${path}&fresh=true`),
        headers: auth,
        itemsPerRequest: PAGE_LIMIT,
        bodyBytes: listBytes,
        target: { kind: 'items/s', value: 50_000 },
        baseline: 'baseline: node:http, fixed 50-item page',
        info: true,
      },
    ];

    // Rounds run every scenario in turn, so a slow spell of the machine is spread over all of them.
    const runs = new Map(scenarios.map((scenario) => [scenario, []]));
    for (let round = 1; round <= settings.rounds; round++) {
      for (const scenario of scenarios) {
        process.stderr.write(`bench: round ${round}/${settings.rounds}: ${scenario.name} ...\n`);
        if (settings.warmupSeconds > 0) await load(scenario, settings.connections, settings.warmupSeconds);
        runs.get(scenario).push(measure(scenario, await load(scenario, settings.connections, settings.seconds)));
      }
    }
    // The stats entry must still be a HIT after the runs (a MISS would mean the scenario measured misses).
    const after = await get(`${emulator.origin}${plan.statsPath}`, auth);
    if (after.headers['x-cache'] !== 'HIT') process.stdout.write(`note: stats answered X-Cache ${after.headers['x-cache']} after its runs\n`);

    // Each scenario's row is its median round by req/s; min and max show the spread.
    const rows = scenarios.map((scenario) => {
      const measured = [...runs.get(scenario)].sort((a, b) => a.reqPerSec - b.reqPerSec);
      const row = measured[Math.floor((measured.length - 1) / 2)];
      return { ...row, minReqPerSec: measured[0].reqPerSec, maxReqPerSec: measured.at(-1).reqPerSec, all: measured };
    });
    for (const row of rows) {
      const base = rows.find((candidate) => candidate.name === row.scenario.baseline);
      row.ratio = base && base.reqPerSec > 0 ? row.reqPerSec / base.reqPerSec : undefined;
    }
    process.stdout.write(`\n${table(rows, settings.rounds > 1)}\n`);
    for (const row of rows) {
      const non2xx = row.all.reduce((sum, run) => sum + run.non2xx, 0);
      const errors = row.all.reduce((sum, run) => sum + run.errors, 0);
      if (non2xx > 0 || errors > 0) {
        const codes = row.all.map((run) => JSON.stringify(run.statusCodes)).join(' ');
        process.stdout.write(`note: ${row.name}: ${non2xx} non-2xx answers (status counts per round: ${codes}), ${errors} connection errors\n`);
      }
    }
    process.stdout.write(
      '\nreq/s counts 2xx answers only, over the measured duration; items/s = 2xx req/s x 50 on list pages; ' +
        'vs baseline = req/s / the req/s of the bare node:http server answering the same bytes with the same headers. ' +
        (settings.rounds > 1 ? 'Each row is the median of the rounds by req/s. ' : '') +
        'The fresh=true row is information beyond the two targets.\n',
    );
  } catch (error) {
    process.stderr.write(`bench: broken: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exitCode = 1;
  } finally {
    stopChildren();
  }
}

/** The emulator for this benchmark, started through the benchmarks' shared helper. */
async function startBenchEmulator(children) {
  const started = startEmulatorProcess([
    '--rate-limit', '1000000000',
    '--api-key', API_KEY,
    // Enough credits that a long run never meets a 402 (a 50-item page costs 150).
    '--credits', String(Number.MAX_SAFE_INTEGER),
    // Cursors gathered before the runs must outlive them, whatever BENCH_SECONDS is.
    '--cursor-ttl', '86400',
  ]);
  try {
    const emulator = await started;
    children.push(emulator.child);
    return emulator;
  } catch (error) {
    throw new BenchError(error.message);
  }
}

/** Forks this file as a bare node:http server answering the given bodies by path. */
function startBaselineProcess(children, bodies) {
  const child = fork(fileURLToPath(import.meta.url), ['--baseline-server'], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  children.push(child);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new BenchError('the baseline server did not start within 20 s')), 20_000);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new BenchError(`the baseline server exited early (code ${code})`));
    });
    child.once('message', (message) => {
      clearTimeout(timer);
      resolve({ origin: `http://${HOST}:${message.port}` });
    });
    child.send(bodies);
  });
}

/**
 * Warms the emulator: finds a video URL, calls stats until it is a HIT, and walks the first pages
 * of every catalog handle's channel-videos (limit=50) so that each of those pages is cached.
 */
async function prepare(origin, pages) {
  const auth = { authorization: `Bearer ${API_KEY}` };
  const catalog = await getJson(`${origin}/_emulator/catalog`, {});
  const handles = catalog.data?.tiktok?.handles;
  if (!Array.isArray(handles) || handles.length === 0) throw new BenchError('GET /_emulator/catalog listed no TikTok handles');

  const first = await getJson(`${origin}/v1/tiktok/channel-videos?handle=${encodeURIComponent(handles[0])}&limit=1`, auth);
  const videoUrl = first.data?.[0]?.url;
  if (typeof videoUrl !== 'string') throw new BenchError('channel-videos returned no video to take a URL from');
  const statsPath = `/v1/tiktok/stats?url=${encodeURIComponent(videoUrl)}`;
  await getJson(`${origin}${statsPath}`, auth);
  const warm = await get(`${origin}${statsPath}`, auth);
  if (warm.status !== 200 || warm.headers['x-cache'] !== 'HIT') {
    throw new BenchError(`the second stats call answered ${warm.status} with X-Cache ${warm.headers['x-cache']}, expected 200 HIT`);
  }

  const listPaths = [];
  for (const handle of handles) {
    let path = `/v1/tiktok/channel-videos?handle=${encodeURIComponent(handle)}&limit=${PAGE_LIMIT}`;
    for (let page = 0; page < pages; page++) {
      const answer = await get(`${origin}${path}`, auth);
      if (answer.status !== 200) throw new BenchError(`GET ${path} answered ${answer.status}: ${answer.body}`);
      const json = JSON.parse(answer.body);
      if (json.data.length !== PAGE_LIMIT) throw new BenchError(`GET ${path} returned ${json.data.length} items, not ${PAGE_LIMIT}`);
      listPaths.push(path);
      if (!json.meta.has_more) break;
      path = `/v1/tiktok/channel-videos?handle=${encodeURIComponent(handle)}&limit=${PAGE_LIMIT}&cursor=${encodeURIComponent(json.meta.cursor)}`;
    }
  }
  // Every gathered page must now be a HIT.
  const check = await get(`${origin}${listPaths.at(-1)}`, auth);
  if (check.headers['x-cache'] !== 'HIT') throw new BenchError(`a walked channel-videos page answered X-Cache ${check.headers['x-cache']}, expected HIT`);
  return { statsPath, stats: replayable(warm), listPaths, list: replayable(check) };
}

/** An emulator answer as the baseline server replays it: the body and the API's own headers. */
function replayable(answer) {
  const skip = new Set(['date', 'connection', 'keep-alive', 'content-length', 'content-type', 'transfer-encoding']);
  const headers = Object.fromEntries(Object.entries(answer.headers).filter(([name]) => !skip.has(name)));
  return { headers, body: answer.body };
}

function load(scenario, connections, seconds) {
  const requests = scenario.paths.map((path) => ({ method: 'GET', path, headers: scenario.headers }));
  return autocannon({
    url: scenario.origin,
    connections,
    pipelining: 1,
    duration: seconds,
    timeout: 10,
    headers: scenario.headers,
    requests,
  });
}

function measure(scenario, result) {
  const ok = result['2xx'];
  const reqPerSec = ok / result.duration;
  const statusCodes = Object.fromEntries(Object.entries(result.statusCodeStats ?? {}).map(([code, stat]) => [code, stat.count]));
  return {
    scenario,
    name: scenario.name,
    reqPerSec,
    itemsPerSec: scenario.itemsPerRequest ? reqPerSec * scenario.itemsPerRequest : undefined,
    p99: result.latency.p99,
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    statusCodes,
  };
}

function table(rows, showRange) {
  const format = (value, digits = 0) =>
    value === undefined ? '—' : value.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
  const header = ['scenario', 'body bytes', 'req/s', ...(showRange ? ['req/s min–max'] : []), 'items/s', 'p99 ms', 'target', 'result', 'vs baseline'];
  const lines = rows.map((row) => {
    const { target } = row.scenario;
    const measured = target?.kind === 'req/s' ? row.reqPerSec : row.itemsPerSec;
    const verdict = target ? `${measured >= target.value ? 'PASS' : 'FAIL'}${row.scenario.info ? ' (info)' : ''}` : '—';
    return [
      row.name,
      format(row.scenario.bodyBytes),
      format(row.reqPerSec),
      ...(showRange ? [`${format(row.minReqPerSec)}–${format(row.maxReqPerSec)}`] : []),
      format(row.itemsPerSec),
      format(row.p99, 1),
      target ? `≥ ${format(target.value)} ${target.kind}` : '—',
      verdict,
      row.ratio === undefined ? '—' : `${format(row.ratio * 100, 1)} %`,
    ];
  });
  const all = [header, ...lines];
  const widths = header.map((_, column) => Math.max(...all.map((line) => line[column].length)));
  const render = (line) => `| ${line.map((cell, column) => (column === 0 ? cell.padEnd(widths[column]) : cell.padStart(widths[column]))).join(' | ')} |`;
  const rule = `|${widths.map((width, column) => (column === 0 ? `:${'-'.repeat(width + 1)}` : `${'-'.repeat(width + 1)}:`)).join('|')}|`;
  return [render(header), rule, ...lines.map(render)].join('\n');
}

// ---- tiny HTTP helpers (127.0.0.1 only) ----------------------------------------------------------

function get(url, headers) {
  const target = new URL(url);
  if (target.hostname !== HOST) return Promise.reject(new BenchError(`refusing to contact ${target.hostname}`));
  return new Promise((resolve, reject) => {
    const req = httpRequest(target, { method: 'GET', headers, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => {
        body += chunk;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      res.on('error', reject);
    });
    req.setTimeout(10_000, () => req.destroy(new BenchError(`GET ${url}: no answer within 10 s`)));
    req.on('error', reject);
    req.end();
  });
}

async function getJson(url, headers) {
  const answer = await get(url, headers);
  if (answer.status !== 200) throw new BenchError(`GET ${url} answered ${answer.status}: ${answer.body}`);
  return JSON.parse(answer.body);
}
