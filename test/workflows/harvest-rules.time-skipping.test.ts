/**
 * The harvest workflow's rules on Temporal's time-skipping test server, with stubbed activities.
 * The `jobs` step's wait for a job (workflows/jobs.ts): an hour-long job is polled with the backoff
 * the workflow promises (2 s, doubling, at most a minute between polls) on the workflow's clock, in
 * a few seconds of real time;
 * a job.completed signal ends the wait at once, without the poll that was due; a failed job fails
 * its target and releases its reservation; an hour of an API that cannot be reached is waited out
 * by Temporal's retry backoff; a 402 pauses the run and its schedule, a refused key fails it. The
 * real stack's tests (jobs-and-webhooks.test.ts, outages.test.ts, listing-faults.test.ts) show the
 * wiring with the emulator; this one shows the rules. The `track-items` step (workflows/tracking.ts)
 * in its bracket (workflows/bracket.ts): a work granted the forecast's worst case, followed by
 * another for what it left unobserved, and a budget that runs out said so. A job's credits go
 * through the same bracket: its results land in a work granted the job's hold.
 */
import { describe, expect, it } from 'vitest';
import { ApplicationFailure } from '@temporalio/common';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { JobState } from '../../activities/jobs.js';
import { harvestFrom, prices } from '../support/temporal.js';
import { useTimeSkipping, stubbedWorker } from '../support/time-skipping.js';
import { AUTHENTICATION_ERROR, INSUFFICIENT_CREDITS } from '../../src/harvest/failures.js';
import { jobCompletedSignal } from '../../workflows/definitions.js';
import type { HarvestSummary } from '../../workflows/harvest.js';

let env: TestWorkflowEnvironment;

useTimeSkipping((started) => (env = started));

const ITEMS = 600;
const harvest = harvestFrom(`
harvests:
  - name: job-wait
    budget: { credits: 100000 }
    job_threshold: 500
    channels:
      - { platform: tiktok, handle: some_creator, content: videos, max_items: ${ITEMS} }
`);

/** Stubs of the activities a run of one job target calls; `jobStatus` answers each checkJob. */
function jobActivities(jobStatus: (nowMs: number) => JobState) {
  /** When, on the workflow's clock, the job was started and each poll was made. */
  const startedAt: number[] = [];
  const polledAt: number[] = [];
  const finished: { status: string; creditsSpent: number }[] = [];
  /** The harvests whose schedule the run paused. */
  const paused: string[] = [];
  const activities = {
    prepareRun: async () => ({ prices, knowledge: {} }),
    startJob: async () => {
      startedAt.push(await env.currentTimeMs());
      return { jobId: 'job-1' };
    },
    checkJob: async () => {
      const now = await env.currentTimeMs();
      polledAt.push(now);
      return jobStatus(now);
    },
    landJobResults: async () => ({ count: ITEMS, pages: 2, credits: ITEMS * prices['tiktok/channel-videos'], lostCalls: 0 }),
    // What a failed work's journal says it spent: nothing, here.
    workSpent: async () => ({ credits: 0, lostCalls: 0 }),
    pauseSchedule: async (input: { harvest: string; reason: string }) => void paused.push(input.harvest),
    finishRun: async (input: { status: string; creditsSpent: number }) => {
      finished.push({ status: input.status, creditsSpent: input.creditsSpent });
      return { landingsLoaded: 2, rowsLoaded: ITEMS, quarantined: [] };
    },
  };
  return { activities, startedAt, polledAt, finished, paused };
}

const running = (): JobState => ({ status: 'running', itemCount: null, creditsCharged: 0 });
const completed = (): JobState => ({ status: 'completed', itemCount: ITEMS, creditsCharged: ITEMS * prices['tiktok/channel-videos'] });

