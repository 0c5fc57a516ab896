/**
 * The `harvest` workflow: one run of one harvest. Each target's pages are listed (and their items
 * enriched) by one long activity, several targets at once; big pulls go through async jobs. Every
 * activity is granted credits out of the run's budget before it starts and settles the grant with
 * what it spent, so work in flight at once never spends beyond the budget. The workflow keeps each
 * target's position (cursor, page, items) as its checkpoint, and continues-as-new when Temporal
 * suggests it, once no activity is in flight. Deterministic orchestration only.
 *
 * This file starts and ends a run; between, the run walks the table of steps (steps.ts, over
 * src/harvest/spend-order.ts), one module per kind of step (jobs.ts, listing.ts, tracking.ts), each
 * piece of work in one bracket of grant and settle (bracket.ts), each stop said in stops.ts.
 */
import { ApplicationFailure, continueAsNew, ContinueAsNew, isCancellation, log, patched, setCurrentDetails, setHandler, upsertMemo, upsertSearchAttributes, workflowInfo } from '@temporalio/workflow';
import type { FinishedRun } from '../activities/runs.js';
import type { ApiIdentity } from '../src/api-catalog/api-identity.js';
import { PAGE_LIMITS } from '../src/api-catalog/endpoints.js';
import type { StoreIdentity } from '../src/store/store-identity.js';
import type { Harvest } from '../src/harvest/harvest-types.js';
import { IDENTITY_REFUSALS, RUN_STOPPING_ERRORS } from '../src/harvest/failures.js';
import { HARVEST_FAILED, HARVEST_NAME, HARVEST_STATUS, jobCompletedSignal, progressQuery } from './definitions.js';
import { statusLine, type FailedCall, type HarvestProgress, type RunMemo } from '../src/harvest/progress.js';
import { creditsSpent, failFinalLoad, finalStatus, newBudget, progressOf, quarantinedAtLoad, statusAfterLoad, stopRun, type HarvestState } from '../src/harvest/run-state.js';
import { askedEnrichments } from '../src/harvest/rules.js';
import { planTargets } from '../src/harvest/targets.js';
import { forecastMisses, spentByPart, type ForecastMiss, type RunForecast } from '../src/harvest/run-forecast.js';
import { correctCountedAtWorst } from './bracket.js';
import { failureType, finishRun, messageOf, prepareRun, showStatus, type RunContext } from './run-context.js';
import { historyFull, walkSteps } from './steps.js';
import { failedTargetsReason } from './stops.js';
import type { RunIdentity } from '../activities/run-guard.js';

export interface HarvestInput {
  harvest: Harvest;
  /** Overrides the harvest's budget for this run. */
  budgetCredits?: number;
  /** Carried across continue-as-new (and into a retry): the run's state so far. */
  resume?: HarvestState;
  /** Page size of listing calls; the API's synchronous maximum (PAGE_LIMITS), unless a test says otherwise. */
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
  /** What the run was expected to spend when it started, what it spent, and the parts that spent outside their range. */
  forecast?: RunForecast & { spent: number; misses: ForecastMiss[] };
}

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
  else if (!info.continuedFromExecutionRunId) log.info('run resumed from its checkpoint', { run: state.runId, harvest: state.harvestName, budget: state.budget.limit, spent: creditsSpent(state) });
  const completedJobs = new Set<string>();
  setHandler(jobCompletedSignal, ({ jobId }) => void completedJobs.add(jobId));
  setHandler(progressQuery, () => progressOf(state));
  showStatus(state);
  const run: RunContext = {
    state,
    harvest: input.harvest,
    pageSize: input.pageSize ?? PAGE_LIMITS.maxSynchronous,
    targets: input.concurrency?.targets ?? input.harvest.concurrency.targets,
    calls: input.concurrency?.calls ?? input.harvest.concurrency.calls,
    completedJobs,
    jobsLanding: 0,
    identity: identityOf(input),
  };
  if (state.countedAtWorst?.length) await correctCountedAtWorst(run);
  // The steps of src/harvest/spend-order.ts, in its order: what `harvester plan` forecast by.
  if ((await walkSteps(run, historyFull(input.historyLimit))) === 'continue') await continueAsNew<typeof harvestWorkflow>({ ...input, resume: state });
  return finish(input, state);
}

/** The run's end: its landings loaded, its status said everywhere it is read, and its summary. */
async function finish(input: HarvestInput, state: HarvestState): Promise<HarvestSummary> {
  const { status, loaded } = await loadRun(input, state);
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
    ...(state.forecast ? { forecast: { ...state.forecast, spent: creditsSpent(state), misses: forecastMisses(state.forecast, spentByPart(state, creditsSpent(state))) } } : {}),
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

/** The run's final load, and the status it ends with. */
async function loadRun(input: HarvestInput, state: HarvestState): Promise<{ status: ReturnType<typeof finalStatus>; loaded: FinishedRun }> {
  const status = finalStatus(state);
  const finishInput = {
    runId: state.runId,
    harvest: state.harvestName,
    startedAt: state.startedAt,
    budgetCredits: state.budget.limit,
    creditsSpent: creditsSpent(state),
    itemsLanded: progressOf(state).itemsLanded,
    ...(state.stopped ? { error: state.stopped.reason } : {}),
    enrichments: askedEnrichments(input.harvest),
    ...(state.reloadQuarantined ? { reloadQuarantined: true } : {}),
    ...(input.harvest.schema_contract ? { schemaContract: input.harvest.schema_contract } : {}),
    ...identityOf(input),
  };
  try {
    const loaded = await finishRun({ ...finishInput, status });
    // What the loads repaired of a damaged lake is said with the run, after what its start repaired.
    if (loaded.lakeRepairs) state.lakeRepairs = [...(state.lakeRepairs ?? []), ...loaded.lakeRepairs];
    // Answers the load set aside in quarantine/ are lost to the lake: the status says so, as the load recorded it.
    quarantinedAtLoad(state, loaded.answersQuarantined);
    return { status: statusAfterLoad(status, loaded.answersQuarantined?.count ?? 0), loaded };
  } catch (error) {
    // What the run bought is landed, but not loaded (a data directory that cannot be written, say):
    // the run ends failed, with its checkpoint, so `harvester retry` or `harvester load` can finish it.
    // A worker set up for another API or store that already stopped the run and refused its load too: said once.
    const refusal = IDENTITY_REFUSALS.includes(failureType(error)) ? RUN_STOPPING_ERRORS[failureType(error)] : undefined;
    failFinalLoad(state, messageOf(error), refusal !== undefined && state.stopped?.reason.startsWith(refusal) === true);
    return { status: 'failed', loaded: { landingsLoaded: 0, rowsLoaded: 0, quarantined: [] } };
  }
}

function identityOf(input: HarvestInput): RunIdentity {
  return { ...(input.api ? { api: input.api } : {}), ...(input.store ? { store: input.store } : {}) };
}

/** A new run's state: its targets planned, prepared (prices, known items, tracking), nothing bought. */
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
      harvestConfig: input.harvest,
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
    ...(prepared.forecast ? { forecast: prepared.forecast } : {}),
    ...(prepared.lakeRepairs ? { lakeRepairs: prepared.lakeRepairs } : {}),
  };
  if (prepared.blocked) stopRun(state, 'paused', prepared.blocked);
  else if (prepared.skipped) stopRun(state, 'skipped', prepared.skipped);
  return state;
}

