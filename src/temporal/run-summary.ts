import { WorkflowFailedError, type WorkflowHandle } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { HARVEST_FAILED } from '../../workflows/definitions.js';
import type { HarvestSummary } from '../../workflows/harvest.js';

/**
 * The summary a harvest's failed workflow execution carries (workflows/harvest.ts: a harvest that
 * ends `failed` fails its execution with its summary as the failure's details), or undefined for
 * any other error (a run that could not start, a terminated one).
 */
export function summaryOfFailure(error: unknown): HarvestSummary | undefined {
  const cause = error instanceof WorkflowFailedError ? error.cause : undefined;
  if (!(cause instanceof ApplicationFailure) || cause.type !== HARVEST_FAILED) return undefined;
  return cause.details?.[0] as HarvestSummary | undefined;
}

/**
 * A finished run's summary, however it ended: its workflow's result, or, for a harvest that ended
 * `failed`, its failure's details. Any other failure is thrown as Temporal gave it.
 */
export async function harvestSummary(handle: WorkflowHandle): Promise<HarvestSummary> {
  try {
    return (await handle.result()) as HarvestSummary;
  } catch (error) {
    const summary = summaryOfFailure(error);
    if (summary) return summary;
    throw error;
  }
}
