/**
 * Targets bought as async jobs (workflows/jobs.ts), on Temporal's time-skipping test server with
 * stubbed activities, driven through `harvestWorkflow` alone: a job's worst case held out of what
 * is free from its start until the work landing its results is granted it; a job asked for what
 * the budget fits, or none when that is 50 items or fewer (the target paged instead); a job lost
 * with a dying worker counted at its worst case, one that failed or could not be checked releasing
 * its hold; at most `targets` jobs landing their results at once; the items of a job enriched in a
 * work granted their worst case. The wait itself (polling 2 s doubling to a minute, the
 * job.completed signal, a failed job, an outage of the polls) is in
 * harvest-rules.time-skipping.test.ts; the jobs on the emulator in jobs-and-webhooks.test.ts.
 */
import { ApplicationFailure } from '@temporalio/common';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { WorkflowHandle } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import type { JobState } from '../../activities/jobs.js';
import { JOB_FAILED, JOB_LOST } from '../../src/harvest/failures.js';
import { harvestSummary } from '../../src/temporal/run-summary.js';
import type { HarvestSummary } from '../../workflows/harvest.js';
import { harvestFrom, prices } from '../support/temporal.js';
import { PAGE_CREDITS, pagesBought, runStubbedHarvest, runStubs, useTimeSkipping, stubbedWorker, type ListingWorkInput } from '../support/time-skipping.js';

let env: TestWorkflowEnvironment;

useTimeSkipping((started) => (env = started));

const PRICE = prices['tiktok/channel-videos'];
const JOB_ITEMS = 600;
const JOB_WORST = JOB_ITEMS * PRICE;
const JOB_TARGET = 'channel:tiktok:big_creator:videos';
const PAGED_TARGET = 'channel:tiktok:small_creator:videos';

/**
 * A harvest of `jobs` TikTok channels of 600 videos (bought as jobs: more than job_threshold) and,
 * when `paged`, one of 100 (paged), `targets` at once; `extra` lines added to the harvest.
 */
function harvestOf(name: string, budget: number, options: { jobs?: number; paged?: boolean; targets?: number; extra?: string } = {}) {
  const handles = ['big_creator', 'big_baker', 'big_runner'].slice(0, options.jobs ?? 1);
  const channels = handles.map((handle) => `      - { platform: tiktok, handle: ${handle}, content: videos, max_items: ${JOB_ITEMS} }`);
  if (options.paged) channels.push('      - { platform: tiktok, handle: small_creator, content: videos, max_items: 100 }');
  return harvestFrom(`harvests:
  - name: ${name}
    budget: { credits: ${budget} }
    job_threshold: 500
    concurrency: { targets: ${options.targets ?? 2}, calls: 1 }
${options.extra ?? ''}    channels:
${channels.join('\n')}
`);
}

interface JobStart {
  target: { key: string };
  limit: number;
  worst: number;
}

/**
 * Stubs of a run with jobs: each started job (`job-<n>`) completes at its first poll with `limit`
 * items, unless `check` says otherwise; its results land in `pages` pages charged the items'
 * price; paged targets land whole pages. What each was given is recorded.
 */
function jobRun(options: { start?: (input: JobStart) => Promise<{ jobId: string }>; check?: (jobId: string) => Promise<JobState> } = {}) {
  const run = runStubs();
  const started: JobStart[] = [];
  const landed: { jobId: string; grant: number; workId: string }[] = [];
  const listed: { target: string; grant: number }[] = [];
  const limits = new Map<string, number>();
  const activities = {
    ...run.activities,
    startJob: async (input: JobStart) => {
      started.push(input);
      if (options.start) return options.start(input);
      const jobId = `job-${started.length}`;
      limits.set(jobId, input.limit);
      return { jobId };
    },
    checkJob: async (jobId: string): Promise<JobState> => (options.check ? options.check(jobId) : { status: 'completed', itemCount: limits.get(jobId)!, creditsCharged: limits.get(jobId)! * PRICE }),
    landJobResults: async (input: { jobId: string; grant: number; workId: string }) => {
      landed.push({ jobId: input.jobId, grant: input.grant, workId: input.workId });
      const items = limits.get(input.jobId)!;
      return { count: items, pages: Math.ceil(items / 100), credits: items * PRICE, lostCalls: 0 };
    },
    harvestTarget: async (input: ListingWorkInput) => {
      listed.push({ target: input.target.key, grant: input.grant });
      return pagesBought(input);
    },
  };
  return { activities, started, landed, listed, paused: run.paused, finished: run.finished };
}

