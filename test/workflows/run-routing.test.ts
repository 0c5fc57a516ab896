/**
 * A run lands where it was asked: it carries the identity of its data directory, a worker of
 * another one refuses it, and `harvester run`'s own worker polls a task queue of its own, so it
 * serves that run only and stopping it cuts no other run's work. The built CLI in its own
 * processes, real workers, the emulator over HTTP, and a namespace of this file's own on the
 * shared Temporal dev server, where workers poll the default task queue (`harvester`) as users' do.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { Client, Connection } from '@temporalio/client';
import type { SocialApiClient } from '../../src/api/client.js';
import { lakeCatalogFile, storeIdFile } from '../../src/store/layout.js';
import { queryWarehouse } from '../../src/warehouse/query.js';
import type { HarvestSummary } from '../../workflows/harvest.js';
import { clientFor } from '../support/client.js';
import { CLI, runCli, type CliResult } from '../support/cli.js';
import { startTestEmulator, waitFor, type TestEmulator } from '../support/emulator.js';
import { registerTestNamespace, startTestWorker } from '../support/temporal.js';

const KEY = 'sk_live_run_routing';
const NAMESPACE = `run-routing-${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;
let emulator: TestEmulator;
let api: SocialApiClient;
let handles: string[];
let dir: string;

beforeAll(async () => {
  // Answers a little slow, as a real API's: runs overlap the way they do in daily use.
  emulator = await startTestEmulator({ apiKeys: [KEY], latencyMs: 40 });
  api = clientFor(emulator, { apiKey: KEY });
  handles = (await emulator.catalog()).tiktok.handles;
  dir = mkdtempSync(join(tmpdir(), 'run-routing-'));
  await registerTestNamespace(NAMESPACE);
});
afterAll(async () => {
  await api?.close();
  await emulator?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** The environment of a `harvester` command for one data directory, on this file's namespace; no task queue set. */
function envFor(dataDir: string): Record<string, string> {
  return {
    TEMPORAL_ADDRESS: inject('temporalAddress'),
    TEMPORAL_NAMESPACE: NAMESPACE,
    HARVESTER_TASK_QUEUE: '',
    HARVESTER_DATA_DIR: dataDir,
    SOCIAL_API_BASE_URL: emulator.baseUrl,
    SOCIAL_API_KEY: KEY,
    LOG_LEVEL: 'error',
  };
}

/** A config file with one harvest of TikTok channels (their videos, `maxItems` each). */
function configOf(name: string, channels: string[], maxItems: number, extra = ''): string {
  const file = join(dir, `${name}.yaml`);
  const lines = channels.map((handle) => `      - { platform: tiktok, handle: ${handle}, content: videos, max_items: ${maxItems} }`);
  writeFileSync(file, `harvests:\n  - name: ${name}\n    budget: { credits: 100000 }\n    channels:\n${lines.join('\n')}\n${extra}`);
  return file;
}

interface LakeRows {
  runs: string[];
  targets: string[];
  items: number;
  /** The request ids of the billed calls the lake holds. */
  requests: string[];
}

/** What a data directory's lake holds: the runs and targets its calls were made for, its items, its billed calls. */
async function lakeRows(dataDir: string): Promise<LakeRows> {
  const column = async (sql: string, name: string) => (await queryWarehouse(dataDir, sql)).rows.map((row) => String(row[name]));
  return {
    runs: await column('SELECT DISTINCT run_id FROM api_calls ORDER BY run_id', 'run_id'),
    targets: await column('SELECT DISTINCT target FROM api_calls ORDER BY target', 'target'),
    items: Number((await column('SELECT count(*) AS n FROM items', 'n'))[0]),
    requests: await column('SELECT request_id FROM api_calls WHERE credits > 0 ORDER BY request_id', 'request_id'),
  };
}

/** The request ids of the emulator's billed calls, in order. */
async function billedRequests(): Promise<string[]> {
  return (await emulator.ledger(KEY)).filter((row) => row.credits > 0).map((row) => row.request_id);
}

