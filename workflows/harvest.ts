/**
 * The `harvest` workflow: one run of one harvest. It lists each target page by page (or through an
 * async job for big pulls), reserving every call's worst case against the run's budget first and
 * settling it with what was charged; it keeps each target's cursor as its checkpoint; it enriches
 * what it landed; and it continues-as-new when Temporal suggests, carrying its state along.
 * Deterministic orchestration only: every side effect is an activity.
 */
import {
  ActivityFailure,
  ApplicationFailure,
  condition,
  continueAsNew,
  log,
  proxyActivities,
  setHandler,
  upsertMemo,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { HarvestActivities } from '../activities/index.js';
import type { PageSummary } from '../activities/pages.js';
import type { Harvest } from '../src/config/harvest-types.js';
import type { PriceTable } from '../src/config/prices.js';
import type { EndpointKey, Platform } from '../src/spec/endpoints.js';
import { fitLimit, newBudget, reserve, settle, type BudgetState } from './budget.js';
import { HARVEST_NAME, HARVEST_STATUS, jobCompletedSignal, progressQuery, type HarvestProgress, type HarvestStatus, type RunMemo, type TargetProgress } from './definitions.js';
import { planTargets, type TargetPlan } from './targets.js';

export interface HarvestInput {
  harvest: Harvest;
  /** Overrides the harvest's budget for this run. */
  budgetCredits?: number;
  /** Carried across continue-as-new (and into a retry): the run's state so far. */
  resume?: HarvestState;
  /** Page size of listing calls; 50, the API's synchronous maximum, unless a test says otherwise. */
  pageSize?: number;
  /** Enrichment calls in flight at once. */
  enrichConcurrency?: number;
}

export type TargetStatus = 'pending' | 'done' | 'failed' | 'budget_exhausted' | 'paused';

export interface TargetState {
  plan: TargetPlan;
  status: TargetStatus;
  /** The checkpoint: where the listing resumes. */
  cursor?: string;
  pages: number;
  items: number;
  credits: number;
  knownIds: string[];
  /** The next page's size on an incremental run, grown from the first page's estimate. */
  nextLimit?: number;
  /** A job in flight for this target, and the credits reserved for it (carried across continue-as-new). */
  jobId?: string;
  jobReserved?: number;
  /** The budget left too little for a job, so the target is paged instead. */
  paged?: boolean;
  /** The first item this run landed for the target: where a re-listing after an expired cursor stops. */
  firstLandedId?: string;
  error?: { type: string; message: string; requestId?: string };
}

export type EnrichKind = 'stats' | 'transcript' | 'summary' | 'download';

export type EnrichEntry = { platform: Platform; url: string } | { platform: Platform; landed: { target: string; page: number } };

export interface HarvestState {
  runId: string;
  harvestName: string;
  startedAt: string;
  budget: BudgetState;
  prices: PriceTable;
  targets: TargetState[];
  /**
   * Items landed this run that still need enriching: their URLs, or a job's landed results page,
   * read (by an activity) only when enrichment reaches it, so job pulls never put thousands of
   * URLs into the workflow's state at once.
   */
  enrichQueue: EnrichEntry[];
  enrichment: { calls: number; skipped: number; failed: number };
  stopped?: { status: HarvestStatus; reason: string };
}

export interface HarvestSummary extends HarvestProgress {
  finishedAt: string;
  landingsLoaded: number;
  /** The run's final state: `harvester retry` resumes from it, so nothing landed is bought again. */
  checkpoint: HarvestState;
}

// One call each. A worker killed mid-call is noticed when this runs out, so it is kept short; the
// client inside gives up retrying well before it (see src/cli/engine-context.ts).
const { fetchPage, fetchObject, landedItemUrls } = proxyActivities<HarvestActivities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '30 seconds', maximumAttempts: 12 },
});
const { prepareRun, finishRun, pauseSchedule, startJob, checkJob } = proxyActivities<HarvestActivities>({
  startToCloseTimeout: '5 minutes',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '30 seconds', maximumAttempts: 12 },
});
const { landJobResults } = proxyActivities<HarvestActivities>({
  startToCloseTimeout: '30 minutes',
  heartbeatTimeout: '1 minute',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '30 seconds', maximumAttempts: 12 },
});

const ENRICH_ENDPOINTS: Record<EnrichKind, 'stats' | 'transcript' | 'summary' | 'download'> = {
  stats: 'stats',
  transcript: 'transcript',
  summary: 'summary',
  download: 'download',
};