describe("a job's hold", () => {
  it('holds the job\'s worst case out of what is free while it runs: a paged target beside it is granted only the rest; the results are granted the hold', async () => {
    const stub = jobRun();
    const budget = JOB_WORST + 200;
    const summary = await runStubbedHarvest(env, 'jobs-hold', stub.activities, { harvest: harvestOf('jobs-hold', budget, { paged: true }) });
    expect(stub.started.map((start) => [start.target.key, start.limit, start.worst])).toEqual([[JOB_TARGET, JOB_ITEMS, JOB_WORST]]);
    // The paged target's first work, started while the job ran, was granted what the hold left.
    expect(stub.listed[0]).toEqual({ target: PAGED_TARGET, grant: 200 });
    expect(stub.landed).toHaveLength(1);
    expect(stub.landed[0]).toMatchObject({ jobId: 'job-1', grant: JOB_WORST });
    expect(stub.landed[0]!.workId).toMatch(/^w\d+:job-results:/);
    expect(summary.targets[0]).toMatchObject({ key: JOB_TARGET, status: 'done', items: JOB_ITEMS, pages: 6, credits: JOB_WORST });
    expect(summary.targets[1]).toMatchObject({ key: PAGED_TARGET, items: 50, credits: PAGE_CREDITS });
    expect(summary).toMatchObject({ creditsSpent: JOB_WORST + PAGE_CREDITS, creditsReserved: 0 });
  }, 60_000);

  it('asks the job for what the budget fits, and pages a target whose budget fits 50 items or fewer', async () => {
    const fits = jobRun();
    const budget = 1_000;
    const summary = await runStubbedHarvest(env, 'jobs-fit', fits.activities, { harvest: harvestOf('jobs-fit', budget) });
    const limit = Math.floor(budget / PRICE);
    expect(fits.started.map((start) => [start.limit, start.worst])).toEqual([[limit, limit * PRICE]]);
    expect(fits.landed[0]!.grant).toBe(limit * PRICE);
    expect(summary).toMatchObject({ itemsLanded: limit, creditsSpent: limit * PRICE });

    const paged = jobRun();
    const small = await runStubbedHarvest(env, 'jobs-paged', paged.activities, { harvest: harvestOf('jobs-paged', 50 * PRICE) });
    expect(paged.started).toEqual([]);
    expect(paged.listed).toEqual([{ target: JOB_TARGET, grant: 50 * PRICE }]);
    expect(small.targets[0]).toMatchObject({ status: 'budget_exhausted', items: 50, pages: 1 });
  }, 60_000);
});