/** `harvester …` as its own process, its stderr seen as it comes; a variable given as undefined is unset. */
function startCli(args: string[], env: Record<string, string | undefined>, cwd?: string) {
  const merged: NodeJS.ProcessEnv = { ...process.env, ...env };
  for (const [name, value] of Object.entries(env)) if (value === undefined) delete merged[name];
  const child = spawn(process.execPath, [CLI, ...args], { env: merged, cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  const output = { stdout: '', stderr: '' };
  child.stdout.on('data', (chunk: Buffer) => (output.stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output.stderr += chunk.toString()));
  const done = new Promise<CliResult>((resolve) => child.once('close', (code) => resolve({ code, ...output })));
  /** Resolves with the first match of `pattern` on stderr, or undefined if the process ends first. */
  const said = async (pattern: RegExp): Promise<RegExpExecArray | undefined> => {
    for (;;) {
      const match = pattern.exec(output.stderr);
      if (match) return match;
      if (child.exitCode !== null || child.signalCode !== null) return undefined;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  };
  return { child, output, done, said };
}

function summaryOf(result: CliResult): HarvestSummary {
  expect(result.code, result.stderr).toBe(0);
  return JSON.parse(result.stdout) as HarvestSummary;
}

describe('a run lands in the data directory it was started for', () => {
  it('a standing worker of another data directory on the default task queue: `harvester run` is served by its own worker, and a run handed to the workers is refused, naming both directories', async () => {
    const standingDir = join(dir, 'standing');
    const standing = await startTestWorker(api, { dataDir: standingDir, taskQueue: 'harvester', namespace: NAMESPACE });
    try {
      const config = configOf('routed', [handles[0]!], 60);
      // The standing worker's directory has harvested before: a run it took would find the items known and buy almost nothing.
      expect(summaryOf(await runCli(['run', 'routed', '--config', config, '--no-local-worker', '--json'], envFor(standingDir)))).toMatchObject({ status: 'completed', itemsLanded: 60 });
      const standingRows = await lakeRows(standingDir);
      expect(standingRows.items).toBe(60);

      for (const attempt of [1, 2, 3]) {
        const fresh = join(dir, `fresh-${attempt}`);
        const result = await runCli(['run', 'routed', '--config', config, '--json'], envFor(fresh));
        const summary = summaryOf(result);
        expect(summary).toMatchObject({ status: 'completed', itemsLanded: 60 });
        // Landed, loaded and recorded in its own directory, and nothing of it in the standing worker's.
        expect(await lakeRows(fresh)).toMatchObject({ runs: [summary.runId], targets: [`channel:tiktok:${handles[0]}:videos`], items: 60 });
        expect(await lakeRows(standingDir)).toEqual(standingRows);
        expect(result.stderr).toContain(`started ${summary.runId}\nits data lands in the data directory ${fresh}\n`);
      }

      // Handed to the running workers for a directory none of them keeps: refused before anything is bought.
      const unserved = join(dir, 'unserved');
      const billedBefore = await billedRequests();
      const refused = await runCli(['run', 'routed', '--config', config, '--no-local-worker'], envFor(unserved));
      expect(refused.code).toBe(1);
      expect(refused.stdout).toBe('');
      expect(refused.stderr).toContain(`its data lands in the data directory ${unserved}: a worker that keeps its data elsewhere refuses the run\n`);
      expect(refused.stderr).toMatch(/harvester: run run-routed-\S+ failed: the run could not start: a worker that keeps its data elsewhere took the run's task: /);
      expect(refused.stderr).toContain(`was started for the data directory ${unserved}, and a worker on task queue "harvester" keeps its data in the data directory ${standingDir}, so it refused the task`);
      expect(refused.stderr).not.toContain(KEY);
      expect(await billedRequests()).toEqual(billedBefore);
      expect(await lakeRows(standingDir)).toEqual(standingRows);
      // The run named its directory (its store id is there), and nothing else was put in it.
      expect(existsSync(storeIdFile(unserved))).toBe(true);
      expect(existsSync(lakeCatalogFile(unserved))).toBe(false);
      expect(readdirSync(unserved)).toEqual(['state']);
    } finally {
      await standing.stop();
    }
  }, 180_000);

  it('two `harvester run`s at once, on two data directories: each lands only in its own, and every billed call in one of them', async () => {
    const [left, right] = [join(dir, 'left'), join(dir, 'right')];
    const billedBefore = new Set(await billedRequests());
    const [leftResult, rightResult] = await Promise.all([
      runCli(['run', 'left', '--config', configOf('left', [handles[1]!, handles[2]!], 100), '--json'], envFor(left)),
      runCli(['run', 'right', '--config', configOf('right', [handles[3]!, handles[4]!], 100), '--json'], envFor(right)),
    ]);
    const [leftRun, rightRun] = [summaryOf(leftResult), summaryOf(rightResult)];
    expect(leftRun).toMatchObject({ status: 'completed', itemsLanded: 200 });
    expect(rightRun).toMatchObject({ status: 'completed', itemsLanded: 200 });
    const [leftRows, rightRows] = [await lakeRows(left), await lakeRows(right)];
    expect(leftRows).toMatchObject({ runs: [leftRun.runId], targets: [handles[1], handles[2]].map((handle) => `channel:tiktok:${handle}:videos`).sort(), items: 200 });
    expect(rightRows).toMatchObject({ runs: [rightRun.runId], targets: [handles[3], handles[4]].map((handle) => `channel:tiktok:${handle}:videos`).sort(), items: 200 });
    // The emulator's ledger: each billed call of the two runs is in exactly one lake.
    const billed = (await billedRequests()).filter((request) => !billedBefore.has(request)).sort();
    expect([...leftRows.requests, ...rightRows.requests].sort()).toEqual(billed);
    expect(leftRows.requests.filter((request) => rightRows.requests.includes(request))).toEqual([]);
  }, 180_000);

  it("a `harvester run` that ends stops its worker without cancelling any work of another run going on", { tags: ['long'], timeout: 180_000 }, async () => {
    const [longDir, shortDir] = [join(dir, 'long'), join(dir, 'short')];
    // A run of many targets, two at a time, each a few seconds of enrichment calls: new work
    // starts all along it, while a short run starts, ends, and stops its worker.
    const longConfig = configOf('long', handles.slice(5, 11), 100, '    enrich: { stats: true }\n    concurrency: { targets: 2, calls: 1 }\n');
    const long = startCli(['run', 'long', '--config', longConfig, '--json'], envFor(longDir));
    await long.said(/^started \S+$/m);
    const short = summaryOf(await runCli(['run', 'short', '--config', configOf('short', [handles[11]!], 50, '    enrich: { stats: true }\n    concurrency: { calls: 2 }\n'), '--json'], envFor(shortDir)));
    expect(short).toMatchObject({ status: 'completed', itemsLanded: 50 });
    const longRun = summaryOf(await long.done);
    expect(longRun).toMatchObject({ status: 'completed', itemsLanded: 600, callsLost: 0, enrichment: { calls: 600, failed: 0 } });
    // Every activity of the long run ran once, to its end: none was cancelled, failed or timed out and tried again.
    const connection = await Connection.connect({ address: inject('temporalAddress') });
    try {
      const history = await new Client({ connection, namespace: NAMESPACE }).workflow.getHandle(longRun.runId).fetchHistory();
      const events = history.events ?? [];
      const interrupted = events.filter((event) => event.activityTaskFailedEventAttributes || event.activityTaskTimedOutEventAttributes || event.activityTaskCanceledEventAttributes);
      expect(interrupted).toEqual([]);
      const attempts = events.flatMap((event) => (event.activityTaskStartedEventAttributes ? [event.activityTaskStartedEventAttributes.attempt] : []));
      expect(attempts.length).toBeGreaterThan(6);
      expect(attempts.every((attempt) => attempt === 1)).toBe(true);
    } finally {
      await connection.close();
    }
    expect((await lakeRows(longDir)).runs).toEqual([longRun.runId]);
    expect((await lakeRows(shortDir)).runs).toEqual([short.runId]);
  });

  it('a `harvester run` stopped by Ctrl-C leaves its run to a worker of its data directory on the queue it names, which finishes it there', async () => {
    const dataDir = join(dir, 'interrupted');
    const config = configOf('interrupted', [handles[1]!], 100, '    enrich: { stats: true }\n    concurrency: { calls: 1 }\n');
    const run = startCli(['run', 'interrupted', '--config', config, '--json'], envFor(dataDir));
    const runId = (await run.said(/^started (\S+)$/m))![1]!;
    // Under way: its first page landed.
    await waitFor(() => (existsSync(join(dataDir, 'segments', runId)) ? true : undefined), 30_000, 'a page to land');
    run.child.kill('SIGINT');
    const stopped = await run.done;
    expect(stopped.code).toBe(130);
    const resume = /`HARVESTER_TASK_QUEUE=(\S+) harvester worker`, goes on with it/.exec(stopped.stderr);
    expect(resume, stopped.stderr).not.toBeNull();
    expect(resume![1]).toBe(`harvester-${runId}`);
    const worker = startCli(['worker'], { ...envFor(dataDir), HARVESTER_TASK_QUEUE: resume![1]! });
    const connection = await Connection.connect({ address: inject('temporalAddress') });
    try {
      const summary = (await new Client({ connection, namespace: NAMESPACE }).workflow.getHandle(runId).result()) as HarvestSummary;
      expect(summary, JSON.stringify({ reason: summary.reason, targets: summary.targets })).toMatchObject({ status: 'completed', itemsLanded: 100 });
      expect(await lakeRows(dataDir)).toMatchObject({ runs: [runId], items: 100 });
    } finally {
      await connection.close();
      worker.child.kill('SIGTERM');
      await worker.done;
    }
  }, 180_000);

  it('a run handed to the workers from where no data directory is named says that its data lands where the worker that takes it keeps its data', async () => {
    const standingDir = join(dir, 'standing-elsewhere');
    const standing = await startTestWorker(api, { dataDir: standingDir, taskQueue: 'harvester', namespace: NAMESPACE });
    // A folder without ./data, and no HARVESTER_DATA_DIR: a machine that has none of the workers' data.
    const cwd = mkdtempSync(join(dir, 'elsewhere-'));
    try {
      const config = configOf('unnamed', [handles[2]!], 20);
      const result = await startCli(['run', 'unnamed', '--config', config, '--no-local-worker', '--json'], { ...envFor(standingDir), HARVESTER_DATA_DIR: undefined, HARVESTER_STORAGE: undefined }, cwd).done;
      const summary = summaryOf(result);
      expect(result.stderr).toContain(
        `started ${summary.runId}\nwarning: this command names no data directory (HARVESTER_DATA_DIR is not set, and ${join(cwd, 'data')} holds none), so the run's data lands wherever the worker that takes it keeps its data\n`,
      );
      expect(summary).toMatchObject({ status: 'completed', itemsLanded: 20 });
      expect((await lakeRows(standingDir)).runs).toEqual([summary.runId]);
      // Nothing made where the command ran.
      expect(readdirSync(cwd)).toEqual([]);
    } finally {
      await standing.stop();
    }
  }, 120_000);

  it('a data directory emptied under its standing worker is a new store, and the next run started for it is served there', async () => {
    const dataDir = join(dir, 'emptied');
    const standing = await startTestWorker(api, { dataDir, taskQueue: 'harvester', namespace: NAMESPACE });
    try {
      const config = configOf('emptied', [handles[3]!], 20);
      const first = summaryOf(await runCli(['run', 'emptied', '--config', config, '--no-local-worker', '--json'], envFor(dataDir)));
      expect(first).toMatchObject({ status: 'completed', itemsLanded: 20 });
      // As the benchmarks do between runs: the directory emptied, the worker left running.
      rmSync(dataDir, { recursive: true, force: true });
      mkdirSync(dataDir);
      const second = summaryOf(await runCli(['run', 'emptied', '--config', config, '--no-local-worker', '--json'], envFor(dataDir)));
      expect(second).toMatchObject({ status: 'completed', itemsLanded: 20 });
      expect((await lakeRows(dataDir)).runs).toEqual([second.runId]);
    } finally {
      await standing.stop();
    }
  }, 120_000);

  it('on a task queue it was told to share, a `harvester run`\'s worker that stops lets the work of another run in flight on it finish, cancelling none of it', { tags: ['long'], timeout: 240_000 }, async () => {
    const dataDir = join(dir, 'shared-queue');
    const queue = `shared-${Date.now().toString(36)}`;
    const sharing = { ...envFor(dataDir), HARVESTER_TASK_QUEUE: queue };
    // A long run handed to the queue's workers: at first there are none.
    const longConfig = configOf('handed', handles.slice(0, 4), 200, '    enrich: { stats: true }\n    concurrency: { targets: 2, calls: 1 }\n');
    const long = startCli(['run', 'handed', '--config', longConfig, '--no-local-worker', '--json'], sharing);
    const longId = (await long.said(/^started (\S+)$/m))![1]!;
    // A short run whose own worker shares the queue: that worker takes the long run's work too, and
    // stops when the short run ends, with the long run's listings in flight on it.
    const short = summaryOf(await runCli(['run', 'short-sharing', '--config', configOf('short-sharing', [handles[4]!], 20), '--json'], sharing));
    expect(short).toMatchObject({ status: 'completed', itemsLanded: 20 });
    // Then a standing worker of the directory finishes the long run.
    const standing = startCli(['worker'], sharing);
    try {
      const longRun = summaryOf(await long.done);
      expect(longRun.runId).toBe(longId);
      expect(longRun).toMatchObject({ status: 'completed', itemsLanded: 800, callsLost: 0, enrichment: { calls: 800, failed: 0 } });
      const connection = await Connection.connect({ address: inject('temporalAddress') });
      try {
        const events = (await new Client({ connection, namespace: NAMESPACE }).workflow.getHandle(longId).fetchHistory()).events ?? [];
        const interrupted = events.filter((event) => event.activityTaskFailedEventAttributes || event.activityTaskTimedOutEventAttributes || event.activityTaskCanceledEventAttributes);
        expect(interrupted).toEqual([]);
        const attempts = events.flatMap((event) => (event.activityTaskStartedEventAttributes ? [event.activityTaskStartedEventAttributes.attempt] : []));
        expect(attempts.every((attempt) => attempt === 1)).toBe(true);
      } finally {
        await connection.close();
      }
      expect((await lakeRows(dataDir)).runs).toEqual([longId, short.runId].sort());
    } finally {
      standing.child.kill('SIGTERM');
      await standing.done;
    }
  });
});
