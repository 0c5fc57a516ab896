/**
 * Activities for the API's async jobs: start one (once per run and target, even when retried),
 * look at it (free), and land its results page by page with heartbeats, so a retried activity
 * resumes at the page it had reached.
 */
import { ApplicationFailure } from '@temporalio/common';
import type { JobResultsPage, ListEndpoint, SocialApiClient } from '../src/api/client.js';
import { endpointKey, type EndpointName, type Platform } from '../src/api-catalog/endpoints.js';
import type { Job } from '../src/api-catalog/resources.js';
import { JOB_LOST } from '../src/harvest/failures.js';
import { type PageLanding } from '../src/store/landing.js';
import { jobStartKey, pageLandingKey } from '../src/store/layout.js';
import type { JobRecord } from '../src/store/job-registry.js';
import type { Store } from '../src/store/store.js';
import type { RunIdentity } from './run-guard.js';
import type { CrossRunBudget } from '../src/harvest/budgets.js';
import { asActivity } from './failures.js';
import { meteredCall } from './metered-call.js';
import { pageLanding } from './page-landing.js';
import { inRunJournal, inWorkFrame, type WorkFrameInput, type WorkSpent } from './work-frame.js';
import { creditsCharged, itemsLanded, landingsWaiting } from '../src/metrics/worker-metrics.js';

export interface TargetRef {
  key: string;
  platform: Platform;
  endpoint: EndpointName;
  params: Record<string, string>;
}

export interface StartJobInput extends RunIdentity {
  runId: string;
  target: TargetRef;
  limit: number;
  /** The job's worst case: journaled before it is started, so one lost with a dying worker is accounted for. */
  worst: number;
  workflowId: string;
  /** The harvest, for the worker's metrics; absent from runs started before it was passed. */
  harvest?: string;
  /** The budgets across runs that cover the run: the job's worst case is reserved against them before it starts. */
  budgets?: CrossRunBudget[];
}

export interface JobState {
  status: 'queued' | 'running' | 'completed' | 'failed';
  itemCount: number | null;
  creditsCharged: number;
  error?: string;
}

/** Given the job's hold as its grant (workflows/bracket.ts), under its own work id. */
export interface LandJobResultsInput extends RunIdentity, WorkFrameInput {
  target: TargetRef;
  jobId: string;
  /** Page number the first results page lands as. */
  firstPage: number;
  rankOffset: number;
}

/** What a job's results came to: items and pages landed, and the job's charge as what the work spent. */
export interface JobResultsSummary extends WorkSpent {
  count: number;
  pages: number;
}

interface ResultsProgress {
  cursor?: string;
  pages: number;
  count: number;
}

/** A job that may have been started and not recorded: it will be charged, and no second one is started. */
function jobLost(why: string, limit: number): ApplicationFailure {
  return ApplicationFailure.create({
    type: JOB_LOST,
    nonRetryable: true,
    message: `${why}, so a job of up to ${limit} items may exist unrecorded and be charged; no second job was started (its worst case is counted as spent)`,
  });
}

interface JobDeps {
  client: SocialApiClient;
  store: Store;
}

export function jobActivities(deps: JobDeps) {
  return {
    /**
     * Starts the target's job, or returns the one an earlier attempt of this run started, unless
     * that one failed (a retried run then gets a new job).
     */
    async startJob(input: StartJobInput): Promise<{ jobId: string }> {
      return asActivity(async () => {
        const started = await deps.store.findJobOfTarget(input.runId, input.target.key);
        if (started && (await deps.client.getJob(started.jobId)).status !== 'failed') return { jobId: started.jobId };
        return startNewJob(deps, input);
      });
    },

    /** `run` carries the API and store the run was started for (activities/run-guard.ts checks them). */
    async checkJob(jobId: string, _run?: RunIdentity): Promise<JobState> {
      return asActivity(async () => {
        const job = await deps.client.getJob(jobId);
        return {
          status: job.status,
          itemCount: job.item_count,
          creditsCharged: job.credits_charged,
          ...(job.error ? { error: `${job.error.code}: ${job.error.message}` } : {}),
        };
      });
    },

    async landJobResults(input: LandJobResultsInput): Promise<JobResultsSummary> {
      return asActivity(() => landJobResults(deps, input));
    },
  };
}

/**
 * A new job for the target, its start metered and registered. A job is charged when it completes,
 * whoever waits for it. One whose creation an earlier attempt began and never recorded (its worker
 * died with the request in flight) may exist and will be charged: a second one is not started, and
 * the target fails saying so.
 */
