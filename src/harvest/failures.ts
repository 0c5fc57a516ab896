/**
 * The failure vocabulary a run stops by: the names of the failures activities raise and the
 * workflow reads, and the one line each run-stopping failure is said with. Written once here, so
 * an activity that raises a failure and the workflow that reads it cannot drift apart. Pure: the
 * workflow sandbox imports it.
 */

/**
 * Why a piece of work stopped buying before its end: the API refused the key or the balance, or a
 * budget across runs that covers the run is spent (`budget_exhausted`, the budget named in its message).
 */
export interface WorkStop {
  status: 'paused' | 'failed' | 'budget_exhausted';
  error: { type: string; message: string; requestId?: string };
}

/**
 * How long a failed activity waits before its next attempt: the first interval, multiplied by the
 * growth at each attempt, up to the cap. Temporal's retry policy paces by it (workflows/run-context.ts),
 * and so does the activities' own bound (activities/outages.ts), which counts the attempts again from
 * the last one that made progress.
 */
export const ACTIVITY_RETRY_PACE = { firstMs: 1_000, growth: 2, capMs: 30_000 } as const;

/** The API refused the key (401): src/api/errors.ts names its error so. */
export const AUTHENTICATION_ERROR = 'AuthenticationError';
/** The API cannot be reached: src/api/errors.ts names its error so. */
export const NETWORK_ERROR = 'NetworkError';
/** A 402: the account ran out of credits; the run pauses instead of failing. */
export const INSUFFICIENT_CREDITS = 'InsufficientCreditsError';
/** A budget across runs cannot take the next call: src/api/errors.ts names its error so. */
export const BUDGET_SPENT = 'BudgetSpentError';
/** The data directory cannot be written (a read-only or full disk): activities/failures.ts. */
export const DATA_DIR_NOT_WRITABLE = 'DataDirNotWritable';
/** A job that may have been started and not recorded: its worst case counts as spent (activities/jobs.ts). */
export const JOB_LOST = 'JobLost';
/** A job the API said failed. */
export const JOB_FAILED = 'JobFailed';
/** A target whose items' enrichment calls failed for good (run-state.ts `finishListing`). */
export const ENRICHMENT_FAILED = 'EnrichmentFailed';
/** A worker for another base URL took the task (activities/run-guard.ts). */
export const WRONG_API = 'WrongApi';
/** A worker for the same base URL, with another key, took the task. */
export const WRONG_API_KEY = 'WrongApiKey';
/** A worker whose store (data directory, or shared store) is another took the task. */
export const WRONG_STORE = 'WrongStore';

/** Said first in every message of its failure type: the workflow states it once as the run's reason. */
export const WRONG_API_REASON = "a worker set up for another API took the run's task";
export const WRONG_API_KEY_REASON = "the run's API key is not the one the worker uses";
export const WRONG_STORE_REASON = "a worker that keeps its data elsewhere took the run's task";

/**
 * Errors that no other target can get past end the run at once, with one line that says why:
 * a refused key (401), a data directory that cannot be written, an API that cannot be reached,
 * a worker set up for another API or store.
 */
export const RUN_STOPPING_ERRORS: Readonly<Record<string, string>> = {
  [AUTHENTICATION_ERROR]: 'the API refused the key',
  [DATA_DIR_NOT_WRITABLE]: 'the data directory cannot be written',
  [NETWORK_ERROR]: 'the API cannot be reached',
  [WRONG_API]: WRONG_API_REASON,
  [WRONG_API_KEY]: WRONG_API_KEY_REASON,
  [WRONG_STORE]: WRONG_STORE_REASON,
};

/** A worker's refusals of a run set up for another API or store (activities/run-guard.ts). */
export const IDENTITY_REFUSALS: readonly string[] = [WRONG_API, WRONG_API_KEY, WRONG_STORE];

/**
 * The one message of a run stopped with work left undone because its budget ran out, whatever
 * work it was (items left unenriched, tracked items or accounts left unobserved): `left` says what.
 */
export function budgetRanOut(left: string): string {
  return `${left}: the budget ran out`;
}

/** A run-stopping reason said once: a message that already says why is not prefixed with it again. */
export function saidOnce(why: string, message: string): string {
  return message.startsWith(why) ? message : `${why}: ${message}`;
}

/** Why a failure of type `type` stops the run, said once with its message; undefined when it stops only its own work. */
export function runStoppingReason(type: string, message: string): string | undefined {
  const why = RUN_STOPPING_ERRORS[type];
  return why === undefined ? undefined : saidOnce(why, message);
}
