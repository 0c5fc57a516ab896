/**
 * A `harvester worker --metrics-port` serves Prometheus metrics that add up: scraped after a run
 * made through a proxy that cuts some answers after the API charged them (lost calls) against an
 * emulator whose rate limit another user of the key uses up meanwhile (429s), and parsed by a Prometheus parser we
 * did not write (Python's prometheus_client), the credits charged are the emulator's ledger, the
 * calls are the warehouse's api_calls plus the lost ones, and the items are the warehouse's rows.
 * The worker is the real CLI in a process of its own; the run is started by the real CLI.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { startCorruptingProxy, type CorruptingProxy } from '../../src/emulator/corrupting-proxy.js';
import { queryWarehouse } from '../../src/warehouse/query.js';
import { CLI, runCli } from '../support/cli.js';
import { startTestEmulator, waitFor, type TestEmulator } from '../support/emulator.js';
import { runPythonAsync } from '../support/python.js';

const KEY = 'sk_live_worker_metrics';
const name = `metrics-${Date.now().toString(36)}`;

let emulator: TestEmulator;
let proxy: CorruptingProxy;
let worker: ChildProcess;
let workerLog = '';
let metricsUrl: string;
let env: Record<string, string>;
let configFile: string;
let dataDir: string;

beforeAll(async () => {
  // A rate limit that another user of the key, below, uses up: some of the run's answers are 429s.
  emulator = await startTestEmulator({ apiKeys: [KEY], rateLimit: 10 });
  // Every 7th content call's body is cut after the API charged it: a lost call, bought again.
  proxy = await startCorruptingProxy({ upstream: new URL(emulator.baseUrl).origin, choose: (call) => (call.number % 7 === 0 ? { kind: 'cut_body' } : undefined) });
  const dir = mkdtempSync(join(tmpdir(), 'worker-metrics-'));
  dataDir = join(dir, 'data');
  env = {
    TEMPORAL_ADDRESS: inject('temporalAddress'),
    HARVESTER_TASK_QUEUE: `metrics-${Date.now()}`,
    HARVESTER_DATA_DIR: dataDir,
    SOCIAL_API_BASE_URL: proxy.baseUrl,
    SOCIAL_API_KEY: KEY,
    LOG_LEVEL: 'error',
  };
  const handle = (await emulator.catalog()).tiktok.handles[5]!;
  configFile = join(dir, 'harvests.yaml');
  writeFileSync(
    configFile,
    `harvests:\n  - name: ${name}\n    budget: { credits: 10000 }\n    concurrency: { calls: 8 }\n    channels:\n      - { platform: tiktok, handle: ${handle}, content: videos, max_items: 30 }\n    enrich: { stats: true }\n`,
  );
  worker = spawn(process.execPath, [CLI, 'worker', '--metrics-port', '0'], { env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'pipe'] });
  worker.stderr!.setEncoding('utf8').on('data', (chunk: string) => (workerLog += chunk));
  metricsUrl = await waitFor(async () => /metrics at (http:\/\/\S+\/metrics)/.exec(workerLog)?.[1], 30_000, `the worker to serve metrics (its log: ${workerLog})`);
  await waitFor(async () => (/polling task queue/.test(workerLog) ? true : undefined), 30_000, 'the worker to poll');
}, 60_000);

afterAll(async () => {
  if (worker && worker.exitCode === null) {
    const exited = new Promise((resolve) => worker.once('exit', resolve));
    worker.kill('SIGTERM');
    await exited;
  }
  await proxy?.close();
  await emulator?.close();
});

/** One sample of the exposition, as prometheus_client parsed it. */
interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** The worker's metrics as it serves them (during the run: only looked through, not parsed). */
async function scrapedText(): Promise<string> {
  return (await fetch(metricsUrl)).text();
}