async function startNewJob({ client, store }: JobDeps, input: StartJobInput): Promise<{ jobId: string }> {
  const key = jobStartKey(input.target.key);
  return inRunJournal(store, input, key, async (journal) => {
    if (journal.hasOpenIntent(key)) throw jobLost('a worker died while starting this target\'s job', input.limit);
    // The job's worst case is held until it is registered: a start whose answer never came
    // may have made a job, which will be charged. The start itself is free (the job is
    // charged when it completes, with its results), so it settles at 0.
    const { job } = await meteredCall({
      journal,
      key,
      worst: input.worst,
      call: async (options) => {
        // The intent is on the disk before the job can exist: after a machine crash, a retry finds
        // it open and does not start (and pay for) a second job (hasOpenIntent above).
        await journal.sync();
        return { ...(await client.startJob(input.target.platform, input.target.endpoint as ListEndpoint, { ...input.target.params, limit: input.limit }, options)), creditsCharged: 0 };
      },
      land: ({ job, requestId }, held) => store.registerJob({ jobId: job.job_id, requestId, workflowId: input.workflowId, runId: input.runId, target: input.target.key, ...(held.length > 0 ? { budgetReservations: [...held] } : {}) }),
      meter: { harvest: input.harvest ?? '', endpoint: `${input.target.platform}/${input.target.endpoint}:job` },
      chargedLater: true,
      neverRepeat: (lost) => {
        throw jobLost(`the answer to starting this target's job was lost (${lost.message}); it was not sent again`, input.limit);
      },
    });
    return { jobId: job.job_id };
  });
}

/**
 * Lands a job's results page by page in the work frame, the job's charge being what it spent: a
 * page's position is heartbeated only once the pages before it are on the disk (the frame's group
 * commit syncs the journal, which makes the run's answers durable first), and the work returns only
 * once every page is, so a machine crash never leaves a checkpoint, or a result the workflow
 * enriches from, past pages the disk does not have.
 */
async function landJobResults(deps: JobDeps, input: LandJobResultsInput): Promise<JobResultsSummary> {
  const { client, store } = deps;
  const file = await store.findJob(input.jobId);
  if (!file) throw new Error(`no record of job ${input.jobId} in the job registry of ${store.description}`);
  const job = await client.getJob(input.jobId);
  // The job's charge counts once its results are landed; shown live meanwhile.
  const checkpoint = {
    start: (): ResultsProgress => ({ pages: 0, count: 0 }),
    live: (durable: ResultsProgress) => ({ credits: job.credits_charged, items: durable.count, pages: durable.pages, enriched: 0 }),
  };
  return inWorkFrame(deps, input, checkpoint, async (frame) => {
    const progress = frame.checkpoint.resumed;
    // Results pages of 200, not the API's 1,000: a 1,000-result page's text is large enough for
    // V8 to allocate it outside the young generation, where garbage waits for a full collection,
    // and the worker's memory then grew with the items a run landed (bench/harvest-e2e.mjs).
    for await (const results of client.jobResults(input.jobId, { cursor: progress.cursor, pageSize: 200 })) {
      const landing = resultsLanding(input, job, file, progress, results);
      // A page an earlier attempt landed is not landed again.
      if (!(await store.isLanded(pageLandingKey(input.runId, input.target.key, landing.page)))) await landResults(store, landing, results.items.length);
      progress.pages++;
      progress.count += results.items.length;
      progress.cursor = results.nextCursor;
      frame.checkpoint.commit(progress);
    }
    await frame.durable();
    // Its charge is a fact and its results are landed: the start's reservations against the
    // budgets across runs settle at it (once: a second settlement of one counts nothing).
    for (const id of file.budgetReservations ?? []) await store.budgets.settle(id, job.credits_charged);
    // The job is one billed call, charged when it completed and landed with its first results
    // page, not journaled: its charge is what this work spent, settled against the job's hold.
    return { count: progress.count, pages: progress.pages, credits: job.credits_charged, lostCalls: 0 };
  });
}

/** The landing of a job's next results page, where `progress` has got to. */
function resultsLanding(input: LandJobResultsInput, job: Job, file: JobRecord, progress: ResultsProgress, results: JobResultsPage): PageLanding {
  const place = {
    runId: input.runId,
    harvest: input.harvest,
    target: input.target.key,
    page: input.firstPage + progress.pages,
    params: input.target.params,
    rankOffset: input.rankOffset + progress.count,
    ...(results.nextCursor ? { nextCursor: results.nextCursor } : {}),
    hasMore: results.nextCursor !== undefined,
  };
  return pageLanding(place, {
    endpoint: endpointKey({ platform: input.target.platform, name: input.target.endpoint }),
    requestId: results.requestId,
    // The API's clock when the job fetched the results, not this worker's.
    observedAt: job.completed_at ?? new Date().toISOString(),
    // The job is one billed call: its charge lands once, with its first results page.
    ...(progress.pages === 0 ? { call: { request_id: file.requestId, units: job.item_count ?? 0, credits: job.credits_charged, job_id: input.jobId } } : {}),
  }, results.items);
}

/** Lands a results page of `items` items and counts it in the worker's metrics. */
async function landResults(store: Store, landing: PageLanding, items: number): Promise<void> {
  await store.writeLanding(landing);
  // The job's charge, once, with its first results page (as its landing records it).
  const labels = { harvest: landing.harvest, endpoint: landing.endpoint };
  if (landing.call) creditsCharged.inc(labels, landing.call.credits);
  itemsLanded.inc(labels, items);
  landingsWaiting.landed();
}
