/**
 * Targets bought as async jobs: the `jobs` step starts each with its worst case reserved, the
 * `list` step waits for it and lands its results, and the `enrich` step enriches the items it
 * listed (src/harvest/spend-order.ts).
 */
import { condition, patched, workflowInfo } from '@temporalio/workflow';
import { addTally } from '../src/harvest/enrichment-tally.js';
import { JOB_FAILED, JOB_LOST } from '../src/harvest/failures.js';
import { availableCredits, finishListing, type TargetState } from '../src/harvest/run-state.js';
import { itemEnrichmentWorst, jobLimit, listsPhotoPosts, priceOf, takesJob } from '../src/harvest/rules.js';
import { grantedWork, holdForJob, jobResultsWork, settleJobHold } from './bracket.js';
import { checkJob, enrichLanded, failureType, landJobResults, runInput, startJob, targetRef, type RunContext } from './run-context.js';
import { recordFailure, recordStop, recordWorkStop, stopForBudget, warnEmpty } from './stops.js';

/**
 * The `jobs` step: big pulls go through async jobs, all of them started first, so the API
 * prepares them while the other targets are listed.
 */
export async function startJobs(run: RunContext): Promise<void> {
  const { state } = run;
  for (const target of state.targets) {
    if (!state.stopped && target.status === 'pending' && target.jobId === undefined && !target.paged && takesJob(target.plan, run.harvest.job_threshold, target.knownIds.length > 0)) {
      await startTargetJob(run, target);
    }
  }
}

/** Starts a target's job, its worst case held (bracket.ts); a budget too small for a job leaves it to paging. */
async function startTargetJob(run: RunContext, target: TargetState): Promise<void> {
  const { state } = run;
  const { plan } = target;
  const limit = jobLimit(state.prices, plan, availableCredits(state.budget));
  if (limit === 0) {
    target.paged = true;
    return;
  }
  // Held across continue-as-new in the target (jobReserved) until the job's results settle it.
  const worst = holdForJob(run, target, limit * priceOf(state.prices, plan.platform, plan.endpoint));
  try {
    const { jobId } = await startJob({ ...runInput(run), target: targetRef(plan), limit, worst, workflowId: workflowInfo().workflowId, ...(run.harvest.budgets ? { budgets: run.harvest.budgets } : {}) });
    target.jobId = jobId;
  } catch (error) {
    // A job lost with a dying worker may still be charged: its worst case stays spent.
    settleJobHold(run, target, failureType(error) === JOB_LOST);
    await recordFailure(state, target, error);
  }
}

/** Waits for a target's job, lands its results in a work granted the job's hold, and settles it with what the job cost. */
export async function finishTargetJob(run: RunContext, target: TargetState): Promise<void> {
  const { state } = run;
  const jobId = target.jobId as string;
  let job: Awaited<ReturnType<typeof checkJob>>;
  try {
    job = await jobFinished(run, jobId);
  } catch (error) {
    settleJobHold(run, target);
    await recordFailure(state, target, error);
    return;
  }
  if (job.status === 'failed') {
    settleJobHold(run, target);
    const paused = /insufficient_credits/.test(job.error ?? '');
    await recordStop(state, target, paused ? 'paused' : 'failed', { type: JOB_FAILED, message: `job ${jobId}: ${job.error ?? 'the job failed'}` });
    return;
  }
  // Waiting is free, but landing holds results pages in the worker: `targets` jobs land at once.
  await takePlaceToLand(run);
  const outcome = await jobResultsWork(run, target, landJobResults, { target: targetRef(target.plan), jobId, firstPage: target.pages + 1, rankOffset: target.items }).finally(() => run.jobsLanding--);
  if (!outcome.ok) {
    await recordFailure(state, target, outcome.error);
    return;
  }
  const results = outcome.result;
  if (target.plan.enrich && results.pages > 0) target.unenrichedPages = { from: target.pages + 1, to: target.pages + results.pages };
  target.pages += results.pages;
  target.items += results.count;
  target.status = target.items === 0 ? 'empty' : 'done';
  if (target.status === 'empty') warnEmpty(state, target);
}