/** The worker's metrics, scraped and parsed by Python's prometheus_client. */
async function scrape(): Promise<Sample[]> {
  const script = [
    'import json, sys, urllib.request',
    'from prometheus_client.parser import text_string_to_metric_families',
    'text = urllib.request.urlopen(sys.argv[1]).read().decode()',
    'print(json.dumps([{"name": s.name, "labels": s.labels, "value": s.value} for f in text_string_to_metric_families(text) for s in f.samples]))',
  ].join('\n');
  const result = await runPythonAsync(script, [metricsUrl]);
  expect(result.code, result.stderr).toBe(0);
  return JSON.parse(result.stdout) as Sample[];
}

function total(samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  return samples.filter((sample) => sample.name === name && Object.entries(labels).every(([key, value]) => sample.labels[key] === value)).reduce((sum, sample) => sum + sample.value, 0);
}

describe('a worker serves Prometheus metrics that add up', () => {
  it('credits charged are the ledger, calls are api_calls plus the lost ones, items are the warehouse rows; 429s, loads and the run are counted', async () => {
    const running = runCli(['run', name, '--config', configFile, '--no-local-worker', '--json'], env);
    let ended = false;
    void running.finally(() => (ended = true));
    // The worker's client paces its calls to the API's limit, so another user of the key takes the
    // tokens (free calls, as fast as they come) until the worker has met a 429, scraped as it runs.
    while (!ended && !(await scrapedText()).includes('outcome="rate_limited"')) {
      for (let call = 0; call < 20; call++) await emulator.call('/webhooks');
    }
    const run = await running;
    expect(run.code, `${run.stderr}\n${workerLog}`).toBe(0);
    const summary = JSON.parse(run.stdout) as { runId: string; status: string; creditsSpent: number; itemsLanded: number; callsLost: number };
    expect(summary.status).toBe('completed');
    expect(proxy.spoiled.cut_body).toBeGreaterThan(0);
    expect(summary.callsLost).toBe(proxy.spoiled.cut_body);

    const samples = await scrape();
    const labels = { harvest: name };
    const ledger = (await emulator.ledger(KEY)).reduce((sum, row) => sum + row.credits, 0);
    expect(total(samples, 'harvester_credits_charged_total', labels)).toBe(ledger);
    expect(ledger).toBe(summary.creditsSpent);

    const apiCalls = Number((await queryWarehouse(dataDir, `SELECT count(*) AS n FROM api_calls WHERE run_id = '${summary.runId}'`)).rows[0]!.n);
    const answered = total(samples, 'harvester_calls_total', { ...labels, outcome: 'answered' });
    const lost = total(samples, 'harvester_calls_total', { ...labels, outcome: 'lost' });
    expect(answered).toBe(apiCalls);
    expect(lost).toBe(summary.callsLost);
    expect(answered + lost).toBe(apiCalls + summary.callsLost);
    // The rate limit was hit, and each 429 counted.
    expect(total(samples, 'harvester_calls_total', { ...labels, outcome: 'rate_limited' })).toBeGreaterThan(0);

    const items = Number((await queryWarehouse(dataDir, 'SELECT count(*) AS n FROM items')).rows[0]!.n);
    expect(total(samples, 'harvester_items_landed_total', { ...labels, endpoint: 'tiktok/channel-videos' })).toBe(items);
    expect(items).toBe(summary.itemsLanded);

    // Nothing is held or waiting once the run has ended and loaded.
    expect(total(samples, 'harvester_credits_held', labels)).toBe(0);
    expect(total(samples, 'harvester_landings_waiting')).toBe(0);
    expect(total(samples, 'harvester_loads_total', { kind: 'final', outcome: 'ok' })).toBe(1);
    expect(total(samples, 'harvester_load_duration_seconds_count', { kind: 'final' })).toBe(1);
    expect(total(samples, 'harvester_runs_finished_total', { harvest: name, status: 'completed' })).toBe(1);
    expect(total(samples, 'harvester_credits_remaining')).toBeGreaterThan(0);
    // The Temporal SDK's own worker metrics, on the same endpoint.
    expect(samples.some((sample) => sample.name.startsWith('temporal_'))).toBe(true);
  }, 120_000);
});