export async function harvestWorkflow(input: HarvestInput): Promise<HarvestSummary> {
  const info = workflowInfo();
  // Every execution says what it is, including a retry resumed from a checkpoint.
  upsertSearchAttributes([
    { key: HARVEST_NAME, value: input.harvest.name },
    { key: HARVEST_STATUS, value: 'running' },
  ]);
  const state = input.resume ?? (await startRun(input, info.workflowId));
  const completedJobs = new Set<string>();
  setHandler(jobCompletedSignal, ({ jobId }) => void completedJobs.add(jobId));
  setHandler(progressQuery, () => progressOf(state));
  const options = { pageSize: input.pageSize ?? 50, enrichConcurrency: input.enrichConcurrency ?? 4 };
  const checkpoint = async () => {
    if (workflowInfo().continueAsNewSuggested) await continueAsNew<typeof harvestWorkflow>({ ...input, resume: state });
  };

  // Big pulls go through async jobs: all of them are started first, so the API prepares them while
  // the other targets are paged; then each is awaited and landed.
  const takesJob = (target: TargetState) =>
    target.status === 'pending' && target.jobId === undefined && !target.paged && target.knownIds.length === 0 && target.plan.maxItems > input.harvest.job_threshold;
  for (const target of state.targets) {
    if (!state.stopped && takesJob(target)) await startTargetJob(state, target);
  }
  for (const target of state.targets) {
    if (state.stopped || target.status !== 'pending' || target.jobId !== undefined) continue;
    await listPages(state, target, options.pageSize, input.harvest, checkpoint);
    await checkpoint();
  }
  for (const target of state.targets) {
    if (state.stopped || target.status !== 'pending' || target.jobId === undefined) continue;
    await finishTargetJob(state, target, completedJobs, input.harvest.name);
    await checkpoint();
  }
  if (!state.stopped) await enrich(state, input.harvest, options.enrichConcurrency, checkpoint);

  const status = finalStatus(state);
  const progress = progressOf(state, status);
  const loaded = await finishRun({
    runId: state.runId,
    harvest: state.harvestName,
    startedAt: state.startedAt,
    status,
    budgetCredits: state.budget.limit,
    creditsSpent: state.budget.spent,
    itemsLanded: progress.itemsLanded,
    ...(state.stopped ? { error: state.stopped.reason } : {}),
  });
  upsertSearchAttributes([{ key: HARVEST_STATUS, value: status }]);
  const memo: RunMemo = { items: progress.itemsLanded, credits: progress.creditsSpent, budget: progress.budget, pages: progress.pagesLanded };
  upsertMemo(memo as unknown as Record<string, unknown>);
  return { ...progress, finishedAt: new Date().toISOString(), landingsLoaded: loaded.landingsLoaded, checkpoint: state };
}

async function startRun(input: HarvestInput, workflowId: string): Promise<HarvestState> {
  const plans = planTargets(input.harvest);
  const startedAt = new Date().toISOString();
  const budgetCredits = input.budgetCredits ?? input.harvest.budget.credits;
  const prepared = await prepareRun({ runId: workflowId, harvest: input.harvest.name, startedAt, budgetCredits, targets: plans });
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
        pages: 0,
        items: 0,
        credits: 0,
        knownIds: known?.knownIds ?? [],
        ...(known?.firstPageLimit !== undefined ? { nextLimit: known.firstPageLimit } : {}),
      };
    }),
    enrichQueue: [],
    enrichment: { calls: 0, skipped: 0, failed: 0 },
  };
  if (prepared.blocked) state.stopped = { status: 'paused', reason: prepared.blocked };
  return state;
}

function priceOf(state: HarvestState, platform: Platform, endpoint: string): number {
  return state.prices[`${platform}/${endpoint}` as EndpointKey];
}

/** Pages of one target until it has its items, meets known items, runs out, or the budget does. */
async function listPages(state: HarvestState, target: TargetState, pageSize: number, harvest: Harvest, checkpoint: () => Promise<void>): Promise<void> {
  const { plan } = target;
  const price = priceOf(state, plan.platform, plan.endpoint);
  const incremental = target.knownIds.length > 0;
  while (target.status === 'pending' && !state.stopped) {
    const wanted = plan.maxItems - target.items;
    if (wanted <= 0) {
      target.status = 'done';
      break;
    }
    const size = Math.min(pageSize, wanted, target.nextLimit ?? pageSize);
    const limit = fitLimit(state.budget, price, size);
    if (limit < 1) {
      target.status = 'budget_exhausted';
      break;
    }
    const reservation = reserve(state.budget, limit * price);
    let page: PageSummary;
    try {
      page = await fetchPage({
        runId: state.runId,
        harvest: harvest.name,
        target: targetRef(plan),
        page: target.pages + 1,
        ...(target.cursor ? { cursor: target.cursor } : {}),
        limit,
        rankOffset: target.items,
        stopAtIds: target.knownIds,
        collectUrls: plan.enrich,
      });
    } catch (error) {
      settle(state.budget, reservation, 0);
      await recordFailure(state, target, error);
      break;
    }
    settle(state.budget, reservation, page.credits);
    target.credits += page.credits;
    if (page.cursorExpired) {
      // Cursors are short-lived. Start again from the top, and stop at the first item this run
      // already landed (the newest one, lists being newest first), so no page is bought twice.
      target.cursor = undefined;
      target.knownIds = [...target.knownIds, ...(target.firstLandedId ? [target.firstLandedId] : [])];
      target.nextLimit = pageSize;
      log.warn('cursor expired; listing again from the top', { target: plan.key });
      continue;
    }
    if (target.pages === 0 && page.firstId) target.firstLandedId = page.firstId;
    target.pages++;
    target.items += page.count;
    for (const url of page.itemUrls) state.enrichQueue.push({ url, platform: plan.platform });
    target.cursor = page.nextCursor;
    if (incremental) target.nextLimit = Math.min(pageSize, limit * 2);
    if (page.reachedKnown || !page.hasMore || !page.nextCursor) target.status = 'done';
    await checkpoint();
  }
}

