/**
 * Turning a finished run's final state into the state a retry resumes from: the targets that did
 * not finish (failed, out of budget, paused for credits) are pending again from their cursors, and
 * the budget gets room for this attempt. The run id stays the same, so every page already landed
 * is found on disk and not bought again.
 */
import type { HarvestState } from './harvest.js';

export const RETRYABLE_STATUSES = ['failed', 'completed_with_errors', 'budget_exhausted', 'paused'] as const;

export function resumableState(checkpoint: HarvestState, extraCredits: number): HarvestState {
  return {
    ...checkpoint,
    budget: { limit: checkpoint.budget.spent + extraCredits, spent: checkpoint.budget.spent, reserved: 0 },
    targets: checkpoint.targets.map((target) => (target.status === 'done' ? target : { ...target, status: 'pending', error: undefined })),
    stopped: undefined,
  };
}
