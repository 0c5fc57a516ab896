/**
 * The crash-consistency harness (issue 38): a harvest runs under strace, which records every write
 * and sync its worker and load process make in the data directory; at a crash point the process tree
 * is SIGKILLed, and the data directory is made what a disk keeps after a power loss there (every
 * write not synced before the point dropped, every name not synced lost: test/support/crash-disk.ts).
 * Then, as after a reboot: the lake opens and every table reads whole; every answer and call the
 * lake had committed before the point is there, once; a new worker finishes the run; every item is
 * there once; each call's credits in the lake are the ledger's; no answer the lake had loaded is
 * bought again; and the next run completes.
 *
 * Every crash point asserts all of that: on a tree where the lake's files and a job's results are
 * synced before anything names them, each passes. The suite runs three points, one for each kind of
 * the worker's own landing: a listing's pages (listing-pages), a job's results (job-results) and a
 * run's end (after-run-end, its final load committed and its segments removed). The three at the
 * lake's own writes (after-load-commit, mid-load, after-maintenance) run in `npm run bench:crash`
 * (bench/crash-consistency.mjs: CRASH_POINTS=all, all six; or names, comma-separated), as the
 * suite's test of a load's power loss is test/warehouse/lake-durability.test.ts (a load's files and
 * folders synced before the catalog's commit names them, and a power loss right after loads
 * loses nothing of them, under strace). CRASH_REPORT=<file> appends what each point found.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { appendFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Client } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { SocialApiClient } from '../../src/api/client.js';
import type { HarvestSummary } from '../../workflows/harvest.js';
import { CLI } from '../support/cli.js';
import { clientFor } from '../support/client.js';
import { copyAtKill, parseTrace, pathsUnder, reconstructDisk, type Reconstruction, type TraceCall } from '../support/crash-disk.js';
import { answersInSegments, crashWhen, debugNote, duplicates, killTree, readLake, recordServed, startTraced, type LakeFacts, type TracedProcess } from '../support/crash-harness.js';
import { startTestEmulator, type TestEmulator } from '../support/emulator.js';
import { harvestFrom, temporalClient } from '../support/temporal.js';

type Catalog = Awaited<ReturnType<TestEmulator['catalog']>>;

interface CrashPoint {
  name: string;
  /**
   * Where the point runs: `suite`, in `npm test`; `long`, a point of a minute or more, in the
   * suite's long tier (`npm run test:long`, CI); `bench`, only in `npm run bench:crash` (all six).
   */
  tier: 'suite' | 'long' | 'bench';
  /** The harvest (YAML) and the channels whose first items it must hold in the end. */
  harvest(catalog: Catalog): { yaml: string; channels: Array<{ handle: string; items: number }> };
  /** strace `-e inject=` rules (a kill with no watcher's delay). */
  inject?: string[];
  /** Kill when this is true of a call of the record; or `afterRun`: once the run completed; `maintain`: after `harvester maintain`. */
  trigger?: (call: TraceCall, earlier: TraceCall[]) => boolean;
  when?: 'afterRun' | 'afterMaintenance';
  /** The worker's environment besides the harness's. */
  env?: Record<string, string>;
}

/**
 * The crash points at a load's Parquet files: every insert writes one (no rows kept in the
 * catalog, lake.ts's inliningRowLimit), as a load of more rows than the limit does. The other
 * points run with the default, whose small loads keep their rows in the catalog.
 */
const FILES_FOR_EVERY_INSERT = { HARVESTER_LAKE_INLINE_ROWS: '0' };

const isSegment = (path: string) => path.endsWith('.seg');
const isParquet = (path: string) => path.endsWith('.parquet');
const channel = (handle: string, items: number, extra = '') => `
harvests:
  - name: crash
    budget: { credits: 200000 }
    concurrency: { targets: 2, calls: 4 }${extra}
    channels:
      - { platform: tiktok, handle: ${handle}, content: videos, max_items: ${items} }
    enrich: { stats: true }
`;

