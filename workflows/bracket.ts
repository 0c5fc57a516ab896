/**
 * The one bracket every piece of the run's work goes through: granted its worst case out of what
 * is free, reserved, its activity given the grant and run under its own work id (its journal), and
 * settled with what it spent; when its activity fails for good, settled with what its journal says
 * it spent. Work in flight at once therefore never spends beyond the budget, and no credit is
 * counted twice or lost. The steps that call it never see the grant: it goes from the budget into
 * the activity's input here.
 */
import { log } from '@temporalio/workflow';
import type { WorkSpent } from '../activities/landed-enrichment.js';
import type { WorkFrameInput } from '../activities/work-frame.js';
import type { RunIdentity } from '../activities/run-guard.js';
import type { Harvest } from '../src/harvest/harvest-types.js';
import { availableCredits, grant, reserve, settle, uncount, type HarvestState, type Reservation, type TargetState } from '../src/harvest/run-state.js';
import { messageOf, nextWorkId, runInput, workSpent, type RunContext } from './run-context.js';

/** What a bracketed work came to: its result, or the failure it ended with (its spend settled either way). */
export type WorkOutcome<R> = { ok: true; result: R } | { ok: false; error: unknown };

/** What every granted work's activity is given, whatever its kind: the run, its own journal and grant, prices, enrichment and limits. */
export type WorkInput = WorkFrameInput & RunIdentity;

/**
 * Runs `activity` granted `worst` (or all that is free, when less is) under a new work id named for
 * `what`, given `input` (what is its own: a target, pages, accounts) with the run's work input and
 * the grant, and settles its grant with what it spent, counting that against `target` when given.
 */
export async function grantedWork<I extends object, R extends WorkSpent>(
  run: RunContext,
  what: string,
  worst: number,
  activity: (input: I & WorkInput) => Promise<R>,
  input: I,
  target?: TargetState,
): Promise<WorkOutcome<R>> {
  const { state } = run;
  const credits = grant(availableCredits(state.budget), worst);
  const reservation = reserve(state.budget, credits);
  const workId = nextWorkId(state, what);
  try {
    // The run's part last: no work's own part can stand in for its grant or its work id.
    const result = await activity({ ...input, ...workInput(run, workId, credits) });
    charge(state, reservation, result, target);
    return { ok: true, result };
  } catch (error) {
    charge(state, reservation, await spentByFailedWork(run, workId, reservation, target), target);
    return { ok: false, error };
  }
}

/** The run's part of a work's input: the grant, with the work's id and what every work of the run is given. */
function workInput(run: RunContext, workId: string, credits: number): WorkInput {
  return { ...runInput(run), workId, grant: credits, prices: run.state.prices, enrich: run.harvest.enrich, calls: run.calls, callDeadlineMs: callDeadlineMs(run.harvest), ...(run.harvest.budgets ? { budgets: run.harvest.budgets } : {}) };
}

/** Each billed call's overall deadline, from the harvest's `call_deadline_seconds`. */
function callDeadlineMs(harvest: Harvest): number | undefined {
  return harvest.call_deadline_seconds === undefined ? undefined : harvest.call_deadline_seconds * 1_000;
}

/**
 * A job's worst case, held out of what is free from its start until the work landing its results
 * is granted it (jobResultsWork): a job is charged when it completes, whoever waits for it. Kept in
 * the target (`jobReserved`) across continue-as-new and retries (src/harvest/checkpoint.ts).
 * Returns the credits held.
 */
export function holdForJob(run: RunContext, target: TargetState, worst: number): number {
  target.jobReserved = reserve(run.state.budget, grant(availableCredits(run.state.budget), worst)).credits;
  return target.jobReserved;
}

/**
 * Settles a job's hold when no results work will: its job failed or never started (spent
 * nothing), or its start was lost with a dying worker (`lost`: the job may exist and be charged, so
 * its whole worst case stays spent, as a lost call).
 */
export function settleJobHold(run: RunContext, target: TargetState, lost = false): void {
  const held = target.jobReserved ?? 0;
  settle(run.state.budget, { credits: held }, lost ? held : 0);
  if (lost) run.state.callsLost++;
  target.jobReserved = 0;
}

/**
 * The work that lands a job's results, granted the job's hold and settled with the job's charge
 * like any granted work (counted against `target`). The hold is given back and granted again in
 * the same step (no await between), so nothing else can take it meanwhile.
 */
export function jobResultsWork<I extends object, R extends WorkSpent>(run: RunContext, target: TargetState, activity: (input: I & WorkInput) => Promise<R>, input: I): Promise<WorkOutcome<R>> {
  const held = target.jobReserved ?? 0;
  settleJobHold(run, target);
  return grantedWork(run, `job-results:${target.plan.key}`, held, activity, input, target);
}

/** Settles a piece of work's grant with what it spent, and counts that against its target. */
function charge(state: HarvestState, reservation: Reservation, spent: WorkSpent, target: TargetState | undefined): void {
  settle(state.budget, reservation, spent.credits);
  if (target) target.credits += spent.credits;
  state.callsLost += spent.lostCalls;
}

/**
 * What a piece of work whose activity failed for good spent, from its journal; when even the
 * journal cannot be read (a data directory gone bad), all of its grant, which it cannot have
 * exceeded.
 */
async function spentByFailedWork(run: RunContext, workId: string, reservation: Reservation, target?: TargetState): Promise<WorkSpent> {
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
export async function correctCountedAtWorst(run: RunContext): Promise<void> {
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
    uncount(state.budget, overcounted);
    state.callsLost += spent.lostCalls;
    const target = state.targets.find((candidate) => candidate.plan.key === work.target);
    if (target) target.credits -= overcounted;
    log.info('a work counted at its whole grant is corrected from its journal', { run: state.runId, workId: work.workId, counted: work.counted, spent: spent.credits });
  }
  state.countedAtWorst = left.length > 0 ? left : undefined;
}
