/**
 * The `harvest` workflow: one run of one harvest. Each target's pages are listed (and their items
 * enriched) by one long activity, several targets at once; big pulls go through async jobs. Every
 * activity is granted credits out of the run's budget before it starts and settles the grant with
 * what it spent, so work in flight at once never spends beyond the budget. The workflow keeps each
 * target's position (cursor, page, items) as its checkpoint, and continues-as-new when Temporal
 * suggests it, once no activity is in flight. Deterministic orchestration only.
 */
import {
  ActivityFailure,
  ApplicationFailure,
  condition,
  ContinueAsNew,
  continueAsNew,
  isCancellation,
  log,
  patched,
  proxyActivities,
  setCurrentDetails,
  setHandler,
  upsertMemo,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { HarvestActivities } from '../activities/index.js';
import type { WorkStop } from '../activities/item-enricher.js';
import type { RedoFailedInput, WorkSpent } from '../activities/landed-enrichment.js';
import type { EnrichmentTally } from '../src/harvest/enrichment-tally.js';
import type { TargetWorkResult, WorkProgress } from '../activities/target-work.js';
import type { RunIdentity } from '../activities/run-guard.js';
import type { FinishedRun } from '../activities/runs.js';
import type { ApiIdentity } from '../src/api-catalog/api-identity.js';
import type { StoreIdentity } from '../src/store/store-identity.js';
import type { Harvest } from '../src/harvest/harvest-types.js';
import { addTally } from '../src/harvest/enrichment-tally.js';
import { HARVEST_FAILED, HARVEST_NAME, HARVEST_STATUS, jobCompletedSignal, progressQuery } from './definitions.js';
import { statusLine, type FailedCall, type HarvestProgress, type RunMemo } from '../src/harvest/progress.js';
import {
  availableCredits,
  emptyWarning,
  finalStatus,
  finishListing,
  grant,
  newBudget,
  progressOf,
  reserve,
  settle,
  type HarvestState,
  type Reservation,
  type TargetState,
} from '../src/harvest/run-state.js';
import { accountsWorst, askedEnrichments, itemEnrichmentWorst, jobLimit, listsPhotoPosts, priceOf, takesJob, targetWorst, trackedAccounts } from '../src/harvest/rules.js';
import { mayEnrichJobItems, mayList } from '../src/harvest/spend-order.js';
import { planTargets, type TargetPlan } from '../src/harvest/targets.js';

export interface HarvestInput {
  harvest: Harvest;
  /** Overrides the harvest's budget for this run. */
  budgetCredits?: number;
  /** Carried across continue-as-new (and into a retry): the run's state so far. */
  resume?: HarvestState;
  /** Page size of listing calls; 50, the API's synchronous maximum, unless a test says otherwise. */
  pageSize?: number;
  /** Targets listed at once and enrichment calls in flight; the harvest's `concurrency` unless set. */
  concurrency?: { targets?: number; calls?: number };
  /** Continue-as-new once the history holds this many events, besides when Temporal suggests it (tests). */
  historyLimit?: number;
  /**
   * The API the run was started for (base URL and key fingerprint, never the key): every activity
   * is given it, and a worker set up for another API refuses the task (WrongApi), which stops the
   * run. Absent on runs started before runs carried it: then no worker checks.
   */
  api?: ApiIdentity;
  /**
   * The store the run was started for (its id, and its location for messages): every activity is
   * given it, and a worker whose store is another refuses the task (WrongStore), so the run's data
   * lands only there. Absent on runs started before runs carried it: then no worker checks.
   */
  store?: StoreIdentity;
}

export interface HarvestSummary extends HarvestProgress {
  finishedAt: string;
  landingsLoaded: number;
  /** Landings the final load could not load, set aside in quarantine/ (file: reason). */
  landingsQuarantined: string[];
  /** Fields the run's answers carried that no column takes: the API changed (the warehouse's schema_drift). */
  schemaDrift?: FinishedRun['schemaDrift'];
  /** Enrichment calls that failed for good (the first of them, and how many): `harvester retry` makes them again. */
  failedCalls?: { total: number; first: FailedCall[] };
  /** The run's final state: `harvester retry` resumes from it, so nothing landed is bought again. */
  checkpoint: HarvestState;
}

// Attempts without a count: each activity bounds its own (activities/outages.ts). An outage of
// the store's services (the catalog, the object store) is waited out, inside an attempt and across
// attempts, up to the worker's HARVESTER_OUTAGE_WAIT_SECONDS (10 minutes by default); any other
// retryable failure is tried at most five times, as this policy's maximumAttempts did before. Inside
// each attempt the client retries a call for up to 20 s, so an API that cannot be reached still ends
// the run (RUN_STOPPING_ERRORS) after about two minutes. Replays as before: Temporal does not check
// an activity's options against its history.
const RETRY = { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '30 seconds', maximumAttempts: Number.POSITIVE_INFINITY } as const;

// A target's whole listing, or a job's enrichment, in one activity that heartbeats after each
// page: a killed worker's work moves to another within the heartbeat timeout, resuming there.
const { harvestTarget, enrichLanded, landJobResults, redoFailedCalls, observeAccounts, observeItems } = proxyActivities<HarvestActivities>({
  startToCloseTimeout: '24 hours',
  heartbeatTimeout: '10 seconds',
  retry: RETRY,
});
const { prepareRun, pauseSchedule, startJob, checkJob, workSpent } = proxyActivities<HarvestActivities>({
  startToCloseTimeout: '1 minute',
  retry: RETRY,
});
const { finishRun } = proxyActivities<HarvestActivities>({
  startToCloseTimeout: '2 hours',
  heartbeatTimeout: '30 seconds',
  retry: RETRY,
});

export async function harvestWorkflow(input: HarvestInput): Promise<HarvestSummary> {
  try {
    return await harvest(input);
  } catch (error) {
    // A run that ends in a workflow failure says so in the UI too; continuing as new is no end, and
    // a harvest that failed has set its status line already.
    if (!(error instanceof ContinueAsNew) && !(error instanceof ApplicationFailure && error.type === HARVEST_FAILED)) setCurrentDetails(`${isCancellation(error) ? 'cancelled' : 'failed'}: ${messageOf(error)}`);
    throw error;
  }
}

async function harvest(input: HarvestInput): Promise<HarvestSummary> {
  const info = workflowInfo();
  // Every execution says what it is, including a retry resumed from a checkpoint.
  upsertSearchAttributes([
    { key: HARVEST_NAME, value: input.harvest.name },
    { key: HARVEST_STATUS, value: 'running' },
  ]);
  const state = input.resume ?? (await startRun(input, info.workflowId));
  // The run's start, not this execution's: `harvester runs` shows it for a run that continued as new.
  upsertMemo({ startedAt: state.startedAt } satisfies Partial<RunMemo>);
  // The worker's log says what each run does, one line per event, each with the run id.
  if (!input.resume) log.info('run started', { run: state.runId, harvest: state.harvestName, budget: state.budget.limit, targets: state.targets.length, ...(state.stopped ? { reason: state.stopped.reason } : {}) });
  else if (!info.continuedFromExecutionRunId) log.info('run resumed from its checkpoint', { run: state.runId, harvest: state.harvestName, budget: state.budget.limit, spent: state.budget.spent });
  const completedJobs = new Set<string>();
  setHandler(jobCompletedSignal, ({ jobId }) => void completedJobs.add(jobId));
  setHandler(progressQuery, () => progressOf(state));
  showStatus(state);
  const run: RunContext = {
    state,
    harvest: input.harvest,
    pageSize: input.pageSize ?? 50,
    targets: input.concurrency?.targets ?? input.harvest.concurrency.targets,
    calls: input.concurrency?.calls ?? input.harvest.concurrency.calls,
    completedJobs,
    jobsLanding: 0,
    identity: identityOf(input),
  };
  if (state.countedAtWorst?.length) await correctCountedAtWorst(run);

  // Big pulls go through async jobs: all of them are started first, so the API prepares them while
  // the other targets are listed.
  for (const target of state.targets) {
    if (!state.stopped && target.status === 'pending' && target.jobId === undefined && !target.paged && takesJob(target.plan, input.harvest.job_threshold, target.knownIds.length > 0)) {
      await startTargetJob(run, target);
    }
  }
  if (state.redoFailedCalls) await redoFailed(run);
  const drained = await runWork(run, () => workflowInfo().continueAsNewSuggested || (input.historyLimit !== undefined && workflowInfo().historyLength > input.historyLimit));
  if (drained === 'continue') await continueAsNew<typeof harvestWorkflow>({ ...input, resume: state });
  // Tracking spends last, after what is new was listed and enriched (src/harvest/spend-order.ts).
  if (!state.stopped && !state.accountsObserved && trackedAccounts(input.harvest).length > 0) await observeTrackedAccounts(run);
  if (!state.stopped && state.tracking && state.itemsObserved === undefined) await observeTrackedItems(run);

  let status = finalStatus(state);
  const finishInput = {
    runId: state.runId,
    harvest: state.harvestName,
    startedAt: state.startedAt,
    budgetCredits: state.budget.limit,
    creditsSpent: state.budget.spent,
    itemsLanded: progressOf(state).itemsLanded,
    ...(state.stopped ? { error: state.stopped.reason } : {}),
    enrichments: askedEnrichments(input.harvest),
    ...identityOf(input),
  };
  let loaded: Awaited<ReturnType<typeof finishRun>>;
  try {
    loaded = await finishRun({ ...finishInput, status });
  } catch (error) {
    // What the run bought is landed, but not loaded (a data directory that cannot be written, say):
    // the run ends failed, with its checkpoint, so `harvester retry` or `harvester load` can finish it.
    status = 'failed';
    // A worker set up for another API or store that already stopped the run and refused its load too: said once.
    const refusal = IDENTITY_REFUSALS.includes(failureType(error)) ? RUN_STOPPING_ERRORS[failureType(error)] : undefined;
    const repeated = refusal !== undefined && state.stopped?.reason.startsWith(refusal);
    if (!repeated) state.stopped = { status, reason: `the final load failed: ${messageOf(error)}${state.stopped ? `; before it: ${state.stopped.reason}` : ''}` };
    loaded = { landingsLoaded: 0, rowsLoaded: 0, quarantined: [] };
  }
  const progress = progressOf(state, status);
  log.info('run ended', {
    run: state.runId,
    harvest: state.harvestName,
    status,
    credits: progress.creditsSpent,
    budget: progress.budget,
    items: progress.itemsLanded,
    pages: progress.pagesLanded,
    landingsLoaded: loaded.landingsLoaded,
    ...(state.stopped ? { reason: state.stopped.reason } : failedTargetsReason(state) ? { reason: failedTargetsReason(state) } : {}),
  });
  setCurrentDetails(statusLine(progress));
  upsertSearchAttributes([{ key: HARVEST_STATUS, value: status }]);
  const memo: RunMemo = { items: progress.itemsLanded, credits: progress.creditsSpent, budget: progress.budget, pages: progress.pagesLanded };
  upsertMemo(memo as unknown as Record<string, unknown>);
  const summary: HarvestSummary = {
    ...progress,
    finishedAt: new Date().toISOString(),
    landingsLoaded: loaded.landingsLoaded,
    landingsQuarantined: loaded.quarantined,
    ...(loaded.failedCalls && loaded.failedCalls.total > 0 ? { failedCalls: loaded.failedCalls } : {}),
    ...(loaded.schemaDrift && loaded.schemaDrift.length > 0 ? { schemaDrift: loaded.schemaDrift } : {}),
    checkpoint: state,
  };
  // A failed harvest is a failed workflow execution, so Temporal's own status (the UI's list and its
  // Failures filter, `ExecutionStatus = 'Failed'`) says what the harvest's does; the summary rides
  // along as the failure's details, where `show`, `runs` and `retry` read it (src/temporal/run-summary.ts).
  // Behind a patch: histories of failed runs recorded before it completed their workflow, and replay so.
  if (status === 'failed' && patched(HARVEST_FAILED)) {
    throw ApplicationFailure.create({ type: HARVEST_FAILED, message: statusLine(progress), nonRetryable: true, details: [summary] });
  }
  return summary;
}

interface RunContext {
  state: HarvestState;
  harvest: Harvest;
  pageSize: number;
  targets: number;
  calls: number;
  completedJobs: Set<string>;
  jobsLanding: number;
  /** The API and store the run carries, as far as it carries them: given to every activity. */
  identity: RunIdentity;
}

function identityOf(input: HarvestInput): RunIdentity {
  return { ...(input.api ? { api: input.api } : {}), ...(input.store ? { store: input.store } : {}) };
}

/**
 * Runs the run's work with up to `targets` listings in flight, each job awaited and its items
 * enriched, until nothing is left to do, or until `drain()` says the history should continue as
 * new: then it starts nothing more and waits for what is in flight.
 */
async function runWork(run: RunContext, drain: () => boolean): Promise<'done' | 'continue'> {
  const { state } = run;
  const inFlight = new Map<TargetState, Promise<void>>();
  const launch = (target: TargetState, work: () => Promise<void>) => {
    const running = work().finally(() => {
      inFlight.delete(target);
      if (target.status !== 'pending' && !target.unenrichedPages) logTargetFinished(state, target);
    });
    inFlight.set(target, running);
  };
  for (;;) {
    if (drain()) {
      await Promise.all(inFlight.values());
      return state.targets.some((target) => target.status === 'pending' || target.unenrichedPages) && !state.stopped ? 'continue' : 'done';
    }
    let listing = [...inFlight.keys()].filter((target) => target.jobId === undefined).length;
    // Jobs were reserved before this loop; the rest goes by src/harvest/spend-order.ts.
    const listingsLeft = listing > 0 || state.targets.some((target) => target.status === 'pending' && target.jobId === undefined);
    for (const target of state.targets) {
      if (state.stopped || inFlight.has(target)) continue;
      if (target.jobId !== undefined && target.status === 'pending') launch(target, () => finishTargetJob(run, target));
      else if (target.unenrichedPages && mayEnrichJobItems(availableCredits(state.budget), jobEnrichmentWorst(run, target), listingsLeft)) {
        launch(target, () => enrichJobPages(run, target));
      } else if (target.status === 'pending' && target.jobId === undefined && listing < run.targets && mayList(availableCredits(state.budget), perItemWorst(run, target))) {
        listing++;
        launch(target, () => listTarget(run, target));
      }
    }
    showStatus(state);
    if (inFlight.size === 0) break;
    await Promise.race(inFlight.values());
  }
  // Nothing in flight and nothing could start: what is still pending found no budget left.
  for (const target of state.targets) {
    if (target.status === 'pending' && !state.stopped) {
      target.status = 'budget_exhausted';
      logTargetFinished(state, target);
    }
    if (target.unenrichedPages && !state.stopped) state.stopped = { status: 'budget_exhausted', reason: `no budget left to enrich the items ${target.plan.key} listed` };
  }
  return 'done';
}

function logTargetFinished(state: HarvestState, target: TargetState): void {
  log.info('target finished', {
    run: state.runId,
    target: target.plan.key,
    status: target.status,
    items: target.items,
    pages: target.pages,
    credits: target.credits,
    ...(target.error ? { error: `${target.error.type}: ${target.error.message}` } : {}),
  });
}

/** What one more item of a target costs at worst: its listing, and its enrichment when it has one. */
function perItemWorst(run: RunContext, target: TargetState): number {
  return targetWorst(run.state.prices, target.plan, run.harvest.enrich, 1);
}

function nextWorkId(state: HarvestState, what: string): string {
  return `w${state.nextWork++}:${what}`;
}

/** One piece of a target's listing: granted what its remaining items may cost, settled with what it spent. */
async function listTarget(run: RunContext, target: TargetState): Promise<void> {
  const { state } = run;
  const { plan } = target;
  const credits = grant(availableCredits(state.budget), targetWorst(state.prices, plan, run.harvest.enrich, plan.maxItems - target.items));
  const reservation = reserve(state.budget, credits);
  const workId = nextWorkId(state, plan.key);
  let result: TargetWorkResult;
  try {
    result = await harvestTarget({
      runId: state.runId,
      harvest: state.harvestName,
      target: plan,
      workId,
      grant: credits,
      prices: state.prices,
      enrich: run.harvest.enrich,
      pageSize: run.pageSize,
      calls: run.calls,
      from: target.position,
      stopAtIds: target.knownIds,
      callDeadlineMs: callDeadlineMs(run.harvest),
      ...run.identity,
    });
  } catch (error) {
    chargeWork(state, target, reservation, await spentByFailedWork(run, workId, reservation, target));
    // What the work had durably reached (landed, enriched, journaled) stands: its position, pages
    // and items, which a retry resumes from, instead of the listing's start.
    const reached = progressOfFailedWork(error);
    if (reached) {
      target.position = reached.position;
      target.pages += reached.pagesLanded;
      target.items = reached.position.items;
    }
    await recordFailure(state, target, error);
    return;
  }
  chargeWork(state, target, reservation, result);
  target.position = result.position;
  target.pages += result.pagesLanded;
  target.items = result.position.items;
  addTally(state.enrichment, result.enrichment);
  target.failedCalls = (target.failedCalls ?? 0) + result.enrichment.failed;
  if (result.status === 'done') {
    // The list ended without a single item: said as a warning, the run goes on as usual.
    const empty = result.ended === 'list_end' && target.items === 0;
    if (empty) warnEmpty(state, target);
    finishListing(target, empty);
  } else if (result.status === 'failed' || result.status === 'paused') await recordStop(state, target, result.status, result.error!);
  // A work that could buy nothing at all with its grant: granting the same again would loop.
  else if (result.credits === 0 && result.pagesLanded === 0) target.status = 'budget_exhausted';
  // Otherwise (grant_spent) the target stays pending, and goes on when the budget has room for another item.
}

/**
 * What a piece of work whose activity failed for good spent, from its journal; when even the
 * journal cannot be read (a data directory gone bad), all of its grant, which it cannot have
 * exceeded.
 */
async function spentByFailedWork(run: RunContext, workId: string, reservation: Reservation, target?: TargetState): Promise<{ credits: number; lostCalls: number }> {
  try {
    // Not given the run's API or store: it buys nothing, and a work refused by another API's or
    // store's worker (WrongApi, WrongStore) spent nothing, which any journal says, rather than its whole grant.
    return await workSpent({ runId: run.state.runId, workId });
  } catch (error) {
    log.warn('the journal of a failed work cannot be read; its whole grant counts as spent until a retry reads it', { workId, message: messageOf(error) });
    (run.state.countedAtWorst ??= []).push({ workId, counted: reservation.credits, ...(target ? { target: target.plan.key } : {}) });
    return { credits: reservation.credits, lostCalls: 0 };
  }
}

/**
 * A retry's first step: the works an earlier attempt counted at their whole grant (their journals
 * unreadable then) are read again, and the run's credits corrected to what they spent. A journal
 * still unreadable stays counted as it was, for the next retry.
 */
async function correctCountedAtWorst(run: RunContext): Promise<void> {
  const { state } = run;
  const works = state.countedAtWorst ?? [];
  const left: typeof works = [];
  for (const work of works) {
    let spent: WorkSpent;
    try {
      spent = await workSpent({ runId: state.runId, workId: work.workId });
    } catch (error) {
      log.warn('the journal of a work counted at its whole grant still cannot be read', { workId: work.workId, message: messageOf(error) });
      left.push(work);
      continue;
    }
    const overcounted = work.counted - spent.credits;
    state.budget.spent -= overcounted;
    state.callsLost += spent.lostCalls;
    const target = state.targets.find((candidate) => candidate.plan.key === work.target);
    if (target) target.credits -= overcounted;
    log.info('a work counted at its whole grant is corrected from its journal', { run: state.runId, workId: work.workId, counted: work.counted, spent: spent.credits });
  }
  state.countedAtWorst = left.length > 0 ? left : undefined;
}

/** Settles a piece of work's grant with what it spent, and counts that against its target. */
function chargeWork(state: HarvestState, target: TargetState, reservation: Reservation, spent: { credits: number; lostCalls: number }): void {
  settle(state.budget, reservation, spent.credits);
  target.credits += spent.credits;
  state.callsLost += spent.lostCalls;
}

/** Starts a target's job, its worst case reserved; a budget too small for a job leaves it to paging. */
async function startTargetJob(run: RunContext, target: TargetState): Promise<void> {
  const { state } = run;
  const { plan } = target;
  const price = priceOf(state.prices, plan.platform, plan.endpoint);
  const limit = jobLimit(state.prices, plan, availableCredits(state.budget));
  if (limit === 0) {
    target.paged = true;
    return;
  }
  const reservation = reserve(state.budget, limit * price);
  try {
    const { jobId } = await startJob({ runId: state.runId, harvest: state.harvestName, target: targetRef(plan), limit, worst: reservation.credits, workflowId: workflowInfo().workflowId, ...run.identity });
    target.jobId = jobId;
    target.jobReserved = reservation.credits;
  } catch (error) {
    // A job lost with a dying worker may still be charged: its worst case stays spent.
    const lost = failureType(error) === 'JobLost';
    settle(state.budget, reservation, lost ? reservation.credits : 0);
    if (lost) state.callsLost++;
    await recordFailure(state, target, error);
  }
}

/** Waits for a target's job, lands its results, and settles its reservation with what it cost. */
async function finishTargetJob(run: RunContext, target: TargetState): Promise<void> {
  const { state } = run;
  const jobId = target.jobId as string;
  const reservation = { credits: target.jobReserved ?? 0 };
  const release = (charged: number) => {
    settle(state.budget, reservation, charged);
    target.jobReserved = 0;
  };
  try {
    // Woken by the job.completed webhook (a signal); polling backs it up, slower and slower.
    let pollMs = 2_000;
    for (;;) {
      await condition(() => run.completedJobs.has(jobId), pollMs);
      const job = await checkJob(jobId, run.identity);
      if (job.status === 'failed') {
        release(0);
        const paused = /insufficient_credits/.test(job.error ?? '');
        await recordStop(state, target, paused ? 'paused' : 'failed', { type: 'JobFailed', message: `job ${jobId}: ${job.error ?? 'the job failed'}` });
        return;
      }
      if (job.status === 'completed') break;
      pollMs = Math.min(pollMs * 2, 60_000);
    }
    // Waiting is free, but landing holds results pages in the worker: `targets` jobs land at once.
    await condition(() => run.jobsLanding < run.targets);
    run.jobsLanding++;
    const results = await landJobResults({ runId: state.runId, harvest: state.harvestName, target: targetRef(target.plan), jobId, firstPage: target.pages + 1, rankOffset: target.items, ...run.identity }).finally(() => run.jobsLanding--);
    release(results.credits);
    if (target.plan.enrich && results.pages > 0) target.unenrichedPages = { from: target.pages + 1, to: target.pages + results.pages };
    target.credits += results.credits;
    target.pages += results.pages;
    target.items += results.count;
    target.status = target.items === 0 ? 'empty' : 'done';
    if (target.status === 'empty') warnEmpty(state, target);
  } catch (error) {
    release(0);
    await recordFailure(state, target, error);
  }
}

function jobEnrichmentWorst(run: RunContext, target: TargetState): number {
  return target.items * itemEnrichmentWorst(run.state.prices, target.plan.platform, run.harvest.enrich, listsPhotoPosts(target.plan));
}

/** Enriches the items of a job's landed pages, in one activity granted their worst case. */
async function enrichJobPages(run: RunContext, target: TargetState): Promise<void> {
  const { state } = run;
  const pages = target.unenrichedPages!;
  const credits = grant(availableCredits(state.budget), jobEnrichmentWorst(run, target));
  const reservation = reserve(state.budget, credits);
  const workId = nextWorkId(state, `enrich:${target.plan.key}`);
  try {
    const result = await enrichLanded({ ...workInput(run, workId, credits), platform: target.plan.platform, target: target.plan.key, fromPage: pages.from, toPage: pages.to });
    chargeWork(state, target, reservation, result);
    addTally(state.enrichment, result.enrichment);
    state.enrichment.unenriched += result.unenriched;
    if (result.stop) {
      // The job's items stay to be enriched (a retry does it); the target itself is listed.
      target.error = result.stop.error;
      await recordWorkStop(state, result.stop, 'enrichment stopped');
      return;
    }
    target.unenrichedPages = undefined;
    target.failedCalls = (target.failedCalls ?? 0) + result.enrichment.failed;
    finishListing(target);
    if (result.unenriched > 0) state.stopped ??= { status: 'budget_exhausted', reason: `${result.unenriched} items ${target.plan.key} listed were not enriched: the budget ran out` };
  } catch (error) {
    chargeWork(state, target, reservation, await spentByFailedWork(run, workId, reservation, target));
    target.unenrichedPages = undefined;
    state.enrichment.failed++;
    await recordFailure(state, target, error);
  }
}

/**
 * A retry's first work: the enrichment calls that failed for good in the run so far, made again
 * within one grant of their worst case. Those that land are no longer failed.
 */
async function redoFailed(run: RunContext): Promise<void> {
  const { state } = run;
  state.redoFailedCalls = false;
  const credits = grant(availableCredits(state.budget), state.enrichment.failed * dearestItemEnrichment(run));
  const reservation = reserve(state.budget, credits);
  const workId = nextWorkId(state, 'redo-failed-calls');
  try {
    const result = await redoFailedCalls(workInput(run, workId, credits));
    settle(state.budget, reservation, result.credits);
    state.callsLost += result.lostCalls;
    // The journals are the record of failed calls; a count kept before they were is never below zero.
    state.enrichment.failed = Math.max(0, state.enrichment.failed - result.tried);
    addTally(state.enrichment, result.enrichment);
    for (const target of state.targets) {
      if (!target.listed) continue;
      target.failedCalls = result.stillFailed[target.plan.key] ?? 0;
      finishListing(target);
    }
    if (result.stop?.status === 'paused') await stopForCredits(state, result.stop.error.message);
  } catch (error) {
    settle(state.budget, reservation, (await spentByFailedWork(run, workId, reservation)).credits);
    log.warn('failed enrichment calls could not be made again', { message: messageOf(error) });
    // An error no work can get past (another API's worker, a refused key) stops the run here too.
    const why = RUN_STOPPING_ERRORS[failureType(error)];
    if (why) state.stopped ??= { status: 'failed', reason: saidOnce(why, messageOf(error)) };
    // Their targets stay failed, as the run before left them.
    for (const target of state.targets) if (target.listed) finishListing(target);
  }
}

/**
 * Observes each tracked account's profile once (`track.accounts`), granted their worst case.
 */
async function observeTrackedAccounts(run: RunContext): Promise<void> {
  const accounts = trackedAccounts(run.harvest);
  const result = await trackingWorks(run, 'accounts', accountsWorst(run.state.prices, accounts), (input) => observeAccounts({ ...input, accounts }));
  if (result) run.state.accountsObserved = true;
}

/**
 * Observes the stats of the tracked items due when the run started (`track.items`), granted what
 * prepareRun forecast for them, most overdue first.
 */
async function observeTrackedItems(run: RunContext): Promise<void> {
  const forecast = run.state.tracking!;
  const targets = run.state.targets.map((target) => target.plan);
  const result = await trackingWorks(run, 'items', forecast.credits, (input) => observeItems({ ...input, targets, days: run.harvest.track!.items!.days, asOfMs: forecast.asOfMs }));
  if (result) run.state.itemsObserved = Object.values(result.observed).reduce((sum: number, count) => sum + count, 0);
}

type TrackingResult = WorkSpent & { enrichment: EnrichmentTally; unobserved: number; stop?: WorkStop };

/**
 * Tracking works until all is observed: a work that left some unobserved (its grant spent, as
 * when calls a killed worker left open count at their worst case) is followed by another for the
 * rest, while the budget has room and the last one bought something; then what is left is left,
 * and the run says so. Undefined when a work failed for good (the run then stops, saying why).
 */
async function trackingWorks<R extends TrackingResult>(run: RunContext, what: 'accounts' | 'items', worst: number, observe: (input: RedoFailedInput) => Promise<R>): Promise<R | undefined> {
  const { state } = run;
  for (;;) {
    const result = await trackingWork(run, what, worst, observe);
    if (!result || result.stop || result.unobserved === 0) return result;
    if (result.credits === 0 || availableCredits(state.budget) === 0) {
      state.stopped ??= { status: 'budget_exhausted', reason: `${result.unobserved} tracked ${what} were not observed: the budget ran out` };
      return result;
    }
  }
}

/**
 * One tracking work, granted `worst` out of what is free: its spend settled and its calls tallied.
 * Undefined when the work failed for good (the run then stops, saying why).
 */
async function trackingWork<R extends TrackingResult>(run: RunContext, what: 'accounts' | 'items', worst: number, observe: (input: RedoFailedInput) => Promise<R>): Promise<R | undefined> {
  const { state } = run;
  const credits = grant(availableCredits(state.budget), worst);
  const reservation = reserve(state.budget, credits);
  const workId = nextWorkId(state, `track-${what}`);
  try {
    const result = await observe(workInput(run, workId, credits));
    settle(state.budget, reservation, result.credits);
    state.callsLost += result.lostCalls;
    addTally(state.enrichment, result.enrichment);
    if (result.stop) await recordWorkStop(state, result.stop, 'tracking stopped');
    return result;
  } catch (error) {
    settle(state.budget, reservation, (await spentByFailedWork(run, workId, reservation)).credits);
    log.warn(`tracked ${what} could not be observed`, { message: messageOf(error) });
    state.stopped ??= { status: 'failed', reason: saidOnce(RUN_STOPPING_ERRORS[failureType(error)] ?? `tracked ${what} could not be observed`, messageOf(error)) };
    return undefined;
  }
}

/** What every enrichment work is given: the run, its own journal and grant, prices, enrichment and limits. */
function workInput(run: RunContext, workId: string, credits: number): RedoFailedInput {
  const { state } = run;
  return { runId: state.runId, harvest: state.harvestName, workId, grant: credits, prices: state.prices, enrich: run.harvest.enrich, calls: run.calls, callDeadlineMs: callDeadlineMs(run.harvest), ...run.identity };
}

/** The most one item's enrichment, or one tracked account's profile, costs in this harvest: a bound on what one failed call costs again. */
function dearestItemEnrichment(run: RunContext): number {
  const { prices } = run.state;
  return Math.max(
    ...run.state.targets.map((target) => itemEnrichmentWorst(prices, target.plan.platform, run.harvest.enrich, listsPhotoPosts(target.plan))),
    // A tracked account's profile is such a call too (`track.accounts`).
    ...trackedAccounts(run.harvest).map((account) => accountsWorst(prices, [account])),
  );
}

function callDeadlineMs(harvest: Harvest): number | undefined {
  return harvest.call_deadline_seconds === undefined ? undefined : harvest.call_deadline_seconds * 1_000;
}

function targetRef(plan: TargetPlan) {
  return { key: plan.key, platform: plan.platform, endpoint: plan.endpoint, params: plan.params };
}

async function startRun(input: HarvestInput, workflowId: string): Promise<HarvestState> {
  const plans = planTargets(input.harvest);
  const startedAt = new Date().toISOString();
  const budgetCredits = input.budgetCredits ?? input.harvest.budget.credits;
  let prepared: Awaited<ReturnType<typeof prepareRun>>;
  try {
    prepared = await prepareRun({
      runId: workflowId,
      harvest: input.harvest.name,
      startedAt,
      budgetCredits,
      targets: plans,
      ...(input.harvest.track?.items ? { trackItems: input.harvest.track.items } : {}),
      ...identityOf(input),
    });
  } catch (error) {
    // Nothing was bought: the run fails with one line that says why it could not start.
    throw ApplicationFailure.nonRetryable(`the run could not start: ${messageOf(error)}`, failureType(error));
  }
  const state: HarvestState = {
    runId: workflowId,
    harvestName: input.harvest.name,
    startedAt,
    budget: newBudget(budgetCredits),
    prices: prepared.prices,
    targets: plans.map((plan) => {
      const known = prepared.knowledge[plan.key];
      return {
        plan,
        status: 'pending',
        position: { page: 1, items: 0, offset: 0, relists: 0, ...(known?.firstPageLimit !== undefined ? { nextLimit: known.firstPageLimit } : {}) },
        pages: 0,
        items: 0,
        credits: 0,
        knownIds: known?.knownIds ?? [],
      };
    }),
    enrichment: { calls: 0, skipped: 0, failed: 0, unenriched: 0 },
    callsLost: 0,
    nextWork: 1,
    ...(prepared.tracking ? { tracking: prepared.tracking } : {}),
  };
  if (prepared.blocked) state.stopped = { status: 'paused', reason: prepared.blocked };
  return state;
}

/** A target's activity failed for good: its error is recorded, and errors no target can get past stop the run. */
async function recordFailure(state: HarvestState, target: TargetState, error: unknown): Promise<void> {
  const type = failureType(error);
  await recordStop(state, target, type === 'InsufficientCreditsError' ? 'paused' : 'failed', { type, message: messageOf(error), ...(requestIdOf(error) ? { requestId: requestIdOf(error) } : {}) });
}

/**
 * Errors that no other target can get past end the run at once, with one line that says why:
 * a refused key (401), a data directory that cannot be written, an API that cannot be reached.
 */
const RUN_STOPPING_ERRORS: Record<string, string> = {
  AuthenticationError: 'the API refused the key',
  DataDirNotWritable: 'the data directory cannot be written',
  NetworkError: 'the API cannot be reached',
  // activities/run-guard.ts: its messages begin with these, and name both APIs or stores.
  WrongApi: "a worker set up for another API took the run's task",
  WrongApiKey: "the run's API key is not the one the worker uses",
  WrongStore: "a worker that keeps its data elsewhere took the run's task",
};

/** A worker's refusals of a run set up for another API or store (activities/run-guard.ts). */
const IDENTITY_REFUSALS = ['WrongApi', 'WrongApiKey', 'WrongStore'];

async function recordStop(state: HarvestState, target: TargetState, status: 'paused' | 'failed', error: NonNullable<TargetState['error']>): Promise<void> {
  target.error = error;
  target.status = status;
  if (status === 'paused') {
    await stopForCredits(state, error.message);
    return;
  }
  log.warn('target failed', { target: target.plan.key, type: error.type, message: error.message });
  const why = RUN_STOPPING_ERRORS[error.type];
  if (why) state.stopped ??= { status: 'failed', reason: saidOnce(why, error.message) };
}

/** Why a run that nothing stopped has failed targets: how many, and the first one's error (for the `run ended` line). */
function failedTargetsReason(state: HarvestState): string | undefined {
  const failed = state.targets.filter((target) => target.status === 'failed' && target.error);
  if (failed.length === 0) return undefined;
  const first = failed[0]!;
  return `${failed.length} of ${state.targets.length} targets failed; the first, ${first.plan.key}: ${first.error!.type}: ${first.error!.message}`;
}

/** A run-stopping reason said once: a message that already says why is not prefixed with it again. */
function saidOnce(why: string, message: string): string {
  return message.startsWith(why) ? message : `${why}: ${message}`;
}

/** A work that stopped buying: a 402 pauses the run (and its schedule), a refused key fails it. */
async function recordWorkStop(state: HarvestState, stop: WorkStop, what: string): Promise<void> {
  if (stop.status === 'paused') await stopForCredits(state, stop.error.message);
  else state.stopped ??= { status: 'failed', reason: `${RUN_STOPPING_ERRORS[stop.error.type] ?? what}: ${stop.error.message}` };
}

function warnEmpty(state: HarvestState, target: TargetState): void {
  log.warn('target returned no items', { run: state.runId, target: target.plan.key, warning: emptyWarning(target.plan) });
}

/** A 402: stop buying, and pause the harvest's schedule, instead of retrying into the wall. */
async function stopForCredits(state: HarvestState, reason: string): Promise<void> {
  if (state.stopped) return;
  state.stopped = { status: 'paused', reason: `insufficient credits: ${reason}` };
  await pauseSchedule({ harvest: state.harvestName, reason: `insufficient_credits (run ${state.runId})` });
}

function failureType(error: unknown): string {
  const cause = error instanceof ActivityFailure ? error.cause : error;
  return cause instanceof ApplicationFailure ? (cause.type ?? 'ApplicationFailure') : cause instanceof Error ? cause.name : 'Error';
}

function messageOf(error: unknown): string {
  const cause = error instanceof ActivityFailure && error.cause ? error.cause : error;
  return cause instanceof Error ? cause.message : String(cause);
}

/** The durable progress a target's work reached before it failed for good, when its failure carries it (activities/outages.ts). */
function progressOfFailedWork(error: unknown): WorkProgress | undefined {
  const cause = error instanceof ActivityFailure ? error.cause : undefined;
  if (!(cause instanceof ApplicationFailure)) return undefined;
  for (const detail of cause.details ?? []) {
    const progress = (detail as { workProgress?: WorkProgress } | null)?.workProgress;
    if (progress?.position) return progress;
  }
  return undefined;
}

function requestIdOf(error: unknown): string | undefined {
  const cause = error instanceof ActivityFailure ? error.cause : undefined;
  if (!(cause instanceof ApplicationFailure)) return undefined;
  const details = cause.details?.[0] as { requestId?: string | null } | undefined;
  return details?.requestId ?? undefined;
}

/**
 * The run's status line as the workflow's current details (no command, so histories replay as
 * before): what the Temporal UI shows for the run, kept up to date while it runs.
 */
function showStatus(state: HarvestState): void {
  setCurrentDetails(statusLine(progressOf(state)));
}
