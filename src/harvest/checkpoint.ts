/**
 * Turning a finished run's final state into the state a retry resumes from: the targets that did
 * not finish (failed, out of budget, paused for credits) are pending again from their positions,
 * and the budget gets room for this attempt. The run id stays the same, so every page already
 * landed is found on disk and not bought again.
 */
import { retryBudget, type HarvestState, type TargetState } from './run-state.js';

/**
 * A run's statuses when it ended short of what it was asked: `harvester retry` resumes these, and
 * the report counts them as failures (in this order).
 */
export const RETRYABLE_STATUSES = ['failed', 'completed_with_errors', 'paused', 'budget_exhausted'] as const;

function resumedTarget(target: TargetState): TargetState {
  if (target.status === 'done' || target.status === 'empty') return target;
  // Listed, with enrichment calls that failed: the retry makes those again (the run's first work).
  if (target.listed) return { ...target, status: 'done', error: undefined };
  // A job still in flight (the run stopped while it ran) is awaited again, its reservation kept; a
  // job that failed is forgotten, so the retry starts a new one.
  const jobFailed = target.jobId !== undefined && (target.status === 'failed' || target.status === 'paused');
  return {
    ...target,
    status: 'pending',
    error: undefined,
    ...(jobFailed ? { jobId: undefined, jobReserved: undefined } : {}),
  };
}

export function resumableState(checkpoint: HarvestState, extraCredits: number): HarvestState {
  const targets = checkpoint.targets.map(resumedTarget);
  const reserved = targets.reduce((sum, target) => sum + (target.jobId !== undefined ? (target.jobReserved ?? 0) : 0), 0);
  return {
    ...checkpoint,
    budget: retryBudget(checkpoint.budget.spent, reserved, extraCredits),
    targets,
    stopped: undefined,
    // Enrichment calls that failed for good are made again, besides the targets that did not finish.
    redoFailedCalls: checkpoint.enrichment.failed > 0,
    // Answers a load set aside (in quarantine/) are put back to be loaded by the retry's final load,
    // those of an earlier version's attempt too (which did not count them).
    answersQuarantined: undefined,
    reloadQuarantined: true,
  };
}
