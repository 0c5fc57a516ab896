/**
 * The `list` step (workflows/listing.ts, workflows/steps.ts) and continue-as-new (workflows/harvest.ts)
 * on Temporal's time-skipping test server, with stubbed activities: the workflow is driven only
 * through its public entry point (`harvestWorkflow`) and the activity names a worker registers
 * (prepareRun, harvestTarget, workSpent, finishRun), so these tests hold while the workflow's
 * internals move. The stub of `harvestTarget` lands one page of a listing per work and charges it,
 * as a work whose grant or heartbeat ends it after a page would; the real listing is tested on the
 * emulator (harvest.test.ts, listing-faults.test.ts) and continue-as-new on a real server once
 * (harvest.test.ts, "a long harvest").
 */
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { describe, expect, it } from 'vitest';
import type { ListingPosition } from '../../src/harvest/run-state.js';
import type { HarvestSummary } from '../../workflows/harvest.js';
import { harvestFrom, prices } from '../support/temporal.js';
import { useTimeSkipping, stubbedWorker } from '../support/time-skipping.js';

let env: TestWorkflowEnvironment;

useTimeSkipping((started) => (env = started));

/** The API's largest synchronous page (PAGE_LIMITS.maxSynchronous). */
const PAGE_SIZE = 50;
const ITEM_PRICE = prices['tiktok/channel-videos'];
const PAGE_CREDITS = PAGE_SIZE * ITEM_PRICE;

/** A harvest of TikTok channels' videos, `maxItems` each, with `budget` credits and `targets` listed at once: paged, never a job. */
function channelsHarvest(name: string, handles: string[], maxItems: number, budget: number, targets = 2) {
  const channels = handles.map((handle) => `      - { platform: tiktok, handle: ${handle}, content: videos, max_items: ${maxItems} }`);
  return harvestFrom(`harvests:\n  - name: ${name}\n    budget: { credits: ${budget} }\n    job_threshold: ${maxItems + 1}\n    concurrency: { targets: ${targets}, calls: 1 }\n    channels:\n${channels.join('\n')}\n`);
}

interface ListingCall {
  target: string;
  from: ListingPosition;
  grant: number;
  workId: string;
  /** The workflow execution (of the run's chain) that asked for the work. */
  execution: string;
}

interface ListingInput {
  target: { key: string; maxItems: number };
  from: ListingPosition;
  grant: number;
  workId: string;
}

/**
 * Stubs of the activities a run of paged targets calls. `harvestTarget` lands one page per work
 * when the grant covers it (a `failing` target's work fails for good instead); `workSpent` says a
 * failed work spent `failedWorkSpent`. The first work waits for `together` works in flight.
 */
