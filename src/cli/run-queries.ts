import type { Client, WorkflowExecutionInfo } from '@temporalio/client';
import type { RunMemo } from '../../workflows/definitions.js';

/** A run as `harvester runs` lists it, from the execution's search attributes and memo. */
export interface RunListing {
  workflowId: string;
  harvest: string;
  status: string;
  items?: number;
  credits?: number;
  budget?: number;
  /** The run's start, kept in its memo; the execution's own start for runs recorded without it. */
  startedAt: string;
  closedAt?: string;
}

function listing(execution: WorkflowExecutionInfo): RunListing {
  const attributes = execution.searchAttributes as Record<string, unknown[] | undefined>;
  const memo = (execution.memo ?? {}) as Partial<RunMemo>;
  const status = execution.status.name === 'RUNNING' || execution.status.name === 'COMPLETED' ? String(attributes.HarvestStatus?.[0] ?? 'running') : execution.status.name.toLowerCase();
  return {
    workflowId: execution.workflowId,
    harvest: String(attributes.HarvestName?.[0] ?? ''),
    status,
    ...(memo.items !== undefined ? { items: memo.items, credits: memo.credits, budget: memo.budget } : {}),
    // A run that continued as new is listed as its latest execution, which started later than the run.
    startedAt: memo.startedAt ?? execution.startTime.toISOString(),
    ...(execution.closeTime ? { closedAt: execution.closeTime.toISOString() } : {}),
  };
}

/**
 * Recent runs, newest first. A run that continued-as-new appears once, as its latest execution.
 * Filters use the HarvestName and HarvestStatus search attributes.
 */
export async function listRuns(client: Client, filter: { name?: string; status?: string; limit?: number }): Promise<RunListing[]> {
  const clauses = ["WorkflowType = 'harvestWorkflow'", "ExecutionStatus != 'ContinuedAsNew'"];
  if (filter.name) clauses.push(`HarvestName = '${filter.name.replaceAll("'", "\\'")}'`);
  if (filter.status) clauses.push(`HarvestStatus = '${filter.status.replaceAll("'", "\\'")}'`);
  const runs: RunListing[] = [];
  for await (const execution of client.workflow.list({ query: clauses.join(' AND ') })) {
    runs.push(listing(execution));
    if (runs.length >= (filter.limit ?? 20)) break;
  }
  return runs;
}