/** Starts a target's job, its worst case reserved; a budget too small for a job leaves it to paging. */
async function startTargetJob(state: HarvestState, target: TargetState): Promise<void> {
  const { plan } = target;
  const price = priceOf(state, plan.platform, plan.endpoint);
  const limit = fitLimit(state.budget, price, Math.min(plan.maxItems, 10_000));
  if (limit <= 50) {
    // Jobs take more than 50 items: page instead, within what is left of the budget.
    target.paged = true;
    return;
  }
  const reservation = reserve(state.budget, limit * price);
  try {
    const { jobId } = await startJob({ runId: state.runId, target: targetRef(plan), limit, workflowId: workflowInfo().workflowId });
    target.jobId = jobId;
    target.jobReserved = reservation.credits;
  } catch (error) {
    settle(state.budget, reservation, 0);
    await recordFailure(state, target, error);
  }
}

/** Waits for a target's job, lands its results, and settles its reservation with what it cost. */
async function finishTargetJob(state: HarvestState, target: TargetState, completedJobs: Set<string>, harvestName: string): Promise<void> {
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
      await condition(() => completedJobs.has(jobId), pollMs);
      const job = await checkJob(jobId);
      if (job.status === 'failed') {
        release(0);
        target.status = /insufficient_credits/.test(job.error ?? '') ? 'paused' : 'failed';
        target.error = { type: 'JobFailed', message: job.error ?? 'the job failed' };
        if (target.status === 'paused') await stopForCredits(state, `job ${jobId}: ${job.error}`);
        return;
      }
      if (job.status === 'completed') break;
      pollMs = Math.min(pollMs * 2, 60_000);
    }
    const results = await landJobResults({ runId: state.runId, harvest: harvestName, target: targetRef(target.plan), jobId, firstPage: target.pages + 1, rankOffset: target.items });
    release(results.credits);
    if (target.plan.enrich) {
      for (let page = target.pages + 1; page <= target.pages + results.pages; page++) {
        state.enrichQueue.push({ platform: target.plan.platform, landed: { target: target.plan.key, page } });
      }
    }
    target.credits += results.credits;
    target.pages += results.pages;
    target.items += results.count;
    target.status = 'done';
  } catch (error) {
    release(0);
    await recordFailure(state, target, error);
  }
}

function targetRef(plan: TargetPlan) {
  return { key: plan.key, platform: plan.platform, endpoint: plan.endpoint, params: plan.params };
}

/**
 * Enrichment of the items landed this run: a chunk of items at a time, their calls run a few at
 * once, each reserved first. The queue drops a chunk only when all its calls have settled, so the
 * state carried by continue-as-new never loses or repeats an item.
 */
async function enrich(state: HarvestState, harvest: Harvest, concurrency: number, checkpoint: () => Promise<void>): Promise<void> {
  const kinds = (Object.keys(ENRICH_ENDPOINTS) as EnrichKind[]).filter((kind) => harvest.enrich[kind]);
  const commentsPerItem = harvest.enrich.comments === false ? 0 : harvest.enrich.comments.max_per_item;
  while (state.enrichQueue.length > 0 && !state.stopped) {
    const next = state.enrichQueue[0]!;
    if ('landed' in next) {
      const urls = await landedItemUrls({ runId: state.runId, ...next.landed });
      state.enrichQueue.splice(0, 1, ...urls.map((url) => ({ platform: next.platform, url })));
      continue;
    }
    const chunk: { platform: Platform; url: string }[] = [];
    for (const entry of state.enrichQueue) {
      if (!('url' in entry) || chunk.length >= concurrency * 4) break;
      chunk.push(entry);
    }
    const calls: (() => Promise<void>)[] = [];
    for (const { url, platform } of chunk) {
      const isPhotoPost = platform === 'instagram' && url.includes('/p/');
      for (const kind of kinds) {
        // Photo posts have no audio: a transcript or summary would only be refused.
        if (isPhotoPost && (kind === 'transcript' || kind === 'summary')) continue;
        calls.push(() => enrichObject(state, harvest.name, platform, ENRICH_ENDPOINTS[kind], url));
      }
      if (commentsPerItem > 0) calls.push(() => enrichComments(state, harvest, platform, url, commentsPerItem));
    }
    const inFlight = new Set<Promise<void>>();
    for (const call of calls) {
      while (inFlight.size >= concurrency) await Promise.race(inFlight);
      const running: Promise<void> = call().finally(() => inFlight.delete(running));
      inFlight.add(running);
    }
    await Promise.all(inFlight);
    state.enrichQueue.splice(0, chunk.length);
    await checkpoint();
  }
}