describe("a run's wait for its job, on the workflow's clock", () => {
  it('polls an hour-long job 2 s after it started, then twice as long each time up to a minute, and lands it when it completes', async () => {
    const HOUR = 3_600_000;
    const stub = jobActivities((now) => (now - stub.startedAt[0]! >= HOUR ? completed() : running()));
    const worker = await stubbedWorker(env, 'job-wait-polls', stub.activities);
    const summary = (await worker.runUntil(env.client.workflow.execute('harvestWorkflow', { taskQueue: 'job-wait-polls', workflowId: 'job-wait-polls', args: [{ harvest }] }))) as HarvestSummary;
    expect(summary.status).toBe('completed');
    expect(summary.targets[0]).toMatchObject({ status: 'done', items: ITEMS });
    // Each wait is the timer's, plus the moments the worker took around it (the test server's clock
    // runs with real time while a task is being worked on): so each at least the rule's, and less
    // than 5 s more.
    const startedAt = stub.startedAt[0]!;
    const waits = [stub.polledAt[0]! - startedAt, ...stub.polledAt.slice(1).map((at, i) => at - stub.polledAt[i]!)];
    const promised = waits.map((_, i) => Math.min(2_000 * 2 ** i, 60_000));
    expect(waits.length).toBeGreaterThan(40);
    waits.forEach((wait, i) => {
      expect(wait, `wait ${i + 1}`).toBeGreaterThanOrEqual(promised[i]!);
      expect(wait, `wait ${i + 1}`).toBeLessThan(promised[i]! + 5_000);
    });
    // The last poll is the first one after the hour.
    expect(stub.polledAt.at(-1)! - startedAt).toBeGreaterThanOrEqual(HOUR);
    expect(stub.polledAt.at(-1)! - startedAt).toBeLessThan(HOUR + 60_000);
    expect(stub.finished).toEqual([{ status: 'completed', creditsSpent: ITEMS * prices['tiktok/channel-videos'] }]);
  }, 120_000);

  it('ends the wait when job.completed is signalled, without waiting for the next poll', async () => {
    let signalled = false;
    const stub = jobActivities(() => (signalled ? completed() : running()));
    const worker = await stubbedWorker(env, 'job-wait-signal', stub.activities);
    const summary = (await worker.runUntil(async () => {
      const handle = await env.client.workflow.start('harvestWorkflow', { taskQueue: 'job-wait-signal', workflowId: 'job-wait-signal', args: [{ harvest }] });
      // Polled six times (2 + 4 + 8 + 16 + 32 + 60 s), then the webhook's signal arrives 5 s into
      // the minute's wait before the seventh.
      while (stub.polledAt.length < 6) await env.sleep(1_000);
      await env.sleep(5_000);
      const signalledAt = await env.currentTimeMs();
      signalled = true;
      await handle.signal(jobCompletedSignal, { jobId: 'job-1' });
      const result = (await handle.result()) as HarvestSummary;
      // The poll after the signal is the signal's, not the one due 55 s later. (The test server's
      // clock also runs with real time while the worker is busy, so "at once" has room here.)
      expect(stub.polledAt).toHaveLength(7);
      expect(stub.polledAt.at(-1)! - signalledAt).toBeLessThan(30_000);
      return result;
    })) as HarvestSummary;
    expect(summary.status).toBe('completed');
    expect(summary.targets[0]).toMatchObject({ status: 'done', items: ITEMS });
  }, 120_000);

  it('a failed job fails its target, its reservation released: nothing counted as spent', async () => {
    const stub = jobActivities((now) => (stub.polledAt.length >= 3 ? { status: 'failed', itemCount: null, creditsCharged: 0, error: `job_failed: gave up at ${now}` } : running()));
    const worker = await stubbedWorker(env, 'job-wait-failed', stub.activities);
    const run = worker.runUntil(env.client.workflow.execute('harvestWorkflow', { taskQueue: 'job-wait-failed', workflowId: 'job-wait-failed', args: [{ harvest }] }));
    // A run whose targets all failed fails its workflow, its summary in the failure's details.
    await expect(run).rejects.toThrow();
    expect(stub.finished).toEqual([{ status: 'failed', creditsSpent: 0 }]);
    expect(stub.polledAt).toHaveLength(3);
  }, 120_000);

  it("an API that fails the job's polls for an hour is waited out by Temporal's retries (1 s doubling to 30 s), and the run completes", async () => {
    const HOUR = 3_600_000;
    let outageFrom = 0;
    const attempts: number[] = [];
    const stub = jobActivities(() => completed());
    const worker = await stubbedWorker(env, 'job-wait-outage', {
      ...stub.activities,
      checkJob: async () => {
        const now = await env.currentTimeMs();
        if (outageFrom === 0) outageFrom = now;
        if (now - outageFrom < HOUR) {
          attempts.push(now);
          throw ApplicationFailure.retryable('the API cannot be reached', 'ServiceUnavailable');
        }
        return completed();
      },
    });
    const summary = (await worker.runUntil(env.client.workflow.execute('harvestWorkflow', { taskQueue: 'job-wait-outage', workflowId: 'job-wait-outage', args: [{ harvest }] }))) as HarvestSummary;
    expect(summary.status).toBe('completed');
    expect(summary.targets[0]).toMatchObject({ status: 'done', items: ITEMS });
    const waits = attempts.slice(1).map((at, i) => at - attempts[i]!);
    const promised = waits.map((_, i) => Math.min(1_000 * 2 ** i, 30_000));
    expect(waits.length).toBeGreaterThan(100);
    waits.forEach((wait, i) => {
      expect(wait, `retry ${i + 1}`).toBeGreaterThanOrEqual(promised[i]!);
      expect(wait, `retry ${i + 1}`).toBeLessThan(promised[i]! + 5_000);
    });
  }, 120_000);
});

