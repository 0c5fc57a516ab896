/**
 * A run carries the API it was started for (its base URL and a fingerprint of its key), and every
 * activity the workflow calls is given it. A worker whose client calls another API refuses the
 * task with a `WrongApi` failure that is not retried, naming both base URLs (never a key): two
 * workers set up for different APIs on one task queue would otherwise do each other's runs, with
 * the wrong key, into the wrong data directory. A run without an identity (started before runs
 * carried one) is not checked.
 */
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { sameApi, type ApiIdentity } from '../src/api/identity.js';

export const WRONG_API = 'WrongApi';

/** Said first in every WrongApi message: the workflow states it once as the run's reason. */
export const WRONG_API_REASON = 'a worker set up for another API took the run\'s task';

/** What every activity input may carry: the API the run was started for. */
export interface RunApi {
  api?: ApiIdentity;
}

function isIdentity(value: unknown): value is ApiIdentity {
  return typeof value === 'object' && value !== null && typeof (value as ApiIdentity).baseUrl === 'string' && typeof (value as ApiIdentity).keyFingerprint === 'string';
}

/** The identity an activity's arguments carry: any argument object with an `api` field. */
function expectedApi(args: unknown[]): ApiIdentity | undefined {
  for (const arg of args) {
    const api = typeof arg === 'object' && arg !== null ? (arg as RunApi).api : undefined;
    if (isIdentity(api)) return api;
  }
  return undefined;
}

function describeApi(api: ApiIdentity, other: ApiIdentity): string {
  // The base URL tells two APIs apart; when it is the same, the keys are what differ.
  return api.baseUrl === other.baseUrl ? `${api.baseUrl} with the key whose fingerprint is ${api.keyFingerprint}` : api.baseUrl;
}

export function wrongApiFailure(own: ApiIdentity, expected: ApiIdentity, where: { runId?: string; taskQueue?: string }): ApplicationFailure {
  const queue = where.taskQueue ? ` on task queue "${where.taskQueue}"` : '';
  return ApplicationFailure.create({
    type: WRONG_API,
    nonRetryable: true,
    message:
      `${WRONG_API_REASON}: the run${where.runId ? ` ${where.runId}` : ''} was started for the API at ${describeApi(expected, own)}, ` +
      `and a worker${queue} calls ${describeApi(own, expected)}, so it refused the task; ` +
      'workers for different APIs need different task queues (HARVESTER_TASK_QUEUE)',
  });
}

/**
 * The activities, each refusing a task whose run was started for another API than `own`. The
 * check comes before anything else the activity does: nothing is bought, landed or loaded.
 */
export function guardApi<T extends Record<string, (...args: never[]) => Promise<unknown>>>(activities: T, own: ApiIdentity): T {
  const guarded: Record<string, (...args: never[]) => Promise<unknown>> = {};
  for (const [name, activity] of Object.entries(activities)) {
    guarded[name] = async (...args: never[]) => {
      const expected = expectedApi(args);
      if (expected && !sameApi(expected, own)) {
        const info = Context.current().info;
        throw wrongApiFailure(own, expected, { runId: info.workflowExecution?.workflowId, taskQueue: info.taskQueue });
      }
      return activity(...args);
    };
  }
  return guarded as T;
}
