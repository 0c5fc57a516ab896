/**
 * Temporal's time-skipping test environment (TestWorkflowEnvironment.createTimeSkipping()): a test
 * server whose clock jumps to the next timer whenever no workflow task or activity is running, so
 * a workflow's hour of job polling or day of backoff passes in milliseconds. The server is the Java
 * SDK's test server that `npm run setup -- --for-tests` installs from Maven Central into
 * .tools/temporal-test-server (@temporalio/testing would otherwise download one at run time). The
 * workflows are the bundle the build made (npm run build), as for every worker in the tests; the
 * activities are the test's stubs, run in this process.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { afterAll, beforeAll } from 'vitest';
import { DefaultLogger, Runtime, Worker } from '@temporalio/worker';
import { TOOLS_DIR } from '../../src/project-paths.js';
import { SEARCH_ATTRIBUTES } from '../../src/temporal/dev-server.js';
import { harvestSummary } from '../../src/temporal/run-summary.js';
import type { HarvestInput, HarvestSummary } from '../../workflows/harvest.js';
import type { ListingPosition } from '../../src/harvest/run-state.js';
import { prices, workflowBundle } from './temporal.js';

export const TEST_SERVER = join(TOOLS_DIR, 'temporal-test-server', 'temporal-test-server');
const INDEXED_VALUE_TYPE_KEYWORD = 2;

/**
 * A test file's time-skipping environment: started before its tests (given to `started`), torn down
 * after them. One server per file: its clock is the file's.
 */
export function useTimeSkipping(started: (env: TestWorkflowEnvironment) => void): void {
  let env: TestWorkflowEnvironment | undefined;
  beforeAll(async () => {
    env = await startTimeSkipping();
    started(env);
  }, 120_000);
  afterAll(async () => {
    await env?.teardown();
  });
}

/** A time-skipping environment with the harvest's search attributes registered. */
export async function startTimeSkipping(): Promise<TestWorkflowEnvironment> {
  if (!existsSync(TEST_SERVER)) throw new Error(`no Temporal test server at ${TEST_SERVER}: run \`npm run setup -- --for-tests\``);
  // Errors only, as for the tests' real workers: the tests assert on what the runs did.
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  const env = await startTestServer();
  const searchAttributes = Object.fromEntries(Object.keys(SEARCH_ATTRIBUTES).map((name) => [name, INDEXED_VALUE_TYPE_KEYWORD]));
  await env.connection.operatorService.addSearchAttributes({ namespace: env.namespace ?? 'default', searchAttributes });
  return env;
}

/**
 * The SDK gives the test server 5 s to answer on its port (a fixed limit in sdk-core), and a JVM
 * starting on a busy machine can take longer: a server that did not answer in time is killed by the
 * SDK, and another started, up to three in all. (The second starts faster: its jars are cached.)
 */
async function startTestServer(): Promise<TestWorkflowEnvironment> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await TestWorkflowEnvironment.createTimeSkipping({ server: { executable: { type: 'existing-path', path: TEST_SERVER } } });
    } catch (error) {
      if (attempt === 3 || !/did not start within/.test(String(error))) throw error;
    }
  }
}

/** A worker of the bundled workflows with `activities` (stubs), on its own task queue. */
export async function stubbedWorker(env: TestWorkflowEnvironment, taskQueue: string, activities: object): Promise<Worker> {
  return Worker.create({ connection: env.nativeConnection, namespace: env.namespace ?? 'default', taskQueue, workflowBundle: workflowBundle(), activities });
}

/**
 * Runs `harvestWorkflow` with `input` on a worker of `activities` (stubs), on a task queue named
 * for its workflow id, to its end, and gives its summary however the run ended: a harvest that
 * ended `failed` fails its workflow execution, and its summary is then read from the failure.
 */
export async function runStubbedHarvest(env: TestWorkflowEnvironment, workflowId: string, activities: object, input: HarvestInput): Promise<HarvestSummary> {
  const worker = await stubbedWorker(env, workflowId, activities);
  return worker.runUntil(async () => harvestSummary(await env.client.workflow.start('harvestWorkflow', { taskQueue: workflowId, workflowId, args: [input] })));
}

/** What the workflow gives a stubbed `harvestTarget`: the parts of its input the stubs read. */
export interface ListingWorkInput {
  target: { key: string; maxItems: number; platform: string; endpoint: string };
  from: ListingPosition;
  grant: number;
  workId: string;
}

/** A page of a TikTok channel's videos: the API's largest synchronous page, at channel-videos' price. */
export const PAGE_ITEMS = 50;
export const PAGE_CREDITS = PAGE_ITEMS * prices['tiktok/channel-videos'];

/**
 * What a listing work (no enrichment calls) returns when it lands as many whole pages of
 * PAGE_ITEMS as its grant buys at the target's price, up to the target's max_items or the end of
 * a list of `listLength` items: done at either, else grant_spent. What a stub of `harvestTarget`
 * answers with.
 */
export function pagesBought(input: ListingWorkInput, listLength = Number.POSITIVE_INFINITY) {
  const price = prices[`${input.target.platform}/${input.target.endpoint}` as keyof typeof prices];
  const wanted = Math.min(input.target.maxItems, listLength) - input.from.items;
  const items = Math.min(wanted, Math.floor(input.grant / (PAGE_ITEMS * price)) * PAGE_ITEMS);
  const pages = Math.ceil(items / PAGE_ITEMS);
  const position = { ...input.from, page: input.from.page + pages, items: input.from.items + items, offset: input.from.offset + items };
  const ended = position.items >= input.target.maxItems ? 'max_items' : position.items >= listLength ? 'list_end' : undefined;
  const enrichment = { calls: 0, skipped: 0, failed: 0 };
  return { status: ended ? 'done' : 'grant_spent', ...(ended ? { ended } : {}), position, pagesLanded: pages, itemsLanded: items, credits: items * price, lostCalls: 0, enrichment };
}

/**
 * Stubs of the activities every run calls around its steps: prepareRun (the price table, nothing
 * known, and `prepared`'s parts), a journal (workSpent) that says a failed work spent nothing, the
 * schedule's pause and the final load, each recorded.
 */
export function runStubs(prepared: object = {}) {
  const paused: { harvest: string; reason: string }[] = [];
  const finished: { status: string; creditsSpent: number }[] = [];
  const activities = {
    prepareRun: async () => ({ prices, knowledge: {}, ...prepared }),
    workSpent: async () => ({ credits: 0, lostCalls: 0 }),
    pauseSchedule: async (input: { harvest: string; reason: string }) => void paused.push({ harvest: input.harvest, reason: input.reason }),
    finishRun: async (input: { status: string; creditsSpent: number }) => {
      finished.push({ status: input.status, creditsSpent: input.creditsSpent });
      return { landingsLoaded: 0, rowsLoaded: 0, quarantined: [] };
    },
  };
  return { activities, paused, finished };
}
