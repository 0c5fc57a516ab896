import { createHash } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { Client, Connection, ScheduleNotFoundError } from '@temporalio/client';
import { msToTs } from '@temporalio/common/lib/time.js';
import { DefaultLogger, NativeConnection, Runtime } from '@temporalio/worker';
import type { SocialApiClient } from '../../src/api/client.js';
import { parseHarvestConfig } from '../../src/config/harvest-config.js';
import { SEARCH_ATTRIBUTES } from '../../src/temporal/dev-server.js';
import { dataDirectoryIdentity } from '../../src/store/store-identity.js';
import { harvestScheduleIds, scheduleIdOf, type HarvestScheduleView } from '../../src/temporal/schedules.js';
import { createHarvestWorker } from '../../src/temporal/worker.js';
import type { HarvestSummary } from '../../workflows/harvest.js';
import { clientFor } from '../support/client.js';
import { runCli, type CliResult } from '../support/cli.js';
import { startTestEmulator, waitFor, type TestEmulator } from '../support/emulator.js';

/*
 * The dev server is shared by every test file, and the webhook bridge pauses and resumes every
 * harvest-* schedule it sees: so this file works in a namespace of its own, where no other test
 * touches its schedules nor sees them. Harvest names are unique to this run all the same, and the
 * schedules start runs on this file's task queue, served by a real worker on an emulator.
 */
const run = `${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;
const NAMESPACE = `schedules-test-${run}`;
const TASK_QUEUE = `schedules-${run}`;
const A = `sch-${run}-a`;
const B = `sch-${run}-b`;
const C = `sch-${run}-c`;
const E = `sch-${run}-e`;
const IDLE = `sch-${run}-idle`;
const FOREIGN = `sch-${run}-foreign`;

/** The Keyword type of the API's IndexedValueType enum (@temporalio/proto is not a direct dependency). */
const INDEXED_VALUE_TYPE_KEYWORD = 2;

let emulator: TestEmulator;
let api: SocialApiClient;
let connection: Connection;
let temporal: Client;
let stopWorker: () => Promise<void>;
let dir: string;
let workerDir: string;
let env: Record<string, string>;
let handle: string;

/** A namespace of this file's own, with the search attributes runs set, ready to take schedules. */
async function registerNamespace(): Promise<void> {
  await connection.workflowService.registerNamespace({ namespace: NAMESPACE, workflowExecutionRetentionPeriod: msToTs('1 day') });
  const searchAttributes = Object.fromEntries(Object.keys(SEARCH_ATTRIBUTES).map((name) => [name, INDEXED_VALUE_TYPE_KEYWORD]));
  await waitFor(
    () => connection.operatorService.addSearchAttributes({ namespace: NAMESPACE, searchAttributes }).then(() => true, () => undefined),
    15_000,
    'the namespace to take search attributes',
  );
  await waitFor(() => harvestScheduleIds(temporal).then(() => true, () => undefined), 15_000, 'the namespace to answer');
}

/** A real worker in this file's namespace (test/support's startTestWorker works in default). */
async function startWorker(apiClient: SocialApiClient, dataDir: string): Promise<() => Promise<void>> {
  try {
    Runtime.install({ logger: new DefaultLogger('WARN') });
  } catch {
    // Installed already, by this process's first worker.
  }
  const native = await NativeConnection.connect({ address: inject('temporalAddress') });
  const worker = await createHarvestWorker({
    connection: native,
    namespace: NAMESPACE,
    taskQueue: TASK_QUEUE,
    deps: { client: apiClient, dataDir },
  });
  const running = worker.run();
  return async () => {
    worker.shutdown();
    await running;
    await native.close();
  };
}

beforeAll(async () => {
  emulator = await startTestEmulator();
  api = clientFor(emulator);
  connection = await Connection.connect({ address: inject('temporalAddress') });
  temporal = new Client({ connection, namespace: NAMESPACE });
  await registerNamespace();
  // The schedules' runs are for the data directory `apply` is given (HARVESTER_DATA_DIR): the worker's.
  workerDir = mkdtempSync(join(tmpdir(), 'schedules-worker-'));
  stopWorker = await startWorker(api, workerDir);
  dir = mkdtempSync(join(tmpdir(), 'schedules-'));
  env = { TEMPORAL_ADDRESS: inject('temporalAddress'), TEMPORAL_NAMESPACE: NAMESPACE, HARVESTER_TASK_QUEUE: TASK_QUEUE, HARVESTER_DATA_DIR: workerDir };
  handle = (await emulator.catalog()).tiktok.handles[3]!;
});

afterAll(async () => {
  for (const name of [A, B, C, E, IDLE, FOREIGN]) {
    await temporal.schedule
      .getHandle(scheduleIdOf(name))
      .delete()
      .catch(() => undefined);
  }
  for await (const execution of temporal.workflow.list({ query: `WorkflowId STARTS_WITH 'sched-${IDLE}' AND ExecutionStatus = 'Running'` })) {
    await temporal.workflow
      .getHandle(execution.workflowId)
      .terminate('test over')
      .catch(() => undefined);
  }
  await stopWorker();
  await api.close();
  await connection.close();
  await emulator.close();
});

interface Shape {
  aCron?: string;
  bMaxResults?: number;
  bScheduled?: boolean;
  withE?: boolean;
}

function configText({ aCron = '0 6 * * *', bMaxResults = 5, bScheduled = true, withE = true }: Shape = {}): string {
  return `harvests:
  - name: ${A}
    schedule: { cron: "${aCron}", timezone: UTC }
    budget: { credits: 100 }
    channels:
      - { platform: tiktok, handle: ${handle}, content: videos, max_items: 3 }
  - name: ${B}