const POINTS: CrashPoint[] = [
  {
    // A listing's pages landing: the kill comes at a page's write after the segment was synced once
    // (a checkpoint heartbeated), so the retry resumes from a checkpoint with pages past it lost.
    name: 'listing-pages',
    tier: 'suite',
    harvest: (catalog) => ({ yaml: channel(catalog.tiktok.handles[3]!, 300), channels: [{ handle: catalog.tiktok.handles[3]!, items: 300 }] }),
    trigger: (call, earlier) => call.name === 'write' && isSegment(call.path) && call.text.includes('/channel_') && earlier.some((c) => c.name === 'sync' && isSegment(c.path)),
  },
  {
    // An async job's results landing: killed on entering the first fdatasync of the run (the
    // first group commit after the results pages were written), before it runs.
    name: 'job-results',
    tier: 'long',
    harvest: (catalog) => ({ yaml: channel(catalog.tiktok.handles[4]!, 450, '\n    job_threshold: 100'), channels: [{ handle: catalog.tiktok.handles[4]!, items: 450 }] }),
    inject: ['fdatasync:signal=KILL:when=1'],
  },
  {
    // Right after a load's commit: SQLite removes the catalog's journal (the commit is done) after
    // the load wrote its Parquet files.
    name: 'after-load-commit',
    tier: 'bench',
    harvest: (catalog) => ({ yaml: channel(catalog.tiktok.handles[5]!, 60), channels: [{ handle: catalog.tiktok.handles[5]!, items: 60 }] }),
    trigger: (call, earlier) => call.name === 'unlink' && call.path.endsWith('catalog.sqlite-journal') && earlier.some((c) => c.name === 'write' && isParquet(c.path)),
    env: FILES_FOR_EVERY_INSERT,
  },
  {
    // In the middle of a load: its first Parquet write, before its commit.
    name: 'mid-load',
    tier: 'bench',
    harvest: (catalog) => ({ yaml: channel(catalog.tiktok.handles[6]!, 60), channels: [{ handle: catalog.tiktok.handles[6]!, items: 60 }] }),
    trigger: (call) => call.name === 'write' && isParquet(call.path),
    env: FILES_FOR_EVERY_INSERT,
  },
  {
    // After `harvester maintain` merged and cleaned up the files of two runs' loads.
    name: 'after-maintenance',
    tier: 'bench',
    harvest: (catalog) => ({ yaml: channel(catalog.tiktok.handles[7]!, 60), channels: [{ handle: catalog.tiktok.handles[7]!, items: 60 }] }),
    when: 'afterMaintenance',
  },
  {
    // After the run's end: it completed (its final load committed, its segments and journals removed).
    name: 'after-run-end',
    tier: 'suite',
    harvest: (catalog) => ({ yaml: channel(catalog.tiktok.handles[8]!, 60), channels: [{ handle: catalog.tiktok.handles[8]!, items: 60 }] }),
    when: 'afterRun',
  },
];

const wanted = process.env.CRASH_POINTS;
const selected = wanted === 'all' ? POINTS : wanted ? POINTS.filter((point) => wanted.split(',').includes(point.name)) : POINTS.filter((point) => point.tier !== 'bench');
const keyOf = (point: CrashPoint) => `sk_live_crash_${point.name.replaceAll('-', '_')}`;

let emulator: TestEmulator;
let temporal: Client;
let verify: SocialApiClient;
let served: ReturnType<typeof recordServed>;
beforeAll(async () => {
  emulator = await startTestEmulator({ apiKeys: ['sk_live_crash_verify', ...POINTS.map(keyOf)], latencyMs: 15, jobStepMs: 200 });
  temporal = await temporalClient();
  verify = clientFor(emulator, { apiKey: 'sk_live_crash_verify' });
  served = recordServed();
});
afterAll(async () => {
  served.stop();
  await verify.close();
  await temporal.connection.close();
  await emulator.close();
});

async function firstIds(handle: string, n: number): Promise<string[]> {
  const ids: string[] = [];
  for await (const page of verify.pages('tiktok', 'channel-videos', { handle }, { maxItems: n })) ids.push(...page.items.map((item) => `tiktok:${item.id}`));
  return ids;
}

/** A failed run's own reason (Temporal's error wraps it as its cause), on one line. */
function failedRun(error: Error): { status: string } {
  let cause: Error = error;
  while (cause.cause instanceof Error) cause = cause.cause;
  const reason = cause.message.split('\n')[0]!;
  return { status: reason.startsWith('failed') ? reason : `failed: ${reason}` };
}

function startWorker(env: Record<string, string>): ChildProcess {
  return spawn(process.execPath, [CLI, 'worker'], { env: { ...process.env, ...env, LOG_LEVEL: 'error' }, stdio: ['ignore', 'ignore', 'inherit'] });
}

async function stopWorker(worker: ChildProcess): Promise<void> {
  if (worker.exitCode !== null || worker.signalCode !== null) return;
  const exited = new Promise((resolve) => worker.once('exit', resolve));
  worker.kill('SIGTERM');
  await exited;
}

/** What the crash found at one point, for the report. */
interface PointReport {
  point: string;
  trigger: string;
  recorded: { calls: number; syncs: number };
  reconstruction: Reconstruction;
  lakeAtKill: Record<string, number> | string;
  /** Calls the ledger charged whose answers are not in the lake after the run: lost unsynced with the power (bought again), or in flight. */
  paidNotInLake?: { calls: number; credits: number };
  failures: string[];
}

