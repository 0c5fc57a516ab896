/**
 * A run's state, as the workflow keeps it and a retry resumes it (checkpoint.ts): its budget, each
 * target's plan, status and checkpoint (its listing position), the enrichment tally. Also its
 * projection into the progress everyone reads (progress.ts), where the budget's spent credits
 * become the run's. Pure: the workflow sandbox imports it.
 */
import type { RunForecast } from './run-forecast.js';
import type { PriceTable } from '../api-catalog/endpoints.js';
import { quarantinedText, type AnswersQuarantined, type HarvestProgress, type HarvestStatus, type TargetProgress } from './progress.js';
import type { TargetPlan } from './targets.js';
import type { TrackingForecast } from './tracking.js';
import { ENRICHMENT_FAILED } from './failures.js';

/**
 * A run's credit budget, as plain arithmetic the workflow can replay: before every billed call the
 * call's worst case is reserved, and once it returns the reservation is settled with the credits
 * actually charged. Spent plus reserved never exceeds the cap, so a run can never overspend.
 */
export interface BudgetState {
  limit: number;
  spent: number;
  reserved: number;
}

export interface Reservation {
  credits: number;
}

export function newBudget(limit: number): BudgetState {
  return { limit, spent: 0, reserved: 0 };
}

/**
 * A retry's budget: what the run spent stays spent, what a job still in flight holds stays
 * reserved for it, and `extra` credits are free for this attempt.
 */
export function retryBudget(spent: number, reserved: number, extra: number): BudgetState {
  return { limit: spent + reserved + extra, spent, reserved };
}

export function availableCredits(budget: BudgetState): number {
  return Math.max(0, budget.limit - budget.spent - budget.reserved);
}

export function reserve(budget: BudgetState, credits: number): Reservation {
  if (credits > availableCredits(budget)) {
    throw new Error(`cannot reserve ${credits} credits: only ${availableCredits(budget)} of ${budget.limit} are free`);
  }
  budget.reserved += credits;
  return { credits };
}

/** Settles a reservation with what the call was charged (0 when it failed: failed calls are free). */
export function settle(budget: BudgetState, reservation: Reservation, charged: number): void {
  budget.reserved -= reservation.credits;
  budget.spent += charged;
}

/**
 * Takes back `credits` counted as spent that were not: a work counted at its whole grant when its
 * journal could not be read, corrected once a retry reads what it spent (workflows/bracket.ts).
 */
export function uncount(budget: BudgetState, credits: number): void {
  budget.spent -= credits;
}

/** What the run has spent so far, lost calls' worst cases included. */
export function creditsSpent(state: HarvestState): number {
  return state.budget.spent;
}

/**
 * How much of the budget a piece of work is granted: its worst case, or all that is free when
 * less is. The grant is held against the budget until the work returns and settles it with what
 * it spent, so work in flight at once can never together spend beyond the budget.
 */
export function grant(free: number, worst: number): number {
  return Math.max(0, Math.min(free, worst));
}

/** Where a target's listing resumes: the checkpoint the workflow keeps and its activity heartbeats. */
export interface ListingPosition {
  /** Number of the next page to land (1-based, per target and run). */
  page: number;
  cursor?: string;
  /** Distinct items the run has landed for the target. */
  items: number;
  /** Items listed in the current pass from the top of the list (search ranks count from here). */
  offset: number;
  /** The next page's size on an incremental run, grown from the first page's estimate. */
  nextLimit?: number;
  /** Times the listing started again from the top after its cursor expired or was refused. */
  relists: number;
}

/** `empty`: the listing ended having found no item at all (a warning, not a failure). */
export type TargetStatus = 'pending' | 'done' | 'empty' | 'failed' | 'budget_exhausted' | 'paused';

export interface TargetState {
  plan: TargetPlan;
  status: TargetStatus;
  /** The checkpoint: where the listing resumes. */
  position: ListingPosition;
  pages: number;
  items: number;
  credits: number;
  /** Items the warehouse has from an earlier complete listing: an incremental run stops at the first. */
  knownIds: string[];
  /** A job in flight for this target, and the credits reserved for it (carried across continue-as-new). */
  jobId?: string;
  jobReserved?: number;
  /** The budget left too little for a job, so the target is paged instead. */
  paged?: boolean;
  /** A job's landed results pages whose items still need enriching. */
  unenrichedPages?: { from: number; to: number };
  /** The listing is complete (its items may still lack enrichment). */
  listed?: boolean;
  /** Enrichment calls of its items that failed for good: while any stands, the target is not done. */
  failedCalls?: number;
  error?: { type: string; message: string; requestId?: string };
}

export interface HarvestState {
  runId: string;
  harvestName: string;
  startedAt: string;
  budget: BudgetState;
  prices: PriceTable;
  targets: TargetState[];
  enrichment: { calls: number; skipped: number; failed: number; unenriched: number };
  callsLost: number;
  /** Numbers the run's pieces of work: each activity's journal is its own. */
  nextWork: number;
  /** Set by `harvester retry` when the run has enrichment calls that failed for good: made again first. */
  redoFailedCalls?: boolean;
  /** Tracked accounts were observed in this run (`track.accounts`): a retry does not observe them again. */
  accountsObserved?: boolean;
  /** Tracked items due when the run started, and what their stats cost (`track.items`). */
  tracking?: TrackingForecast;
  /** Tracked items observed in this run; set once they were (a retry does not observe them again). */
  itemsObserved?: number;
  /** What the run was expected to spend when it started, by part (run-forecast.ts). */
  forecast?: RunForecast;
  stopped?: { status: HarvestStatus; reason: string };
  /**
   * Works whose journals could not be read when they failed (the catalog down past the outage
   * wait), so their whole grants were counted as spent: a retry reads each journal again and
   * corrects the run's credits (and its target's) to what the work really spent.
   */
  countedAtWorst?: { workId: string; counted: number; target?: string }[];
  /** Answers the run's final load set aside in quarantine/ (quarantinedAtLoad). */
  answersQuarantined?: AnswersQuarantined;
  /** Repairs of a damaged lake made for this run (its start, its loads), as HarvestProgress says them. */
  lakeRepairs?: string[];
  /** Set by `harvester retry` (resumableState): its final load puts the run's answers in quarantine/ back to be loaded. */
  reloadQuarantined?: boolean;
}