${bScheduled ? '    schedule: { cron: "30 5 * * 1", timezone: Europe/Berlin }\n' : ''}    budget: { credits: 100 }
    searches:
      - { platform: tiktok, query: sourdough, max_results: ${bMaxResults} }
  - name: ${C}
    budget: { credits: 100 }
    channels:
      - { platform: tiktok, handle: ${handle}, content: videos, max_items: 3 }
${
  withE
    ? `  - name: ${E}
    schedule: { cron: "0 0 1 * *", timezone: UTC }
    budget: { credits: 100 }
    channels:
      - { platform: tiktok, handle: ${handle}, content: videos, max_items: 3 }
`
    : ''
}`;
}

function writeConfig(shape: Shape = {}): string {
  const file = join(dir, 'harvests.yaml');
  writeFileSync(file, configText(shape));
  return file;
}

async function cli(args: string[], extraEnv: Record<string, string> = {}): Promise<CliResult> {
  return runCli(['schedules', ...args], { ...env, ...extraEnv });
}

async function apply(shape: Shape = {}): Promise<CliResult> {
  const result = await cli(['apply', '--config', writeConfig(shape)]);
  expect(result.stderr).toBe('');
  expect(result.code).toBe(0);
  return result;
}

/** The line `apply` printed for a schedule. */
function lineFor(output: string, name: string): string | undefined {
  return output.split('\n').find((line) => line.split(/\s+/)[1] === scheduleIdOf(name));
}

async function notFound(name: string): Promise<boolean> {
  try {
    await temporal.schedule.getHandle(scheduleIdOf(name)).describe();
    return false;
  } catch (error) {
    if (error instanceof ScheduleNotFoundError) return true;
    throw error;
  }
}

/** Listing is eventually consistent: waits until the schedules are listed. */
async function waitListed(names: string[]): Promise<void> {
  await waitFor(async () => {
    const ids = await harvestScheduleIds(temporal);
    return names.every((name) => ids.includes(scheduleIdOf(name))) ? true : undefined;
  }, 15_000, `${names.join(', ')} to be listed`);
}

async function listed(): Promise<Map<string, HarvestScheduleView>> {
  const result = await cli(['list', '--json']);
  expect(result.code).toBe(0);
  return new Map((JSON.parse(result.stdout) as HarvestScheduleView[]).map((view) => [view.harvest, view]));
}

describe('harvester schedules', () => {
  it('apply creates the schedules of the harvests that have one', async () => {
    const result = await apply();
    expect(lineFor(result.stdout, A)).toMatch(/^created +\S+ +0 6 \* \* \* \(UTC\)$/);
    expect(lineFor(result.stdout, B)).toMatch(/^created +\S+ +30 5 \* \* 1 \(Europe\/Berlin\)$/);
    expect(lineFor(result.stdout, E)).toMatch(/^created /);
    expect(lineFor(result.stdout, C)).toBeUndefined();
    expect(result.stdout).toMatch(new RegExp(`^3 created, 0 updated, 0 deleted, 0 kept \\(task queue ${TASK_QUEUE};`, 'm'));
    expect(await notFound(C)).toBe(true);

    const harvestA = parseHarvestConfig(configText(), 'x.yaml').harvests[0]!;
    const described = await temporal.schedule.getHandle(scheduleIdOf(A)).describe();
    expect(described.action).toMatchObject({ workflowType: 'harvestWorkflow', taskQueue: TASK_QUEUE, workflowId: `sched-${A}`, args: [{ harvest: harvestA }] });
    expect(described.policies).toMatchObject({ overlap: 'SKIP', catchupWindow: 3_600_000 });
    expect(described.spec.timezone).toBe('UTC');
    expect(described.spec.calendars).toHaveLength(1);
    expect(described.spec.calendars![0]).toMatchObject({ hour: [{ start: 6, end: 6, step: 1 }], minute: [{ start: 0, end: 0, step: 1 }] });
    expect(described.state.paused).toBe(false);
    expect((await temporal.schedule.getHandle(scheduleIdOf(B)).describe()).spec.timezone).toBe('Europe/Berlin');
  });

  it('apply again keeps them', async () => {
    const result = await apply();
    for (const name of [A, B, E]) expect(lineFor(result.stdout, name)).toMatch(/^kept +\S+ +matches the config$/);
    expect(result.stdout).toMatch(/^0 created, 0 updated, 0 deleted, 3 kept /m);
  });

  it('apply records the API its runs are for (base URL and key fingerprint, never the key), and another key updates it', async () => {
    const api = { SOCIAL_API_BASE_URL: 'http://127.0.0.1:8787', SOCIAL_API_KEY: 'sk_live_schedules_one' };
    const first = await cli(['apply', '--config', writeConfig()], api);
    expect(first.code).toBe(0);
    expect(lineFor(first.stdout, A)).toMatch(/^updated .*the API its runs are for/);
    const described = await temporal.schedule.getHandle(scheduleIdOf(A)).describe();
    const args = described.action.type === 'startWorkflow' ? (described.action.args as { api?: unknown }[]) : [];
    expect(args[0]?.api).toEqual({ baseUrl: 'http://127.0.0.1:8787/v1', keyFingerprint: createHash('sha256').update('sk_live_schedules_one').digest('hex').slice(0, 12) });
    expect(JSON.stringify(described.action)).not.toContain('sk_live_schedules_one');
    expect(lineFor((await cli(['apply', '--config', writeConfig()], api)).stdout, A)).toMatch(/^kept /);
    const other = await cli(['apply', '--config', writeConfig()], { ...api, SOCIAL_API_KEY: 'sk_live_schedules_two' });
    expect(lineFor(other.stdout, A)).toMatch(/^updated .*the API its runs are for/);
    // Back to no API in the environment: the runs are unchecked again, as before this setting existed.
    expect(lineFor((await apply()).stdout, A)).toMatch(/^updated .*the API its runs are for/);
  });

  it('apply records the data directory its runs are for (its store id), and another data directory updates it', async () => {
    const described = await temporal.schedule.getHandle(scheduleIdOf(A)).describe();
    const args = described.action.type === 'startWorkflow' ? (described.action.args as { store?: unknown }[]) : [];
    expect(args[0]?.store).toEqual(dataDirectoryIdentity(workerDir));
    const elsewhere = await cli(['apply', '--config', writeConfig()], { HARVESTER_DATA_DIR: join(dir, 'elsewhere') });
    expect(lineFor(elsewhere.stdout, A)).toMatch(/^updated .*the data directory its runs are for/);
    expect(lineFor((await apply()).stdout, A)).toMatch(/^updated .*the data directory its runs are for/);
  });

  it('pause --reason: list shows it paused, with the reason', async () => {
    const paused = await cli(['pause', scheduleIdOf(A), '--reason', 'quota review', '--config', writeConfig()]);
    expect(paused.code).toBe(0);
    expect(paused.stdout).toBe(`paused ${scheduleIdOf(A)}: quota review\n`);

    await waitListed([A, B]);
    const views = await listed();
    expect(views.get(A)).toMatchObject({ id: scheduleIdOf(A), cron: '0 6 * * *', timezone: 'UTC', paused: true, note: 'quota review', taskQueue: TASK_QUEUE, overlap: 'SKIP' });
    // Paused, it starts no run: none is shown as next.
    expect(views.get(A)!.nextRuns).toEqual([]);
    expect(views.get(B)!.nextRuns[0]).toMatch(/T03:30:00Z$|T04:30:00Z$/);
    expect(views.get(B)).toMatchObject({ cron: '30 5 * * 1', timezone: 'Europe/Berlin', paused: false, recentRuns: [] });

    const text = await cli(['list']);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/^schedule +cron +timezone +paused +note +next run +recent runs +task queue$/m);
    const row = text.stdout.split('\n').find((line) => line.startsWith(`${scheduleIdOf(A)} `));
    expect(row).toMatch(/ 0 6 \* \* \* +UTC +yes +quota review +none \(paused\) +none /);
  });

  it('a changed cron or harvest updates the schedule, and a paused one stays paused', async () => {
    const result = await apply({ aCron: '15 7 * * *', bMaxResults: 8 });
    expect(lineFor(result.stdout, A)).toMatch(/^updated +\S+ +cron 0 6 \* \* \* → 15 7 \* \* \*$/);
    expect(lineFor(result.stdout, B)).toMatch(/^updated +\S+ +harvest config \(the run arguments\)$/);
    expect(lineFor(result.stdout, E)).toMatch(/^kept /);

    const described = await temporal.schedule.getHandle(scheduleIdOf(A)).describe();
    expect(described.spec.calendars![0]).toMatchObject({ hour: [{ start: 7, end: 7, step: 1 }], minute: [{ start: 15, end: 15, step: 1 }], comment: '15 7 * * *' });
    expect(described.state).toMatchObject({ paused: true, note: 'quota review' });
    const argsB = (await temporal.schedule.getHandle(scheduleIdOf(B)).describe()).action.args as [{ harvest: { searches: { max_results: number }[] } }];
    expect(argsB[0].harvest.searches[0]!.max_results).toBe(8);

    expect(lineFor((await apply({ aCron: '15 7 * * *', bMaxResults: 8 })).stdout, A)).toMatch(/^kept /);
  });

  it('resume, by the schedule id `list` shows as well as by the harvest name', async () => {
    const resumed = await cli(['resume', scheduleIdOf(A)]);
    expect(resumed.code).toBe(0);
    expect(resumed.stdout).toBe(`resumed ${scheduleIdOf(A)}\n`);
    expect((await temporal.schedule.getHandle(scheduleIdOf(A)).describe()).state.paused).toBe(false);
    await waitFor(async () => ((await listed()).get(A)?.paused === false ? true : undefined), 10_000, 'list to show it resumed');
    // Resumed, its next run is shown again (the cron was changed to 15 7 * * * above).
    expect((await listed()).get(A)!.nextRuns[0]).toMatch(/T07:15:00Z$/);

    const again = await cli(['resume', A]);
    expect(again.stdout).toBe(`${scheduleIdOf(A)} was not paused\n`);
  });

  it('trigger starts a run now (named by its schedule id), and the worker completes it', async () => {
    const result = await cli(['trigger', scheduleIdOf(A)]);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    const workflowId = /^started (\S+)$/m.exec(result.stdout)?.[1];
    expect(workflowId).toMatch(new RegExp(`^sched-${A}-`));
    const summary = (await temporal.workflow.getHandle(workflowId!).result()) as HarvestSummary;
    expect(summary).toMatchObject({ harvest: A, status: 'completed', itemsLanded: 3 });
    const described = await temporal.schedule.getHandle(scheduleIdOf(A)).describe();
    expect(described.info.recentActions.map((action) => action.action.workflow.workflowId)).toContain(workflowId);
    expect((await emulator.ledger()).map((row) => row.units)).toEqual([3]);
  });

  it('trigger honours the overlap policy: while a run is still going, none is started', async () => {
    // A task queue no worker serves: the first run never finishes.
    const idleEnv = { HARVESTER_TASK_QUEUE: `idle-${run}` };
    const file = join(dir, 'idle.yaml');
    writeFileSync(file, `harvests:\n  - name: ${IDLE}\n    schedule: { cron: "0 0 1 1 *", timezone: UTC }\n    budget: { credits: 10 }\n    channels:\n      - { platform: tiktok, handle: ${handle}, content: videos, max_items: 3 }\n`);
    const applied = await cli(['apply', '--config', file], idleEnv);
    expect(applied.code).toBe(0);
    expect(lineFor(applied.stdout, IDLE)).toMatch(/^created /);
    // This file's other schedules start runs on another task queue: not this config's to delete.
    expect(applied.stdout).not.toMatch(/^deleted /m);

    const first = await cli(['trigger', IDLE, '--config', file], idleEnv);
    const workflowId = /^started (\S+)$/m.exec(first.stdout)?.[1];
    expect(workflowId).toMatch(new RegExp(`^sched-${IDLE}-`));
    const second = await cli(['trigger', IDLE, '--config', file], idleEnv);
    expect(second.code).toBe(0);
    expect(second.stdout).toBe(`skipped: ${workflowId} is still going (overlap policy SKIP)\n`);
    await temporal.workflow.getHandle(workflowId!).terminate('test over');
  });

  it('apply deletes the schedules of harvests gone or unscheduled, and leaves other task queues alone', async () => {
    await temporal.schedule.create({
      scheduleId: scheduleIdOf(FOREIGN),
      spec: { cronExpressions: ['0 6 * * *'] },
      action: { type: 'startWorkflow', workflowType: 'harvestWorkflow', taskQueue: `elsewhere-${run}`, args: [] },
    });
    await waitListed([A, B, E, FOREIGN]);
    const result = await apply({ aCron: '15 7 * * *', bMaxResults: 8, bScheduled: false, withE: false });
    expect(lineFor(result.stdout, A)).toMatch(/^kept /);
    expect(lineFor(result.stdout, B)).toMatch(new RegExp(`^deleted +\\S+ +harvest ${B} has no schedule in the config$`));
    expect(lineFor(result.stdout, E)).toMatch(new RegExp(`^deleted +\\S+ +no harvest ${E} in the config$`));
    expect(lineFor(result.stdout, FOREIGN)).toMatch(new RegExp(`^ignored +\\S+ +starts runs on task queue elsewhere-${run}, not ${TASK_QUEUE}$`));
    expect(await notFound(B)).toBe(true);
    expect(await notFound(E)).toBe(true);
    expect(await notFound(FOREIGN)).toBe(false);
    expect(await notFound(A)).toBe(false);
  });

  it('delete removes a schedule; unknown harvests and missing schedules are clear errors', async () => {
    const config = writeConfig({ aCron: '15 7 * * *', bScheduled: false, withE: false });
    const deleted = await cli(['delete', scheduleIdOf(A), '--config', config]);
    expect(deleted.code).toBe(0);
    expect(deleted.stdout).toBe(`deleted ${scheduleIdOf(A)}\n`);
    expect(deleted.stderr).toContain('the next `harvester schedules apply` creates it again');
    expect(await notFound(A)).toBe(true);

    const address = inject('temporalAddress');
    const missing = await cli(['pause', A, '--config', config]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toBe(`harvester: no schedule ${scheduleIdOf(A)} on Temporal at ${address} (namespace ${NAMESPACE}); harvest ${A} has one in ${config}: run \`harvester schedules apply\` to create it\n`);
    const unscheduled = await cli(['trigger', C, '--config', config]);
    expect(unscheduled.code).toBe(1);
    expect(unscheduled.stderr).toContain(`harvest ${C} has no schedule in ${config}`);
    const unknown = await cli(['resume', `sch-${run}-nope`, '--config', config]);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain(`no schedule ${scheduleIdOf(`sch-${run}-nope`)} on Temporal`);
    expect(unknown.stderr).toContain(`has no harvest named "sch-${run}-nope" either`);
    const again = await cli(['delete', A, '--config', config]);
    expect(again.code).toBe(1);

    const badConfig = join(dir, 'bad.yaml');
    writeFileSync(badConfig, 'harvests:\n  - name: Bad Name\n');
    const bad = await cli(['apply', '--config', badConfig]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(new RegExp(`^harvester: ${badConfig}:2: harvests\\[0\\]\\.name: `));
  });
});