describe('a job that does not complete', () => {
  it('a job lost with a dying worker may still be charged: its worst case stays spent, a lost call is counted, and its target fails', async () => {
    const stub = jobRun({ start: async () => Promise.reject(ApplicationFailure.nonRetryable('the job may have been started: a worker died while it was started', JOB_LOST)) });
    const summary = await runStubbedHarvest(env, 'jobs-lost', stub.activities, { harvest: harvestOf('jobs-lost', JOB_WORST + 300, { paged: true }) });
    expect(summary.targets[0]).toMatchObject({ status: 'failed', items: 0, error: { type: JOB_LOST } });
    expect(summary).toMatchObject({ callsLost: 1, creditsReserved: 0 });
    // The paged target got only what the lost job's worst case left.
    expect(stub.listed).toEqual([{ target: PAGED_TARGET, grant: 300 }]);
    expect(summary.creditsSpent).toBe(JOB_WORST + 2 * PAGE_CREDITS);
    expect(stub.landed).toEqual([]);
  }, 60_000);

  it('a job that could not be started releases its hold: nothing spent, the whole budget free for the rest', async () => {
    const stub = jobRun({ start: async () => Promise.reject(ApplicationFailure.nonRetryable('the channel is gone', 'NotFound')) });
    const summary = await runStubbedHarvest(env, 'jobs-refused', stub.activities, { harvest: harvestOf('jobs-refused', JOB_WORST + 300, { paged: true }) });
    expect(summary.targets[0]).toMatchObject({ status: 'failed', error: { type: 'NotFound' } });
    expect(summary).toMatchObject({ callsLost: 0, creditsReserved: 0, creditsSpent: 2 * PAGE_CREDITS });
    expect(stub.listed).toEqual([{ target: PAGED_TARGET, grant: 2 * PAGE_CREDITS }]);
  }, 60_000);

  it('a job whose checks fail for good releases its hold and fails its target', async () => {
    const stub = jobRun({ check: async (jobId) => Promise.reject(ApplicationFailure.nonRetryable(`job ${jobId} is not known`, 'NotFound')) });
    const summary = await runStubbedHarvest(env, 'jobs-unknown', stub.activities, { harvest: harvestOf('jobs-unknown', JOB_WORST + 300, { paged: true }) });
    expect(summary.targets[0]).toMatchObject({ status: 'failed', error: { type: 'NotFound', message: 'job job-1 is not known' } });
    expect(summary).toMatchObject({ status: 'completed_with_errors', creditsReserved: 0, creditsSpent: 2 * PAGE_CREDITS });
    expect(stub.landed).toEqual([]);
  }, 60_000);

  it('a job the API failed for want of credits pauses the run and its schedule, its hold released', async () => {
    const stub = jobRun({ check: async () => ({ status: 'failed', itemCount: null, creditsCharged: 0, error: 'insufficient_credits: the account has 20 credits left' }) });
    const summary = await runStubbedHarvest(env, 'jobs-402', stub.activities, { harvest: harvestOf('jobs-402', JOB_WORST) });
    expect(summary.targets[0]).toMatchObject({ status: 'paused', error: { type: JOB_FAILED, message: 'job job-1: insufficient_credits: the account has 20 credits left' } });
    expect(summary).toMatchObject({ status: 'paused', creditsReserved: 0, creditsSpent: 0 });
    expect(summary.reason).toMatch(/^insufficient credits: job job-1: insufficient_credits/);
    expect(stub.paused).toEqual([{ harvest: 'jobs-402', reason: `insufficient_credits (run jobs-402)` }]);
    expect(stub.finished).toEqual([{ status: 'paused', creditsSpent: 0 }]);
  }, 60_000);
});

/**
 * Once the workflow has made its decision after `count` checkJob answers (its history holds that
 * many completed checkJob activities and, after the last, a completed workflow task), the landings
 * it has scheduled by then (landJobResults activities in its history); undefined before.
 */
async function landingsDecided(handle: WorkflowHandle, count: number): Promise<number | undefined> {
  const { events } = await handle.fetchHistory();
  const landings = (events ?? []).filter((event) => event.activityTaskScheduledEventAttributes?.activityType?.name === 'landJobResults').length;
  const types = new Map<string, string | null | undefined>();
  let checks = 0;
  let lastCheck = -1;
  events?.forEach((event, index) => {
    if (event.activityTaskScheduledEventAttributes) types.set(String(event.eventId), event.activityTaskScheduledEventAttributes.activityType?.name);
    const completed = event.activityTaskCompletedEventAttributes;
    if (completed && types.get(String(completed.scheduledEventId)) === 'checkJob') {
      checks++;
      lastCheck = index;
    }
  });
  return checks >= count && (events ?? []).slice(lastCheck).some((event) => event.workflowTaskCompletedEventAttributes) ? landings : undefined;
}