async function enrichObject(state: HarvestState, harvestName: string, platform: Platform, endpoint: 'stats' | 'transcript' | 'summary' | 'download', url: string): Promise<void> {
  const price = priceOf(state, platform, endpoint);
  if (fitLimit(state.budget, price, 1) < 1) {
    state.stopped ??= { status: 'budget_exhausted', reason: `no budget left for ${platform}/${endpoint}` };
    return;
  }
  const reservation = reserve(state.budget, price);
  try {
    const result = await fetchObject({ runId: state.runId, harvest: harvestName, platform, endpoint, url });
    settle(state.budget, reservation, result.credits);
    state.enrichment.calls++;
    if (result.skipped) state.enrichment.skipped++;
  } catch (error) {
    settle(state.budget, reservation, 0);
    if (failureType(error) === 'InsufficientCreditsError') await stopForCredits(state, messageOf(error));
    else state.enrichment.failed++;
  }
}

async function enrichComments(state: HarvestState, harvest: Harvest, platform: Platform, url: string, maxItems: number): Promise<void> {
  const target: TargetState = {
    plan: { key: `comments:${platform}:${url}`, kind: 'comments', platform, endpoint: 'comments', params: { url }, maxItems, enrich: false },
    status: 'pending',
    pages: 0,
    items: 0,
    credits: 0,
    knownIds: [],
  };
  await listPages(state, target, 50, harvest, async () => undefined);
  state.enrichment.calls += target.pages;
  if (target.status === 'failed') state.enrichment.failed++;
}

async function recordFailure(state: HarvestState, target: TargetState, error: unknown): Promise<void> {
  const type = failureType(error);
  target.error = { type, message: messageOf(error), ...(requestIdOf(error) ? { requestId: requestIdOf(error) } : {}) };
  if (type === 'InsufficientCreditsError') {
    target.status = 'paused';
    await stopForCredits(state, target.error.message);
  } else {
    target.status = 'failed';
    log.warn('target failed', { target: target.plan.key, type, message: target.error.message });
  }
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

function requestIdOf(error: unknown): string | undefined {
  const cause = error instanceof ActivityFailure ? error.cause : undefined;
  if (!(cause instanceof ApplicationFailure)) return undefined;
  const details = cause.details?.[0] as { requestId?: string | null } | undefined;
  return details?.requestId ?? undefined;
}

function finalStatus(state: HarvestState): HarvestStatus {
  if (state.stopped) return state.stopped.status;
  if (state.targets.some((target) => target.status === 'budget_exhausted')) return 'budget_exhausted';
  if (state.targets.length > 0 && state.targets.every((target) => target.status === 'failed')) return 'failed';
  if (state.targets.some((target) => target.status === 'failed') || state.enrichment.failed > 0) return 'completed_with_errors';
  return 'completed';
}

function progressOf(state: HarvestState, status?: HarvestStatus): HarvestProgress {
  const targets: TargetProgress[] = state.targets.map((target) => ({
    key: target.plan.key,
    status: target.status,
    items: target.items,
    pages: target.pages,
    credits: target.credits,
    wanted: target.plan.maxItems,
    ...(target.cursor ? { cursor: target.cursor } : {}),
    ...(target.error ? { error: target.error } : {}),
  }));
  return {
    runId: state.runId,
    harvest: state.harvestName,
    status: status ?? state.stopped?.status ?? 'running',
    startedAt: state.startedAt,
    budget: state.budget.limit,
    creditsSpent: state.budget.spent,
    creditsReserved: state.budget.reserved,
    itemsLanded: targets.reduce((sum, target) => sum + target.items, 0),
    pagesLanded: targets.reduce((sum, target) => sum + target.pages, 0),
    targetsDone: state.targets.filter((target) => target.status !== 'pending').length,
    targets,
    enrichment: { ...state.enrichment, pending: state.enrichQueue.length },
    ...(state.stopped ? { reason: state.stopped.reason } : {}),
  };
}
