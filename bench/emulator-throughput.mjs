#!/usr/bin/env node
/**
 * Throughput benchmark of the built emulator (dist/), driven by autocannon.
 *
 *   npm run bench:emulator                 # builds, then runs this file
 *   BENCH_SECONDS=10 node bench/emulator-throughput.mjs
 *
 * The emulator runs in a child process (`harvester emulator --port 0 ...`), so the load generator
 * and the server do not share one event loop. A bare node:http server, also in a child process,
 * answers the very same response bodies and gives the baseline: what this machine can serve at all.
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
 * measured), BENCH_CONNECTIONS (default 32), BENCH_PAGES (default 8).
 * Only 127.0.0.1 is contacted. The exit code is 0 whether targets are met or missed; it is 1 only
 * when the benchmark itself could not run (build missing, a server not starting, a broken warm-up).
 */
import { fork, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { request as httpRequest, createServer } from 'node:http';
import { availableParallelism } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const cliMain = join(root, 'dist', 'src', 'cli', 'main.js');
const HOST = '127.0.0.1';
const API_KEY = 'sk_live_bench';
const PAGE_LIMIT = 50;

// ---- baseline server mode: `node bench/emulator-throughput.mjs --baseline-server` (forked) --------

if (process.argv[2] === '--baseline-server') {
  process.once('message', (bodies) => {
    const routes = new Map(Object.entries(bodies).map(([path, body]) => [path, Buffer.from(body)]));
    const server = createServer((req, res) => {
      const body = routes.get(req.url?.split('?')[0] ?? '');
      if (!body) {
        res.writeHead(404, { 'content-type': 'application/json; charset=utf-8', 'content-length': '2' });
        res.end('{}');
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': String(body.length) });
      res.end(body);
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
    };
    if (!existsSync(cliMain)) throw new BenchError(`${cliMain} is missing; run \`npm run build\` first (npm run bench:emulator does)`);
    const autocannonVersion = JSON.parse(readFileSync(join(root, 'node_modules', 'autocannon', 'package.json'), 'utf8')).version;
    process.stdout.write(
      `emulator throughput: ${settings.seconds} s per scenario (+${settings.warmupSeconds} s warm-up), ${settings.connections} connections, ` +
        `node ${process.version}, ${availableParallelism()} CPUs, autocannon ${autocannonVersion}\n`,
    );

    const emulator = await startEmulatorProcess(children);
    const plan = await prepare(emulator.origin, settings.pages);
    const baseline = await startBaselineProcess(children, { '/stats': plan.statsBody, '/list': plan.listBody });

    const auth = { authorization: `Bearer ${API_KEY}` };
    const scenarios = [
      {
        name: 'baseline: node:http, fixed stats-sized JSON',
        origin: baseline.origin,
        paths: ['/stats'],
        headers: {},
        itemsPerRequest: 0,
        bodyBytes: Buffer.byteLength(plan.statsBody),
      },
      {
        name: 'emulator: tiktok/stats (cache HIT)',
        origin: emulator.origin,
        paths: [plan.statsPath],
        headers: auth,
        itemsPerRequest: 0,
        target: { kind: 'req/s', value: 5_000 },
        baseline: 'baseline: node:http, fixed stats-sized JSON',
        bodyBytes: Buffer.byteLength(plan.statsBody),
      },
      {
        name: 'baseline: node:http, fixed 50-item-page JSON',
        origin: baseline.origin,
        paths: ['/list'],
        headers: {},
        itemsPerRequest: PAGE_LIMIT,
        bodyBytes: Buffer.byteLength(plan.listBody),
      },
      {
        name: `emulator: tiktok/channel-videos limit=50, cached (${plan.listPaths.length} pages)`,
        origin: emulator.origin,
        paths: plan.listPaths,
        headers: auth,
        itemsPerRequest: PAGE_LIMIT,
        target: { kind: 'items/s', value: 50_000 },
        baseline: 'baseline: node:http, fixed 50-item-page JSON',
        bodyBytes: Buffer.byteLength(plan.listBody),
      },
      {
        name: `emulator: tiktok/channel-videos limit=50, fresh=true (${plan.listPaths.length} pages)`,
        origin: emulator.origin,
        paths: plan.listPaths.map((path) => `${path}&fresh=true`),
        headers: auth,
        itemsPerRequest: PAGE_LIMIT,
        target: { kind: 'items/s', value: 50_000 },
        baseline: 'baseline: node:http, fixed 50-item-page JSON',
        bodyBytes: Buffer.byteLength(plan.listBody),
        info: true,
      },
    ];

    const rows = [];
    for (const scenario of scenarios) {
      process.stderr.write(`bench: ${scenario.name} ...\n`);
      if (settings.warmupSeconds > 0) await load(scenario, settings.connections, settings.warmupSeconds);
      const result = await load(scenario, settings.connections, settings.seconds);
      rows.push(measure(scenario, result));
    }
    // The stats entry must still be a HIT after the run (a MISS would mean the scenario measured misses).
    const after = await get(`${emulator.origin}${plan.statsPath}`, auth);
    if (after.headers['x-cache'] !== 'HIT') process.stdout.write(`note: stats answered X-Cache ${after.headers['x-cache']} after its run\n`);

    for (const row of rows) {
      const base = rows.find((candidate) => candidate.name === row.scenario.baseline);
      row.ratio = base && base.reqPerSec > 0 ? row.reqPerSec / base.reqPerSec : undefined;
    }
    process.stdout.write(`\n${table(rows)}\n`);
    const notes = rows.filter((row) => row.non2xx > 0 || row.errors > 0);
    for (const row of notes) {
      process.stdout.write(`note: ${row.name}: ${row.non2xx} non-2xx answers (${JSON.stringify(row.statusCodes)}), ${row.errors} connection errors, ${row.timeouts} timeouts\n`);
    }
    process.stdout.write(
      '\nreq/s counts 2xx answers only, over the measured duration; items/s = 2xx req/s x 50 on list pages; ' +
        'ratio = req/s / the baseline req/s for a body of the same bytes. The fresh=true row is information beyond the two targets.\n',
    );
  } catch (error) {
    process.stderr.write(`bench: broken: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exitCode = 1;
  } finally {
    stopChildren();
  }
}

/** Starts `harvester emulator` on a free port and reads its base URL from stdout. */
function startEmulatorProcess(children) {
  const args = [
    cliMain, 'emulator',
    '--host', HOST,
    '--port', '0',
    '--rate-limit', '1000000000',
    '--api-key', API_KEY,
    // Enough credits that a long run never meets a 402 (a 50-item page costs 150).
    '--credits', String(Number.MAX_SAFE_INTEGER),
    // Cursors gathered before the runs must outlive them, whatever BENCH_SECONDS is.
    '--cursor-ttl', '86400',
  ];
  const child = spawn(process.execPath, args, { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (chunk) => {
    stderr += chunk;
  });
  return new Promise((resolve, reject) => {
    let stdout = '';
    const timer = setTimeout(() => reject(new BenchError(`the emulator did not print SOCIAL_API_BASE_URL within 20 s; stderr: ${stderr}`)), 20_000);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new BenchError(`the emulator exited early (code ${code}, signal ${signal}); stderr: ${stderr}`));
    });
    child.stdout.setEncoding('utf8').on('data', (chunk) => {
      stdout += chunk;
      const match = /^SOCIAL_API_BASE_URL=(\S+)$/m.exec(stdout);
      if (!match) return;
      clearTimeout(timer);
      const base = new URL(match[1]);
      if (base.hostname !== HOST) reject(new BenchError(`the emulator listens on ${base.hostname}, not ${HOST}`));
      else resolve({ origin: base.origin });
    });
  });
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
  let listBody = '';
  for (const handle of handles) {
    let path = `/v1/tiktok/channel-videos?handle=${encodeURIComponent(handle)}&limit=${PAGE_LIMIT}`;
    for (let page = 0; page < pages; page++) {
      const answer = await get(`${origin}${path}`, auth);
      if (answer.status !== 200) throw new BenchError(`GET ${path} answered ${answer.status}: ${answer.body}`);
      const json = JSON.parse(answer.body);
      if (json.data.length !== PAGE_LIMIT) throw new BenchError(`GET ${path} returned ${json.data.length} items, not ${PAGE_LIMIT}`);
      listPaths.push(path);
      if (!listBody) listBody = answer.body;
      if (!json.meta.has_more) break;
      path = `/v1/tiktok/channel-videos?handle=${encodeURIComponent(handle)}&limit=${PAGE_LIMIT}&cursor=${encodeURIComponent(json.meta.cursor)}`;
    }
  }
  // Every gathered page must now be a HIT.
  const check = await get(`${origin}${listPaths.at(-1)}`, auth);
  if (check.headers['x-cache'] !== 'HIT') throw new BenchError(`a walked channel-videos page answered X-Cache ${check.headers['x-cache']}, expected HIT`);
  return { statsPath, statsBody: warm.body, listPaths, listBody };
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

function table(rows) {
  const format = (value, digits = 0) =>
    value === undefined ? '—' : value.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
  const header = ['scenario', 'body bytes', 'req/s', 'items/s', 'p99 ms', 'target', 'result', 'vs baseline'];
  const lines = rows.map((row) => {
    const { target } = row.scenario;
    const measured = target?.kind === 'req/s' ? row.reqPerSec : row.itemsPerSec;
    const verdict = target ? `${measured >= target.value ? 'PASS' : 'FAIL'}${row.scenario.info ? ' (info)' : ''}` : '—';
    return [
      row.name,
      format(row.scenario.bodyBytes),
      format(row.reqPerSec),
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