describe('landing results', () => {
  it('at most `targets` jobs land their results at once, even when more complete together; the others wait their turn', async () => {
    // The three jobs' checks are answered together (each waits, 5 s at most, for the other two), so
    // the workflow mostly learns of all three completions in one workflow task: the case where
    // every job waiting found a place free at once and all three landed.
    const checking: (() => void)[] = [];
    const together = () => new Promise<void>((resolve) => {
      checking.push(resolve);
      if (checking.length === 3) checking.forEach((answer) => answer());
      else setTimeout(resolve, 5_000);
    });
    const stub = jobRun({
      check: async () => {
        await together();
        return { status: 'completed', itemCount: JOB_ITEMS, creditsCharged: JOB_WORST };
      },
    });
    let inFlight = 0;
    let mostInFlight = 0;
    let started = 0;
    let handle: WorkflowHandle | undefined;
    /** Whether the workflow has decided after all three checks, and every landing it scheduled by then has started here. */
    const allDecidedLandingsStarted = async () => {
      const scheduled = handle && (await landingsDecided(handle, 3));
      return scheduled !== undefined && started >= scheduled;
    };
    const worker = await stubbedWorker(env, 'jobs-landing', {
      ...stub.activities,
      landJobResults: async (input: { jobId: string; grant: number; workId: string }) => {
        started++;
        inFlight++;
        mostInFlight = Math.max(mostInFlight, inFlight);
        try {
          // Each landing holds on until the workflow has seen all three jobs complete and made its
          // decision, and every landing it scheduled by then has started here: a third landing
          // allowed would have been started by then. (Holding only until the decision let a landing
          // return before the other landing of the same decision had started: 1 at once, in CI.)
          while (!(await allDecidedLandingsStarted())) await new Promise((resolve) => setTimeout(resolve, 20));
          return await stub.activities.landJobResults(input);
        } finally {
          inFlight--;
        }
      },
    });
    const summary: HarvestSummary = await worker.runUntil(async () => {
      handle = await env.client.workflow.start('harvestWorkflow', { taskQueue: 'jobs-landing', workflowId: 'jobs-landing', args: [{ harvest: harvestOf('jobs-landing', 3 * JOB_WORST, { jobs: 3, targets: 2 }) }] });
      return harvestSummary(handle);
    });
    expect(stub.started).toHaveLength(3);
    expect(mostInFlight).toBe(2);
    expect(summary).toMatchObject({ status: 'completed', itemsLanded: 3 * JOB_ITEMS, creditsSpent: 3 * JOB_WORST });
  }, 60_000);

  it("enriches a job's items in one work granted their worst case; what it could not enrich is said, the run out of budget", async () => {
    const stub = jobRun();
    const grants: number[] = [];
    const pages: { target: string; fromPage: number; toPage: number }[] = [];
    const activities = {
      ...stub.activities,
      enrichLanded: async (input: { grant: number; target: string; fromPage: number; toPage: number }) => {
        grants.push(input.grant);
        pages.push({ target: input.target, fromPage: input.fromPage, toPage: input.toPage });
        const enriched = Math.floor(input.grant / prices['tiktok/stats']);
        return { credits: enriched * prices['tiktok/stats'], lostCalls: 0, items: JOB_ITEMS, unenriched: JOB_ITEMS - enriched, enrichment: { calls: enriched, skipped: 0, failed: 0 } };
      },
    };
    const enriching = '    enrich: { stats: true }\n';
    const ample = await runStubbedHarvest(env, 'jobs-enrich', activities, { harvest: harvestOf('jobs-enrich', 10 * JOB_WORST, { extra: enriching }) });
    expect(grants).toEqual([JOB_ITEMS * prices['tiktok/stats']]);
    // The job's landed pages, all of them.
    expect(pages).toEqual([{ target: JOB_TARGET, fromPage: 1, toPage: 6 }]);
    expect(ample).toMatchObject({ status: 'completed', creditsSpent: JOB_WORST + JOB_ITEMS * prices['tiktok/stats'] });
    expect(ample.targets[0]).toMatchObject({ status: 'done', credits: JOB_WORST + JOB_ITEMS * prices['tiktok/stats'] });

    grants.length = 0;
    const short = await runStubbedHarvest(env, 'jobs-enrich-short', activities, { harvest: harvestOf('jobs-enrich-short', JOB_WORST + 300, { extra: enriching }) });
    expect(grants).toEqual([300]);
    expect(short).toMatchObject({ status: 'budget_exhausted', reason: `${JOB_ITEMS - 100} items ${JOB_TARGET} listed were not enriched: the budget ran out`, creditsSpent: JOB_WORST + 300 });
  }, 60_000);
});