/** Runs the harvest under strace to the crash point and crashes it there; gives the run's handle and the record's text. */
async function runToCrash(point: CrashPoint, base: string, env: Record<string, string>, yaml: string) {
  const dataDir = env.HARVESTER_DATA_DIR!;
  const harvest = harvestFrom(yaml);
  const traced: TracedProcess = startTraced(['worker'], env, join(base, 'worker.trace'), dataDir, point.inject ?? []);
  const start = (suffix: string) => temporal.workflow.start('harvestWorkflow', { taskQueue: env.HARVESTER_TASK_QUEUE!, workflowId: `crash-${point.name}-${suffix}-${Date.now()}`, args: [{ harvest, pageSize: 20 }] });
  debugNote(`${point.name}: starting the run`);
  const run = await start('a');
  debugNote(`${point.name}: started ${run.workflowId}`);
  const logs = [traced.log];
  let trigger = point.when ?? 'injected kill';
  if (point.trigger || point.inject) {
    const call = await crashWhen(traced, point.trigger ?? (() => false), 120_000, point.name);
    if (call) trigger = `${call.name} ${call.path.slice(dataDir.length + 1)} (record line ${call.line})`;
  } else {
    await run.result();
    if (point.when === 'afterMaintenance') {
      // A second run, so the lake has two loads' small files to merge; then the maintenance alone.
      await (await start('b')).result();
      await killTree(traced);
      const maintain = startTraced(['maintain', '--keep-hours', '0'], env, join(base, 'maintain.trace'), dataDir);
      await maintain.exited;
      logs.push(maintain.log);
    } else {
      await killTree(traced);
    }
  }
  return { run, trigger, text: logs.map((log) => readFileSync(log, 'latin1')).join('\n'), start };
}

async function checkPoint(point: CrashPoint): Promise<PointReport> {
  const base = mkdtempSync(join(tmpdir(), `crash-${point.name}-`));
  const dataDir = join(base, 'data');
  mkdirSync(dataDir);
  const apiKey = keyOf(point);
  const env = { TEMPORAL_ADDRESS: inject('temporalAddress'), HARVESTER_TASK_QUEUE: `crash-${point.name}-${Date.now()}`, HARVESTER_DATA_DIR: dataDir, SOCIAL_API_BASE_URL: emulator.baseUrl, SOCIAL_API_KEY: apiKey, ...point.env };
  const { yaml, channels } = point.harvest(await emulator.catalog());
  const existing = pathsUnder(dataDir);
  const { run, trigger, text, start } = await runToCrash(point, base, env, yaml);
  const servedAtKill = served.served.length;

  // The power loss: first what the processes had said (the page cache), then what the disk kept.
  const calls = parseTrace(text, dataDir);
  const atKillDir = join(base, 'at-kill');
  copyAtKill(dataDir, atKillDir);
  const atKill = existsSync(join(atKillDir, 'lake', 'catalog.sqlite')) ? await readLake(atKillDir).catch((error: Error) => error.message) : 'no lake yet';
  const reconstruction = reconstructDisk(dataDir, calls, existing);
  // Acknowledged before the point: what the lake had committed, and every answer the disk kept.
  const acknowledged = new Set([...(typeof atKill === 'string' ? [] : atKill.calls.map((call) => call.requestId)), ...(await answersInSegments(dataDir))]);
  const failures: string[] = [];
  const report: PointReport = {
    point: point.name,
    trigger,
    recorded: { calls: calls.length, syncs: calls.filter((call) => call.name === 'sync').length },
    reconstruction,
    lakeAtKill: typeof atKill === 'string' ? atKill : atKill.tables,
    failures,
  };

  // 1. The lake opens and every table reads whole; what it had committed is there, once. (A lake
  // made but holding no load yet may be lost whole: nothing in it was acknowledged.)
  if (typeof atKill !== 'string') {
    const afterCrash = await lakeOrFailure(dataDir, 'after the crash', failures, atKill.landings.length === 0);
    if (afterCrash) {
      const landings = new Set(afterCrash.landings);
      const lost = atKill.landings.filter((landing) => !landings.has(landing));
      if (lost.length) failures.push(`${lost.length} landings the lake had committed are gone after the crash, e.g. ${lost[0]}`);
    }
  }

  // 2. A new worker finishes the run: every item once, each call at the ledger's credits, nothing loaded bought again.
  const worker = startWorker(env);
  try {
    const summary = await withinSeconds(150, run.result(), 'the run did not end within 150 s of the restart');
    if (summary.status !== 'completed') failures.push(`the run after the restart ended ${summary.status}`);
    const afterRun = await lakeOrFailure(dataDir, 'after the run', failures);
    if (afterRun) report.paidNotInLake = await checkRun(afterRun, acknowledged, { channels, apiKey, servedAtKill }, failures);

    // 3. The next run completes, and the lake still holds everything once.
    const next = await withinSeconds(150, (await start('next')).result(), 'the next run did not end within 150 s');
    if (next.status !== 'completed') failures.push(`the next run ended ${next.status}`);
    const afterNext = await lakeOrFailure(dataDir, 'after the next run', failures);
    if (afterNext) noDuplicates(afterNext, failures, 'after the next run');
  } finally {
    await stopWorker(worker);
  }
  if (process.env.CRASH_REPORT) appendFileSync(process.env.CRASH_REPORT, `${JSON.stringify(report)}\n`);
  return report;
}

