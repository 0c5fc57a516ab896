/**
 * Why a target or a run stops, as the workflow records it: a work's failure, a 402, a refused key.
 * The run's stop itself is set in one place (src/harvest/run-state.ts `stopRun`), and the failure
 * names and reasons come from src/harvest/failures.ts, where the activities take them too.
 */
import { log } from '@temporalio/workflow';
import type { WorkStop } from '../src/harvest/failures.js';
import { BUDGET_SPENT, budgetRanOut, INSUFFICIENT_CREDITS, runStoppingReason, saidOnce } from '../src/harvest/failures.js';
import { emptyWarning, stopRun, type HarvestState, type TargetState } from '../src/harvest/run-state.js';
import { failureType, messageOf, pauseSchedule, requestIdOf } from './run-context.js';

/** A target's activity failed for good: its error is recorded, and errors no target can get past stop the run. */
export async function recordFailure(state: HarvestState, target: TargetState, error: unknown): Promise<void> {
  const type = failureType(error);
  await recordStop(state, target, type === INSUFFICIENT_CREDITS ? 'paused' : type === BUDGET_SPENT ? 'budget_exhausted' : 'failed', { type, message: messageOf(error), ...(requestIdOf(error) ? { requestId: requestIdOf(error) } : {}) });
}

export async function recordStop(state: HarvestState, target: TargetState, status: WorkStop['status'], error: NonNullable<TargetState['error']>): Promise<void> {
  target.error = error;
  target.status = status;
  if (status === 'paused') {
    await stopForCredits(state, error.message);
    return;
  }
  if (status === 'budget_exhausted') {
    stopRun(state, 'budget_exhausted', error.message);
    return;
  }
  log.warn('target failed', { target: target.plan.key, type: error.type, message: error.message });
  stopOnRunStoppingError(state, error.type, error.message);
}

/** A failure no other work can get past (another API's worker, a refused key) stops the run, saying why once. */
export function stopOnRunStoppingError(state: HarvestState, type: string, message: string): void {
  const reason = runStoppingReason(type, message);
  if (reason) stopRun(state, 'failed', reason);
}

/** A work that stopped buying: a 402 pauses the run (and its schedule), a spent budget across runs stops it (naming the budget), a refused key fails it. */
export async function recordWorkStop(state: HarvestState, stop: WorkStop, what: string): Promise<void> {
  if (stop.status === 'paused') await stopForCredits(state, stop.error.message);
  else if (stop.status === 'budget_exhausted') stopRun(state, 'budget_exhausted', stop.error.message);
  else stopRun(state, 'failed', runStoppingReason(stop.error.type, stop.error.message) ?? saidOnce(what, stop.error.message));
}

/** Work left undone because the budget ran out (`left` says what): the run stops `budget_exhausted`, with the one message for it. */
export function stopForBudget(state: HarvestState, left: string): void {
  stopRun(state, 'budget_exhausted', budgetRanOut(left));
}

/** A 402: stop buying, and pause the harvest's schedule, instead of retrying into the wall. */
export async function stopForCredits(state: HarvestState, reason: string): Promise<void> {
  if (stopRun(state, 'paused', `insufficient credits: ${reason}`)) await pauseSchedule({ harvest: state.harvestName, reason: `insufficient_credits (run ${state.runId})` });
}

export function warnEmpty(state: HarvestState, target: TargetState): void {
  log.warn('target returned no items', { run: state.runId, target: target.plan.key, warning: emptyWarning(target.plan) });
}

/** Why a run that nothing stopped has failed targets: how many, and the first one's error (for the `run ended` line). */
export function failedTargetsReason(state: HarvestState): string | undefined {
  const failed = state.targets.filter((target) => target.status === 'failed' && target.error);
  if (failed.length === 0) return undefined;
  const first = failed[0]!;
  return `${failed.length} of ${state.targets.length} targets failed; the first, ${first.plan.key}: ${first.error!.type}: ${first.error!.message}`;
}