function listingActivities(options: { failing?: string; failedWorkSpent?: number; together?: number } = {}) {
  const calls: ListingCall[] = [];
  const prepared: string[] = [];
  const finished: { status: string; creditsSpent: number }[] = [];
  let inFlight = 0;
  let mostInFlight = 0;
  const activities = {
    prepareRun: async (input: { runId: string }) => {
      prepared.push(input.runId);
      // A run prepared twice lost its state on the way (a continue-as-new without its checkpoint,
      // say): failed at once, rather than starting over without end.
      if (prepared.length > 1) throw ApplicationFailure.nonRetryable(`run ${input.runId} prepared a second time`);
      return { prices, knowledge: {} };
    },
    harvestTarget: async (input: ListingInput) => {
      calls.push({ target: input.target.key, from: input.from, grant: input.grant, workId: input.workId, execution: Context.current().info.workflowExecution?.runId ?? 'none' });
      inFlight++;
      mostInFlight = Math.max(mostInFlight, inFlight);
      try {
        // The run's first work waits (real time, 5 s at most) for `together` works in flight, so that
        // works the workflow starts together are seen together however slowly the machine hands
        // them out; every work then takes a moment, as a work on a worker would.
        const together = options.together ?? 1;
        if (calls.length === 1) for (let waited = 0; inFlight < together && waited < 5_000; waited += 10) await new Promise((resolve) => setTimeout(resolve, 10));
        await new Promise((resolve) => setTimeout(resolve, 20));
        if (input.target.key.includes(options.failing ?? '\0')) throw ApplicationFailure.nonRetryable('the channel is gone', 'NotFound');
        const left = input.target.maxItems - input.from.items;
        const landed = input.grant >= PAGE_CREDITS ? Math.min(PAGE_SIZE, left) : 0;
        const position = { ...input.from, page: input.from.page + (landed > 0 ? 1 : 0), items: input.from.items + landed, offset: input.from.offset + landed };
        const done = position.items >= input.target.maxItems;
        const enrichment = { calls: 0, skipped: 0, failed: 0, unenriched: 0 };
        return { status: done ? 'done' : 'grant_spent', ...(done ? { ended: 'max_items' } : {}), position, pagesLanded: landed > 0 ? 1 : 0, itemsLanded: landed, credits: landed * ITEM_PRICE, lostCalls: 0, enrichment };
      } finally {
        inFlight--;
      }
    },
    workSpent: async () => ({ credits: options.failedWorkSpent ?? 0, lostCalls: 0 }),
    pauseSchedule: async () => undefined,
    finishRun: async (input: { status: string; creditsSpent: number }) => {
      finished.push({ status: input.status, creditsSpent: input.creditsSpent });
      return { landingsLoaded: calls.length, rowsLoaded: 0, quarantined: [] };
    },
  };
  return { activities, calls, prepared, finished, mostInFlight: () => mostInFlight };
}

/** A harvest run to its end on a worker of the stubs, on a task queue of its own. */
async function runHarvest(stub: ReturnType<typeof listingActivities>, workflowId: string, args: object): Promise<HarvestSummary> {
  const worker = await stubbedWorker(env, workflowId, stub.activities);
  return (await worker.runUntil(env.client.workflow.execute('harvestWorkflow', { taskQueue: workflowId, workflowId, args: [args] }))) as HarvestSummary;
}

/** The `from` pages of a target's works, in the order they were asked for. */
function pagesAskedFor(calls: ListingCall[], target: string): number[] {
  return calls.filter((call) => call.target === target).map((call) => call.from.page);
}