/** A run's summary, or `failed: <why>` when it failed or did not end in time. */
async function withinSeconds(seconds: number, result: Promise<unknown>, late: string): Promise<HarvestSummary> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise((_, reject) => (timer = setTimeout(() => reject(new Error(late)), seconds * 1000)));
  try {
    return (await Promise.race([result, timeout])) as HarvestSummary;
  } catch (error) {
    return failedRun(error as Error) as HarvestSummary;
  } finally {
    clearTimeout(timer);
  }
}

/** Reads the lake whole, or notes why it cannot be read; `mayBeMissing`: no catalog is no failure. */
async function lakeOrFailure(dataDir: string, when: string, failures: string[], mayBeMissing = false): Promise<LakeFacts | undefined> {
  if (mayBeMissing && !existsSync(join(dataDir, 'lake', 'catalog.sqlite'))) return undefined;
  try {
    return await readLake(dataDir);
  } catch (error) {
    failures.push(`the lake does not open ${when}: ${(error as Error).message.split('\n')[0]}`);
    return undefined;
  }
}

function noDuplicates(lake: LakeFacts, failures: string[], when: string) {
  for (const [what, values] of [['items', lake.items], ['landings', lake.landings], ['calls', lake.calls.map((call) => call.requestId)]] as const) {
    const twice = duplicates([...values]);
    if (twice.length) failures.push(`${twice.length} ${what} are in the lake more than once ${when}, e.g. ${twice[0]}`);
  }
}

/**
 * After the run: every item of the harvest's channels once; each call in the lake at the ledger's
 * credits; every answer acknowledged before the crash (loaded, or whole on the disk) in the lake and
 * not bought again. Answers landed but not yet synced may be lost with the power and bought again:
 * their number is reported, not held to a bound.
 */
async function checkRun(lake: LakeFacts, acknowledged: Set<string>, context: { channels: Array<{ handle: string; items: number }>; apiKey: string; servedAtKill: number }, failures: string[]) {
  const items = new Set(lake.items);
  for (const { handle, items: n } of context.channels) {
    const missing = (await firstIds(handle, n)).filter((id) => !items.has(id));
    if (missing.length) failures.push(`${missing.length} of the first ${n} items of ${handle} are not in the lake after the run, e.g. ${missing[0]}`);
  }
  noDuplicates(lake, failures, 'after the run');
  const ledger = await emulator.ledger(context.apiKey);
  const charged = new Map(ledger.map((row) => [row.request_id, row.credits]));
  const wrong = lake.calls.filter((call) => charged.get(call.requestId) !== call.credits);
  if (wrong.length) failures.push(`${wrong.length} calls in the lake are not at the ledger's credits, e.g. ${wrong[0]!.requestId}`);
  const inLake = new Set(lake.calls.map((call) => call.requestId));
  const lost = [...acknowledged].filter((id) => charged.has(id) && !inLake.has(id));
  if (lost.length) failures.push(`${lost.length} calls acknowledged before the crash are not in the lake after the run, e.g. ${lost[0]}`);
  const urlOf = new Set(served.served.filter((row) => acknowledged.has(row.requestId)).map((row) => row.url));
  const again = served.served.slice(context.servedAtKill).filter((row) => row.status === 200 && urlOf.has(row.url) && charged.has(row.requestId));
  if (again.length) failures.push(`${again.length} answers acknowledged before the crash were bought again, e.g. ${again[0]!.url}`);
  const paidNotInLake = ledger.filter((row) => !inLake.has(row.request_id));
  return { calls: paidNotInLake.length, credits: paidNotInLake.reduce((sum, row) => sum + row.credits, 0) };
}

describe('a power loss at each crash point loses nothing acknowledged and buys nothing loaded again', () => {
  for (const point of selected) {
    it(`crash point: ${point.name}`, { tags: point.tier === 'long' ? ['long'] : [], timeout: 420_000 }, async () => {
      const report = await checkPoint(point);
      expect(report.failures, JSON.stringify({ trigger: report.trigger, dropped: report.reconstruction.dropped }, null, 1)).toEqual([]);
    });
  }
});