/**
 * Waits until fewer than `targets` jobs are landing, and counts this one in. `condition` lets every
 * waiter whose predicate holds at one check go on before any of them has counted itself (jobs that
 * complete in the same workflow task all found a place free, and all landed at once), so a waiter
 * looks again when it goes on, and counts itself in the same step (no await between), or waits
 * again when the place was taken meanwhile. Behind a patch: a history recorded before it may hold
 * more landings at once, and replays so; where no waiter was one too many, nothing changes, and no
 * patch is recorded.
 */
async function takePlaceToLand(run: RunContext): Promise<void> {
  const free = () => run.jobsLanding < run.targets;
  await condition(free);
  if (!free() && patched(LANDING_PLACES_PATCH)) while (!free()) await condition(free);
  run.jobsLanding++;
}

/** The patch that began takePlaceToLand's second look. */
const LANDING_PLACES_PATCH = 'job-landing-places';

/** Woken by the job.completed webhook (a signal); polling backs it up, slower and slower. */
async function jobFinished(run: RunContext, jobId: string): Promise<Awaited<ReturnType<typeof checkJob>>> {
  let pollMs = 2_000;
  for (;;) {
    await condition(() => run.completedJobs.has(jobId), pollMs);
    const job = await checkJob(jobId, run.identity);
    if (job.status === 'failed' || job.status === 'completed') return job;
    pollMs = Math.min(pollMs * 2, 60_000);
  }
}

/** What enriching all of a job's items costs at worst. */
export function jobEnrichmentWorst(run: RunContext, target: TargetState): number {
  return target.items * itemWorst(run, target);
}

/** The `enrich` step: the items of a job's landed pages, in one activity granted their worst case. */
export async function enrichJobPages(run: RunContext, target: TargetState): Promise<void> {
  const { state } = run;
  const pages = target.unenrichedPages!;
  let leftBefore = Number.POSITIVE_INFINITY;
  for (;;) {
    const outcome = await grantedWork(run, `enrich:${target.plan.key}`, jobEnrichmentWorst(run, target), enrichLanded, { platform: target.plan.platform, target: target.plan.key, fromPage: pages.from, toPage: pages.to }, target);
    if (!outcome.ok) {
      target.unenrichedPages = undefined;
      state.enrichment.failed++;
      await recordFailure(state, target, outcome.error);
      return;
    }
    const { result } = outcome;
    addTally(state.enrichment, result.enrichment);
    if (result.stop) {
      // The job's items stay to be enriched (a retry does it); the target itself is listed.
      state.enrichment.unenriched += result.unenriched;
      target.error = result.stop.error;
      await recordWorkStop(state, result.stop, 'enrichment stopped');
      return;
    }
    target.failedCalls = (target.failedCalls ?? 0) + result.enrichment.failed;
    // A grant is each item's worst case, and a call whose answer was lost stays spent at its worst
    // (it may be charged), so lost calls leave the grant short of the last items. While the run's
    // budget has room and each work leaves fewer, another work takes them: the items it reads
    // back were landed, and are not bought again. (It used to stop the run for budget with most of
    // the budget free.)
    const more = result.unenriched > 0 && result.unenriched < leftBefore && availableCredits(state.budget) >= itemWorst(run, target);
    if (!(more && patched('job-enrichment-granted-again'))) {
      state.enrichment.unenriched += result.unenriched;
      target.unenrichedPages = undefined;
      finishListing(target);
      if (result.unenriched > 0) stopForBudget(state, `${result.unenriched} items ${target.plan.key} listed were not enriched`);
      return;
    }
    leftBefore = result.unenriched;
  }
}

/** What enriching one of a target's items costs at worst. */
function itemWorst(run: RunContext, target: TargetState): number {
  return itemEnrichmentWorst(run.state.prices, target.plan.platform, run.harvest.enrich, listsPhotoPosts(target.plan));
}