describe("the list step, on the workflow's clock", () => {
  it('lists each target piece by piece from where the last piece left it, granted its remaining worst case, at most `targets` at once', async () => {
    const stub = listingActivities({ together: 2 });
    const handles = ['creator_a', 'creator_b', 'creator_c'];
    const harvest = channelsHarvest('list-pieces', handles, 3 * PAGE_SIZE, 100_000, 2);
    const summary = await runHarvest(stub, 'list-pieces', { harvest, pageSize: PAGE_SIZE });
    expect(summary.status).toBe('completed');
    expect(summary.targets.map((target) => [target.status, target.items, target.pages, target.credits])).toEqual(handles.map(() => ['done', 3 * PAGE_SIZE, 3, 3 * PAGE_CREDITS]));
    for (const target of summary.targets) {
      // Every piece resumes at the position the previous one returned: no page bought twice, none skipped.
      expect(pagesAskedFor(stub.calls, target.key)).toEqual([1, 2, 3]);
      // Each granted the worst case of the items the target still wants (the budget has room for all).
      expect(stub.calls.filter((call) => call.target === target.key).map((call) => call.grant)).toEqual([3, 2, 1].map((pages) => pages * PAGE_CREDITS));
    }
    expect(stub.mostInFlight()).toBe(2);
    expect(new Set(stub.calls.map((call) => call.workId)).size).toBe(stub.calls.length);
    expect(summary.creditsSpent).toBe(9 * PAGE_CREDITS);
    expect(stub.finished).toEqual([{ status: 'completed', creditsSpent: 9 * PAGE_CREDITS }]);
  }, 60_000);

  it('grants no more than the budget has free, and a piece that could buy nothing ends its target budget_exhausted instead of being granted again', async () => {
    const stub = listingActivities();
    const budget = 2.5 * PAGE_CREDITS;
    const summary = await runHarvest(stub, 'list-budget', { harvest: channelsHarvest('list-budget', ['creator_a'], 3 * PAGE_SIZE, budget), pageSize: PAGE_SIZE });
    expect(summary.status).toBe('budget_exhausted');
    expect(summary.targets[0]).toMatchObject({ status: 'budget_exhausted', items: 2 * PAGE_SIZE, pages: 2 });
    // Two and a half pages' worth, then what is left of it: one and a half, then half a page, which buys nothing.
    expect(stub.calls.map((call) => call.grant)).toEqual([2.5, 1.5, 0.5].map((pages) => pages * PAGE_CREDITS));
    expect(summary.creditsSpent).toBe(2 * PAGE_CREDITS);
    expect(summary.creditsSpent).toBeLessThanOrEqual(budget);
  }, 60_000);

  it('a piece that fails for good fails its target with what its journal says it spent, and the other targets still complete', async () => {
    const stub = listingActivities({ failing: 'creator_gone', failedWorkSpent: 40 });
    const summary = await runHarvest(stub, 'list-failure', { harvest: channelsHarvest('list-failure', ['creator_a', 'creator_gone', 'creator_b'], 2 * PAGE_SIZE, 100_000), pageSize: PAGE_SIZE });
    expect(summary.status).toBe('completed_with_errors');
    const byStatus = summary.targets.map((target) => [target.key.includes('creator_gone'), target.status, target.credits]);
    expect(byStatus).toEqual([
      [false, 'done', 2 * PAGE_CREDITS],
      [true, 'failed', 40],
      [false, 'done', 2 * PAGE_CREDITS],
    ]);
    expect(summary.targets[1]!.error).toMatchObject({ type: 'NotFound', message: expect.stringContaining('the channel is gone') });
    // Tried once: a non-retryable failure is not retried, and the workflow does not grant it again.
    expect(stub.calls.filter((call) => call.target.includes('creator_gone'))).toHaveLength(1);
    expect(summary.creditsSpent).toBe(4 * PAGE_CREDITS + 40);
  }, 60_000);
});

describe('continue-as-new, on the workflow\'s clock', () => {
  it('a run whose history grows long continues as new between pieces: every page listed once, in order, the run prepared once, its totals whole', async () => {
    const stub = listingActivities();
    const handles = ['creator_a', 'creator_b'];
    const PAGES = 15;
    const harvest = channelsHarvest('continues', handles, PAGES * PAGE_SIZE, 1_000_000, 2);
    // A limit of 60 events: the run continues as new after a few pieces, several times over.
    const summary = await runHarvest(stub, 'continues', { harvest, pageSize: PAGE_SIZE, historyLimit: 60 });
    expect(new Set(stub.calls.map((call) => call.execution)).size).toBeGreaterThan(2);
    // The state carried across: no new run was prepared, no page listed again or skipped, and no
    // work in flight when the history was full was cut short (each work id asked for once).
    expect(stub.prepared).toEqual(['continues']);
    for (const target of summary.targets) expect(pagesAskedFor(stub.calls, target.key)).toEqual(Array.from({ length: PAGES }, (_, i) => i + 1));
    expect(new Set(stub.calls.map((call) => call.workId)).size).toBe(stub.calls.length);
    expect(summary).toMatchObject({ runId: 'continues', status: 'completed', itemsLanded: 2 * PAGES * PAGE_SIZE, pagesLanded: 2 * PAGES, creditsSpent: 2 * PAGES * PAGE_CREDITS });
    // The final load ran once, for the whole run, with everything the run spent.
    expect(stub.finished).toEqual([{ status: 'completed', creditsSpent: 2 * PAGES * PAGE_CREDITS }]);
  }, 60_000);
});
