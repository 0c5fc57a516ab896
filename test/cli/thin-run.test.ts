/**
 * `harvester run --no-local-worker` only starts a run and watches it, so it loads only what that
 * takes: not Temporal's worker, the activities, the API client (undici), DuckDB or the logger.
 * And it starts the run over Temporal's HTTP API before it loads Temporal's client (about 0.3 s),
 * then follows it at a low priority, yielding the CPU to the worker.
 * The real CLI in its own process, with a module-load recorder, hands its run to a real worker.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { getPriority, tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { SocialApiClient } from '../../src/api/client.js';
import { CLI, type CliResult } from '../support/cli.js';
import { clientFor } from '../support/client.js';
import { startTestEmulator, type TestEmulator } from '../support/emulator.js';
import { startTestWorker, temporalClient, type TestWorker } from '../support/temporal.js';

const KEY = 'sk_live_thin_run';
let emulator: TestEmulator;
let api: SocialApiClient;
let worker: TestWorker;
let dir: string;

beforeAll(async () => {
  emulator = await startTestEmulator({ apiKeys: [KEY] });
  api = clientFor(emulator);
  worker = await startTestWorker(api);
  dir = mkdtempSync(join(tmpdir(), 'thin-run-'));
});
afterAll(async () => {
  await worker?.stop();
  await api?.close();
  await emulator?.close();
});

/**
 * Runs the CLI with a recorder of every module it loads: ES modules (and the CommonJS packages they
 * import) through a load hook, which runs on Node's loader thread, so it appends to the file itself,
 * each with the time it loaded; CommonJS ones from require's cache at exit. Resolves with the
 * result, the loaded modules' URLs and paths, and when the first of Temporal's client loaded.
 */
function runRecorded(args: string[], env: Record<string, string>): Promise<CliResult & { modules: string[]; clientLoadedAt: number | undefined; priorities: Set<number> }> {
  const log = join(dir, 'modules.txt');
  const hooks = join(dir, 'hooks.mjs');
  const recorder = join(dir, 'recorder.mjs');
  writeFileSync(log, '');
  writeFileSync(hooks, `import { appendFileSync } from 'node:fs';\nexport async function load(url, context, next) {\n  appendFileSync(${JSON.stringify(log)}, Date.now() + ' ' + url + '\\n');\n  return next(url, context);\n}\n`);
  writeFileSync(
    recorder,
    `import { appendFileSync } from 'node:fs';\nimport { createRequire, register } from 'node:module';\n` +
      `register(${JSON.stringify(pathToFileURL(hooks).href)});\n` +
      `process.on('exit', () => appendFileSync(${JSON.stringify(log)}, Object.keys(createRequire(import.meta.url).cache).join('\\n') + '\\n'));\n`,
  );
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', pathToFileURL(recorder).href, CLI, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    // Its scheduling priority (nice) as it goes, read every few milliseconds.
    const priorities = new Set<number>();
    const watching = setInterval(() => {
      try {
        if (child.pid) priorities.add(getPriority(child.pid));
      } catch {
        // Exited between two readings.
      }
    }, 10);
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.once('error', reject);
    child.once('close', (code) => {
      clearInterval(watching);
      const lines = readFileSync(log, 'utf8').split('\n').filter(Boolean);
      const timed = lines.map((line) => /^(\d+) (.*)$/.exec(line)).filter((match) => match !== null);
      const clientLoadedAt = timed.find((match) => match[2]!.includes('/node_modules/@temporalio/client/'))?.[1];
      resolve({ code, stdout, stderr, modules: lines.map((line) => line.replace(/^\d+ /, '')), clientLoadedAt: clientLoadedAt === undefined ? undefined : Number(clientLoadedAt), priorities });
    });
  });
}

describe('harvester run --no-local-worker', () => {
  it('starts the run over HTTP before it loads Temporal\'s client, watches it to its end, and loads neither a worker, the activities, the API client, DuckDB nor the logger', async () => {
    const handle = (await emulator.catalog()).tiktok.handles[0]!;
    const config = join(dir, 'harvests.yaml');
    writeFileSync(config, `harvests:\n  - name: thin\n    budget: { credits: 100000 }\n    channels:\n      - { platform: tiktok, handle: ${handle}, content: videos, max_items: 100 }\n    enrich: { stats: true }\n`);
    const result = await runRecorded(['run', 'thin', '--config', config, '--no-local-worker', '--json'], {
      TEMPORAL_ADDRESS: inject('temporalAddress'),
      TEMPORAL_HTTP_ADDRESS: inject('temporalHttpAddress'),
      HARVESTER_TASK_QUEUE: worker.taskQueue,
      // The worker's own: a run is served only by a worker of the data directory it was started for.
      HARVESTER_DATA_DIR: worker.dataDir,
      SOCIAL_API_BASE_URL: emulator.baseUrl,
      SOCIAL_API_KEY: KEY,
      LOG_LEVEL: 'error',
    });
    expect(result.code, result.stderr).toBe(0);
    const summary = JSON.parse(result.stdout) as { runId: string };
    expect(summary).toMatchObject({ status: 'completed', itemsLanded: 100, enrichment: { calls: 100 } });
    // Temporal had the run before the command loaded its client: the start went over HTTP.
    const temporal = await temporalClient();
    try {
      const started = (await temporal.workflow.getHandle(summary.runId).describe()).startTime.getTime();
      expect(result.clientLoadedAt, 'Temporal\'s client was loaded').toBeDefined();
      expect(started).toBeLessThanOrEqual(result.clientLoadedAt!);
    } finally {
      await temporal.connection.close();
    }
    // Once its run started, the command only follows it, at a low priority (nice 10): the worker's work does not wait for it.
    expect([...result.priorities]).toContain(10);
    // The recorder saw what it did load: the config, Temporal's client and the run's own modules.
    const loaded = (fragment: string) => result.modules.some((module) => module.includes(fragment));
    for (const needed of ['/src/config/harvest-config.js', '/node_modules/@temporalio/client/', '/src/cli/run-progress.js']) expect(loaded(needed), needed).toBe(true);
    const unwanted = [
      '/node_modules/@temporalio/worker/',
      '/node_modules/@temporalio/core-bridge/',
      '/node_modules/@duckdb/',
      '/node_modules/undici/',
      '/node_modules/pino/',
      // The shared store's catalog client: this run's store is a data directory.
      '/node_modules/pg/',
      '/activities/',
      '/src/warehouse/',
      '/src/api/client.js',
      '/src/cli/engine-context.js',
      '/src/temporal/worker.js',
      '/src/logger.js',
    ];
    expect(unwanted.filter(loaded)).toEqual([]);
  });
});