describe("a job's credits, through the bracket", () => {
  it("lands its results in a granted work: the job's worst case as its grant, under its own work id, settled with the job's charge", async () => {
    const stub = jobActivities(() => completed());
    const started: { worst: number; runId: string }[] = [];
    const landing: { grant: number; workId: string; runId: string }[] = [];
    const worker = await stubbedWorker(env, 'job-bracket', {
      ...stub.activities,
      startJob: async (input: { worst: number; runId: string }) => {
        started.push(input);
        return { jobId: 'job-1' };
      },
      landJobResults: async (input: { grant: number; workId: string; runId: string }) => {
        landing.push(input);
        return { count: ITEMS, pages: 2, credits: ITEMS * prices['tiktok/channel-videos'], lostCalls: 0 };
      },
    });
    const summary = (await worker.runUntil(env.client.workflow.execute('harvestWorkflow', { taskQueue: 'job-bracket', workflowId: 'job-bracket', args: [{ harvest }] }))) as HarvestSummary;
    expect(summary.status).toBe('completed');
    expect(started).toHaveLength(1);
    expect(started[0]!.worst).toBe(ITEMS * prices['tiktok/channel-videos']);
    // The job's hold becomes the grant of the work that lands its results, whose journal is its own.
    expect(landing).toHaveLength(1);
    expect(landing[0]).toMatchObject({ grant: started[0]!.worst, runId: started[0]!.runId });
    expect(landing[0]!.workId).toMatch(/^w\d+:job-results:/);
    expect(stub.finished).toEqual([{ status: 'completed', creditsSpent: ITEMS * prices['tiktok/channel-videos'] }]);
  }, 120_000);

  it("settles results that failed for good from their work's journal, as every granted work is", async () => {
    const stub = jobActivities(() => completed());
    const read: string[] = [];
    const worker = await stubbedWorker(env, 'job-bracket-failed', {
      ...stub.activities,
      landJobResults: async () => {
        throw ApplicationFailure.nonRetryable('the results could not be landed', 'DataDirNotWritable');
      },
      // The journal of the results' work says it spent 7 credits (a stub's number: the bracket takes what the journal says).
      workSpent: async (input: { workId: string }) => {
        read.push(input.workId);
        return { credits: 7, lostCalls: 0 };
      },
    });
    const run = worker.runUntil(env.client.workflow.execute('harvestWorkflow', { taskQueue: 'job-bracket-failed', workflowId: 'job-bracket-failed', args: [{ harvest }] }));
    await expect(run).rejects.toThrow();
    expect(read).toHaveLength(1);
    expect(read[0]).toMatch(/^w\d+:job-results:/);
    expect(stub.finished).toEqual([{ status: 'failed', creditsSpent: 7 }]);
  }, 120_000);
});

