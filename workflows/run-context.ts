/**
 * What every step of a harvest's run works with (workflows/steps.ts): the run's state and limits,
 * the activities it calls, and how it reads their failures. Deterministic orchestration only.
 */
import { ActivityFailure, ApplicationFailure, log, proxyActivities, setCurrentDetails } from '@temporalio/workflow';
import type { HarvestActivities } from '../activities/index.js';
import type { WorkProgress } from '../activities/target-work.js';
import type { RunIdentity } from '../activities/run-guard.js';
import { ACTIVITY_RETRY_PACE } from '../src/harvest/failures.js';
import type { Harvest } from '../src/harvest/harvest-types.js';
import { statusLine } from '../src/harvest/progress.js';
import { progressOf, type HarvestState, type TargetState } from '../src/harvest/run-state.js';
import type { TargetPlan } from '../src/harvest/targets.js';

// Attempts without a count: each activity bounds its own (activities/outages.ts). An outage of
// the store's services (the catalog, the object store) is waited out, inside an attempt and across
// attempts, up to the worker's HARVESTER_OUTAGE_WAIT_SECONDS (10 minutes by default); any other
// retryable failure is tried until five attempts in a row have failed without progress (a long work
// that lands pages before each failure goes on; this policy's maximumAttempts of five counted them all). Inside
// each attempt the client retries a call for up to 20 s, so an API that cannot be reached still ends
// the run (RUN_STOPPING_ERRORS) after about two minutes. Replays as before: Temporal does not check
// an activity's options against its history.
const RETRY = { initialInterval: ACTIVITY_RETRY_PACE.firstMs, backoffCoefficient: ACTIVITY_RETRY_PACE.growth, maximumInterval: ACTIVITY_RETRY_PACE.capMs, maximumAttempts: Number.POSITIVE_INFINITY } as const;

// A target's whole listing, or a job's enrichment, in one activity that heartbeats after each
// page: a killed worker's work moves to another within the heartbeat timeout, resuming there.
export const { harvestTarget, enrichLanded, landJobResults, redoFailedCalls, observeAccounts, observeItems } = proxyActivities<HarvestActivities>({
  startToCloseTimeout: '24 hours',
  heartbeatTimeout: '10 seconds',
  retry: RETRY,
});
export const { prepareRun, pauseSchedule, startJob, checkJob, workSpent } = proxyActivities<HarvestActivities>({
  startToCloseTimeout: '1 minute',
  retry: RETRY,
});
export const { finishRun } = proxyActivities<HarvestActivities>({
  startToCloseTimeout: '2 hours',
  heartbeatTimeout: '30 seconds',
  retry: RETRY,
});

export interface RunContext {
  state: HarvestState;
  harvest: Harvest;
  pageSize: number;
  targets: number;
  calls: number;
  completedJobs: Set<string>;
  jobsLanding: number;
  /** The API and store the run carries, as far as it carries them: given to every activity. */
  identity: RunIdentity;
}

/** The run's part of every activity's input, written here once: its id, its harvest, and the API and store it carries. */
export function runInput(run: RunContext): { runId: string; harvest: string } & RunIdentity {
  return { runId: run.state.runId, harvest: run.state.harvestName, ...run.identity };
}

export function nextWorkId(state: HarvestState, what: string): string {
  return `w${state.nextWork++}:${what}`;
}

export function targetRef(plan: TargetPlan) {
  return { key: plan.key, platform: plan.platform, endpoint: plan.endpoint, params: plan.params };
}

export function failureType(error: unknown): string {
  const cause = error instanceof ActivityFailure ? error.cause : error;
  return cause instanceof ApplicationFailure ? (cause.type ?? 'ApplicationFailure') : cause instanceof Error ? cause.name : 'Error';
}

export function messageOf(error: unknown): string {
  const cause = error instanceof ActivityFailure && error.cause ? error.cause : error;
  return cause instanceof Error ? cause.message : String(cause);
}

/** The durable progress a target's work reached before it failed for good, when its failure carries it (activities/outages.ts). */
export function progressOfFailedWork(error: unknown): WorkProgress | undefined {
  const cause = error instanceof ActivityFailure ? error.cause : undefined;
  if (!(cause instanceof ApplicationFailure)) return undefined;
  for (const detail of cause.details ?? []) {
    const progress = (detail as { workProgress?: WorkProgress } | null)?.workProgress;
    if (progress?.position) return progress;
  }
  return undefined;
}

export function requestIdOf(error: unknown): string | undefined {
  const cause = error instanceof ActivityFailure ? error.cause : undefined;
  if (!(cause instanceof ApplicationFailure)) return undefined;
  const details = cause.details?.[0] as { requestId?: string | null } | undefined;
  return details?.requestId ?? undefined;
}

/**
 * The run's status line as the workflow's current details (no command, so histories replay as
 * before): what the Temporal UI shows for the run, kept up to date while it runs.
 */
export function showStatus(state: HarvestState): void {
  setCurrentDetails(statusLine(progressOf(state)));
}

export function logTargetFinished(state: HarvestState, target: TargetState): void {
  log.info('target finished', {
    run: state.runId,
    target: target.plan.key,
    status: target.status,
    items: target.items,
    pages: target.pages,
    credits: target.credits,
    ...(target.error ? { error: `${target.error.type}: ${target.error.message}` } : {}),
  });
}