/**
 * Stops the run, saying why: the one place a run's stop is set. The first reason stands (what a
 * later work says happened because of it), unless `replacing` (a failed final load, which ends the
 * run failed whatever stopped it before, and says both); true when this call set the stop.
 */
export function stopRun(state: HarvestState, status: HarvestStatus, reason: string, replacing = false): boolean {
  if (state.stopped && !replacing) return false;
  state.stopped = { status, reason };
  return true;
}

/**
 * The final load failed: the run ends failed whatever stopped it before, saying both, unless
 * what stopped it is the same refusal (`repeated`: a worker of another API or store refused the
 * load as it refused the work), which is said once.
 */
export function failFinalLoad(state: HarvestState, message: string, repeated: boolean): void {
  if (repeated) return;
  stopRun(state, 'failed', `the final load failed: ${message}${state.stopped ? `; before it: ${state.stopped.reason}` : ''}`, true);
}

/**
 * A target whose listing is complete: done (or empty, when it found no item), unless enrichment
 * calls of its items failed for good (an answer refused, a 404): then it is failed, saying how
 * many, and `harvester retry` makes them again.
 */
export function finishListing(target: TargetState, empty = target.status === 'empty'): void {
  target.listed = true;
  const failed = target.failedCalls ?? 0;
  if (failed === 0) {
    target.status = empty ? 'empty' : 'done';
    return;
  }
  target.status = 'failed';
  target.error = { type: ENRICHMENT_FAILED, message: `${failed} enrichment call${failed === 1 ? '' : 's'} of its items failed for good (\`harvester show\` lists them; \`harvester retry\` makes them again)` };
}

/** What an empty target's warning says: the listing found nothing, and what to check. */
export function emptyWarning(plan: TargetPlan): string {
  const check = plan.kind === 'channel' ? `the handle (${plan.params.handle}) and the content kind` : plan.kind === 'search' ? `the query (${plan.params.query})` : `the URL (${plan.params.url})`;
  return `the API listed no items for it: check ${check}`;
}

/** A finished run's status, from its targets and what stopped it. */
export function finalStatus(state: HarvestState): HarvestStatus {
  if (state.stopped) return state.stopped.status;
  if (state.targets.some((target) => target.status === 'budget_exhausted')) return 'budget_exhausted';
  // Failed listings, that is: a listed target whose enrichment calls failed still landed its items.
  if (state.targets.length > 0 && state.targets.every((target) => target.status === 'failed' && !target.listed)) return 'failed';
  if (state.targets.some((target) => target.status === 'failed') || state.enrichment.failed > 0) return 'completed_with_errors';
  return 'completed';
}


/**
 * A run's status once its final load has answered: an answer it bought and landed that the load
 * could not load (set aside in quarantine/) is an answer lost to the lake, so a run that would have
 * `completed` ends `completed_with_errors`. The final load (activities/runs.ts) records this status,
 * and the workflow says it: both by this function.
 */
export function statusAfterLoad(status: HarvestStatus, answersQuarantined: number): HarvestStatus {
  return status === 'completed' && answersQuarantined > 0 ? 'completed_with_errors' : status;
}

/** The run's final load set aside `quarantined` of its answers (none: undefined), which its progress and summary say. */
export function quarantinedAtLoad(state: HarvestState, quarantined: AnswersQuarantined | undefined): void {
  state.answersQuarantined = quarantined && quarantined.count > 0 ? quarantined : undefined;
  state.reloadQuarantined = undefined;
}

/** The run's progress, as the CLI, the UI's status line and the run's summary show it. */
export function progressOf(state: HarvestState, status?: HarvestStatus): HarvestProgress {
  const targets: TargetProgress[] = state.targets.map((target) => ({
    key: target.plan.key,
    status: target.status,
    items: target.items,
    pages: target.pages,
    credits: target.credits,
    wanted: target.plan.maxItems,
    ...(target.position.cursor ? { cursor: target.position.cursor } : {}),
    ...(target.error ? { error: target.error } : {}),
    ...(target.status === 'empty' ? { warning: emptyWarning(target.plan) } : {}),
    ...(target.unenrichedPages ? { enrichmentPending: true } : {}),
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
    enrichment: { calls: state.enrichment.calls, skipped: state.enrichment.skipped, failed: state.enrichment.failed + state.enrichment.unenriched, pending: state.targets.filter((target) => target.unenrichedPages).length },
    callsLost: state.callsLost,
    ...(state.tracking ? { trackedItems: { due: Object.values(state.tracking.due).reduce((sum, count) => sum + count, 0), observed: state.itemsObserved ?? 0 } } : {}),
    ...(state.answersQuarantined ? { answersQuarantined: state.answersQuarantined } : {}),
    ...(state.lakeRepairs && state.lakeRepairs.length > 0 ? { lakeRepairs: state.lakeRepairs } : {}),
    ...(state.stopped ? { reason: state.stopped.reason } : state.answersQuarantined ? { reason: quarantinedText(state.answersQuarantined) } : {}),
  };
}