describe('what stops a run at its job', () => {
  it("a 402 on the job's start pauses the run and its harvest's schedule, once, with nothing spent", async () => {
    const stub = jobActivities(() => completed());
    const worker = await stubbedWorker(env, 'job-stop-402', {
      ...stub.activities,
      startJob: async () => {
        throw ApplicationFailure.nonRetryable('the account has 12 credits left', INSUFFICIENT_CREDITS);
      },
    });
    const summary = (await worker.runUntil(env.client.workflow.execute('harvestWorkflow', { taskQueue: 'job-stop-402', workflowId: 'job-stop-402', args: [{ harvest }] }))) as HarvestSummary;
    expect(summary.status).toBe('paused');
    expect(summary.reason).toMatch(/^insufficient credits: /);
    expect(summary.targets[0]).toMatchObject({ status: 'paused', error: { type: INSUFFICIENT_CREDITS } });
    expect(stub.paused).toEqual(['job-wait']);
    expect(stub.finished).toEqual([{ status: 'paused', creditsSpent: 0 }]);
  }, 120_000);

  it('a refused key on the job\'s start fails the run, saying so once, and pauses no schedule', async () => {
    const stub = jobActivities(() => completed());
    const worker = await stubbedWorker(env, 'job-stop-401', {
      ...stub.activities,
      startJob: async () => {
        throw ApplicationFailure.nonRetryable('401 unauthorized', AUTHENTICATION_ERROR);
      },
    });
    const run = worker.runUntil(env.client.workflow.execute('harvestWorkflow', { taskQueue: 'job-stop-401', workflowId: 'job-stop-401', args: [{ harvest }] }));
    await expect(run).rejects.toThrow();
    expect(stub.paused).toEqual([]);
    expect(stub.finished).toEqual([{ status: 'failed', creditsSpent: 0 }]);
  }, 120_000);
});

describe("the track-items step, in its bracket", () => {
  const trackedHarvest = (budget: number) =>
    harvestFrom(`
harvests:
  - name: job-wait
    budget: { credits: ${budget} }
    job_threshold: 500
    track: { items: { days: 7 } }
    channels:
      - { platform: tiktok, handle: some_creator, content: videos, max_items: ${ITEMS} }
`);
  const JOB_CREDITS = ITEMS * prices['tiktok/channel-videos'];
  const KEY = 'channel:tiktok:some_creator:videos';
  /**
   * 10 tracked items due, 100 credits at worst; each work, in turn, spends `credits`, makes `calls`,
   * and reports the due items observed in the run so far (as the activity does) and those left.
   */
  function tracking(observed: { credits: number; calls: number; soFar: number; unobserved: number }[]) {
    const stub = jobActivities(() => completed());
    const grants: number[] = [];
    const activities = {
      ...stub.activities,
      prepareRun: async () => ({ prices, knowledge: {}, tracking: { asOfMs: 0, due: { [KEY]: 10 }, credits: 100 } }),
      observeItems: async (input: { grant: number }) => {
        const work = observed[grants.length]!;
        grants.push(input.grant);
        return { credits: work.credits, lostCalls: 0, enrichment: { calls: work.calls, skipped: 0, failed: 0 }, unobserved: work.unobserved, observed: { [KEY]: work.soFar } };
      },
    };
    return { activities, grants, finished: stub.finished };
  }

  it('a work that leaves items unobserved is followed by another for the rest, each granted the worst case', async () => {
    const stub = tracking([
      { credits: 60, calls: 6, soFar: 6, unobserved: 4 },
      { credits: 40, calls: 4, soFar: 10, unobserved: 0 },
    ]);
    const worker = await stubbedWorker(env, 'track-rest', stub.activities);
    const summary = (await worker.runUntil(env.client.workflow.execute('harvestWorkflow', { taskQueue: 'track-rest', workflowId: 'track-rest', args: [{ harvest: trackedHarvest(100_000) }] }))) as HarvestSummary;
    expect(summary.status).toBe('completed');
    expect(stub.grants).toEqual([100, 100]);
    expect(summary.trackedItems).toEqual({ due: 10, observed: 10 });
    expect(stub.finished).toEqual([{ status: 'completed', creditsSpent: JOB_CREDITS + 100 }]);
  }, 120_000);

  it('granted only what the budget has left; when that is spent with items unobserved, the run says the budget ran out', async () => {
    const stub = tracking([{ credits: 70, calls: 7, soFar: 7, unobserved: 3 }]);
    const worker = await stubbedWorker(env, 'track-budget', stub.activities);
    const summary = (await worker.runUntil(env.client.workflow.execute('harvestWorkflow', { taskQueue: 'track-budget', workflowId: 'track-budget', args: [{ harvest: trackedHarvest(JOB_CREDITS + 70) }] }))) as HarvestSummary;
    expect(stub.grants).toEqual([70]);
    expect(summary.status).toBe('budget_exhausted');
    expect(summary.reason).toBe('3 tracked items were not observed: the budget ran out');
    expect(stub.finished).toEqual([{ status: 'budget_exhausted', creditsSpent: JOB_CREDITS + 70 }]);
  }, 120_000);
});
