import { WorkflowNotFoundError, type Client, type WorkflowExecutionDescription, type WorkflowExecutionInfo } from '@temporalio/client';
import type { TemporalSettings } from '../temporal/settings.js';
import type { RunMemo } from '../harvest/progress.js';
import { HARVEST_WORKFLOW_TYPE } from '../../workflows/definitions.js';

/**
 * A run is one identity: its workflow id. Underneath, Temporal keeps executions of that id: the
 * run's first attempt, each `harvester retry` (a new execution of the same workflow id), and the
 * executions each of them continued as new. A run's status is its latest attempt's.
 */

/** One attempt at a run: the first run, or a retry, with the executions it continued as new. */
export interface RunAttempt {
  attempt: number;
  status: string;
  startedAt: string;
  closedAt?: string;
  /** Temporal's run ids of the attempt's executions, oldest first (more than one after continue-as-new). */
  temporalRunIds: string[];
  /** Credits spent by the run up to the end of this attempt, and its budget then (a finished attempt's memo). */
  credits?: number;
  budget?: number;
}

/** A run as `harvester runs` lists it: its latest attempt, from the execution's search attributes and memo. */
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
  /** How many times the run was tried: 1, and one more for each `harvester retry`. */
  attempts: number;
}

/** An execution's status as the harvester says it: the run's own outcome for a completed one. */
export function executionStatus(execution: WorkflowExecutionInfo): string {
  const attributes = execution.searchAttributes as Record<string, unknown[] | undefined>;
  if (execution.status.name === 'RUNNING') return 'running';
  if (execution.status.name === 'COMPLETED') return String(attributes.HarvestStatus?.[0] ?? 'completed');
  return execution.status.name.toLowerCase();
}

function memoOf(execution: WorkflowExecutionInfo): Partial<RunMemo> {
  return (execution.memo ?? {}) as Partial<RunMemo>;
}

function listing(latest: WorkflowExecutionInfo, attempts: number): RunListing {
  const attributes = latest.searchAttributes as Record<string, unknown[] | undefined>;
  const memo = memoOf(latest);
  return {
    workflowId: latest.workflowId,
    harvest: String(attributes.HarvestName?.[0] ?? ''),
    status: executionStatus(latest),
    ...(memo.items !== undefined ? { items: memo.items, credits: memo.credits, budget: memo.budget } : {}),
    // A run that continued as new, or was retried, is listed as its latest execution, which started later than the run.
    startedAt: memo.startedAt ?? latest.startTime.toISOString(),
    ...(latest.closeTime ? { closedAt: latest.closeTime.toISOString() } : {}),
    attempts,
  };
}

function quoted(value: string): string {
  return `'${value.replaceAll('\\', '\\\\').replaceAll("'", "\\'")}'`;
}

/** Every execution of a run (one workflow id), oldest first. */
async function executionsOf(client: Client, workflowId: string): Promise<WorkflowExecutionInfo[]> {
  const executions: WorkflowExecutionInfo[] = [];
  for await (const execution of client.workflow.list({ query: `WorkflowId = ${quoted(workflowId)}` })) executions.push(execution);
  return executions.sort((a, b) => a.startTime.getTime() - b.startTime.getTime() || (a.closeTime?.getTime() ?? Infinity) - (b.closeTime?.getTime() ?? Infinity));
}

/**
 * A run's attempts, oldest first, from its executions: an execution that continued as new is
 * followed by its continuation, in the same attempt; any other start is a new attempt (a retry).
 * Empty when Temporal knows no such run.
 */
export async function runAttempts(client: Client, workflowId: string): Promise<RunAttempt[]> {
  return attemptsOf(await executionsOf(client, workflowId));
}

function attemptsOf(executions: WorkflowExecutionInfo[]): RunAttempt[] {
  const chains: WorkflowExecutionInfo[][] = [];
  let previous: WorkflowExecutionInfo | undefined;
  for (const execution of executions) {
    if (previous?.status.name === 'CONTINUED_AS_NEW') chains.at(-1)!.push(execution);
    else chains.push([execution]);
    previous = execution;
  }
  return chains.map((chain, index) => {
    const first = chain[0]!;
    const last = chain.at(-1)!;
    const memo = memoOf(last);
    return {
      attempt: index + 1,
      status: executionStatus(last),
      startedAt: first.startTime.toISOString(),
      ...(last.closeTime && last.status.name !== 'RUNNING' ? { closedAt: last.closeTime.toISOString() } : {}),
      temporalRunIds: chain.map((execution) => execution.runId),
      ...(memo.credits !== undefined ? { credits: memo.credits, budget: memo.budget } : {}),
    };
  });
}

/** The statuses `harvester runs --status` takes: a run's own outcomes, and Temporal's for runs that did not finish. */
export const LISTED_STATUSES = ['running', 'completed', 'completed_with_errors', 'budget_exhausted', 'skipped', 'paused', 'failed', 'terminated', 'cancelled', 'timed_out'] as const;

/**
 * Narrows the listing to executions that may be a run with `status`, on the server (the latest
 * attempt decides; see listRuns). A run's outcome is its HarvestStatus once it completed; a run
 * whose workflow failed (it could not start) has only Temporal's status.
 */
function statusClause(status: string): string {
  switch (status) {
    case 'running':
      return "ExecutionStatus = 'Running'";
    case 'failed':
      return "(HarvestStatus = 'failed' OR ExecutionStatus = 'Failed')";
    case 'terminated':
      return "ExecutionStatus = 'Terminated'";
    case 'cancelled':
      return "ExecutionStatus = 'Canceled'";
    case 'timed_out':
      return "ExecutionStatus = 'TimedOut'";
    default:
      return `(ExecutionStatus = 'Completed' AND HarvestStatus = ${quoted(status)})`;
  }
}

/**
 * Recent runs, newest first, one per workflow id: each as its latest attempt (a retried run has
 * its retry's status, not the first attempt's), with how many attempts it had. A run that
 * continued-as-new appears once. Filters use the HarvestName and HarvestStatus search attributes,
 * and the status filter is checked against the run's latest attempt.
 */
export async function listRuns(
  client: Client,
  filter: { name?: string; status?: string; limit?: number; taskQueue?: string; taskQueuePrefix?: string },
): Promise<RunListing[]> {
  const clauses = [`WorkflowType = '${HARVEST_WORKFLOW_TYPE}'`, "ExecutionStatus != 'ContinuedAsNew'"];
  if (filter.name) clauses.push(`HarvestName = ${quoted(filter.name)}`);
  const queues = [...(filter.taskQueue ? [`TaskQueue = ${quoted(filter.taskQueue)}`] : []), ...(filter.taskQueuePrefix ? [`TaskQueue STARTS_WITH ${quoted(filter.taskQueuePrefix)}`] : [])];
  if (queues.length > 0) clauses.push(`(${queues.join(' OR ')})`);
  if (filter.status) clauses.push(statusClause(filter.status));
  const runs: RunListing[] = [];
  const seen = new Set<string>();
  for await (const execution of client.workflow.list({ query: clauses.join(' AND ') })) {
    if (seen.has(execution.workflowId)) continue;
    seen.add(execution.workflowId);
    // The execution listed may be an earlier attempt: the run is what its latest attempt says.
    const executions = await executionsOf(client, execution.workflowId);
    const latest = executions.at(-1);
    if (!latest || (filter.status && executionStatus(latest) !== filter.status)) continue;
    runs.push(listing(latest, attemptsOf(executions).length));
    if (runs.length >= (filter.limit ?? 20)) break;
  }
  return runs;
}

/**
 * A run's latest execution, described; a run Temporal does not know is an error that says so and
 * where it looked (instead of gRPC's `5 NOT_FOUND`), for `show`, `retry` and `replay`.
 */
export async function describeRun(client: Client, settings: Pick<TemporalSettings, 'address' | 'namespace'>, runId: string): Promise<WorkflowExecutionDescription> {
  try {
    return await client.workflow.getHandle(runId).describe();
  } catch (error) {
    if (!(error instanceof WorkflowNotFoundError)) throw error;
    throw new Error(`no run ${runId} on Temporal at ${settings.address} (namespace ${settings.namespace}); \`harvester runs\` lists the runs there`, { cause: error });
  }
}
