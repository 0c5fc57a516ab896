/**
 * A run carries the API it was started for (its base URL and a fingerprint of its key) and the
 * store (src/store/store-identity.ts), and every activity the workflow calls is given them. A worker
 * whose client calls another API, or whose store is another, refuses the task with a failure that
 * is not retried, naming both (never a key, never a password): two workers set up for different
 * APIs or data directories on one task queue would otherwise do each other's runs, with the wrong
 * key, into the wrong data directory. A run without an identity (started before runs carried one)
 * is not checked; nor is one without a store (started where no store could be named).
 */
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { sameApi, type ApiIdentity } from '../src/api/identity.js';
import { sameStore, type StoreIdentity } from '../src/store/store-identity.js';
import { WRONG_API, WRONG_API_KEY, WRONG_API_KEY_REASON, WRONG_API_REASON, WRONG_STORE, WRONG_STORE_REASON } from '../src/harvest/failures.js';
import { asActivityFailure } from './failures.js';

// The failure names and their reasons are the run's failure vocabulary (src/harvest/failures.ts),
// which the workflow reads them by.
export { WRONG_API, WRONG_API_KEY, WRONG_API_KEY_REASON, WRONG_API_REASON, WRONG_STORE, WRONG_STORE_REASON } from '../src/harvest/failures.js';

/** What every activity input may carry: the API and the store the run was started for. */
export interface RunIdentity {
  api?: ApiIdentity;
  store?: StoreIdentity;
}

/** What a worker is set up for: its client's API, and its store's identity (asked when a task carries a store). */
export interface WorkerIdentity {
  api: ApiIdentity;
  store: () => Promise<StoreIdentity>;
}

function isApi(value: unknown): value is ApiIdentity {
  return typeof value === 'object' && value !== null && typeof (value as ApiIdentity).baseUrl === 'string' && typeof (value as ApiIdentity).keyFingerprint === 'string';
}

function isStore(value: unknown): value is StoreIdentity {
  return typeof value === 'object' && value !== null && typeof (value as StoreIdentity).id === 'string' && typeof (value as StoreIdentity).location === 'string';
}

/** The identity an activity's arguments carry: any argument object with an `api` or `store` field. */
function expectedIdentity(args: unknown[]): RunIdentity {
  const expected: RunIdentity = {};
  for (const arg of args) {
    if (typeof arg !== 'object' || arg === null) continue;
    const { api, store } = arg as RunIdentity;
    if (!expected.api && isApi(api)) expected.api = api;
    if (!expected.store && isStore(store)) expected.store = store;
  }
  return expected;
}

interface Where {
  runId?: string;
  taskQueue?: string;
}

function theRun(where: Where): string {
  return `the run${where.runId ? ` ${where.runId}` : ''}`;
}

function aWorker(where: Where): string {
  return `a worker${where.taskQueue ? ` on task queue "${where.taskQueue}"` : ''}`;
}

/**
 * The failure of a task whose run was started for the API `expected`, taken by a worker calling
 * `own`. The same base URL with another key is a key that differs from the workers' (a mistyped
 * SOCIAL_API_KEY, most often), and is said so; another base URL is another API.
 */
export function wrongApiFailure(own: ApiIdentity, expected: ApiIdentity, where: Where): ApplicationFailure {
  if (own.baseUrl === expected.baseUrl) {
    return ApplicationFailure.create({
      type: WRONG_API_KEY,
      nonRetryable: true,
      message:
        `${WRONG_API_KEY_REASON}: ${theRun(where)} was started with a SOCIAL_API_KEY whose fingerprint is ${expected.keyFingerprint}, ` +
        `and ${aWorker(where)} calls ${own.baseUrl} with the key whose fingerprint is ${own.keyFingerprint}, so it refused the task; ` +
        'check the SOCIAL_API_KEY the run was started with (a fingerprint is the first 12 hex digits of the key\'s SHA-256)',
    });
  }
  return ApplicationFailure.create({
    type: WRONG_API,
    nonRetryable: true,
    message:
      `${WRONG_API_REASON}: ${theRun(where)} was started for the API at ${expected.baseUrl}, ` +
      `and ${aWorker(where)} calls ${own.baseUrl}, so it refused the task; ` +
      'workers for different APIs need different task queues (HARVESTER_TASK_QUEUE)',
  });
}

/** The failure of a task whose run was started for the store `expected`, taken by a worker of `own`. */
export function wrongStoreFailure(own: StoreIdentity, expected: StoreIdentity, where: Where): ApplicationFailure {
  // Locations tell two stores apart; when they read the same (two machines' directories at one
  // path), the ids are what differ, and the run was most likely started on another machine.
  const samePlace = own.location === expected.location;
  const id = (store: StoreIdentity) => (samePlace ? ` (store id ${store.id})` : '');
  return ApplicationFailure.create({
    type: WRONG_STORE,
    nonRetryable: true,
    message:
      `${WRONG_STORE_REASON}: ${theRun(where)} was started for ${expected.location}${id(expected)}, ` +
      `and ${aWorker(where)} keeps its data in ${own.location}${id(own)}, so it refused the task, before buying, landing or reading anything; ` +
      (samePlace ? 'two directories at one path, on two machines: start the run where the workers\' directory is, or without HARVESTER_DATA_DIR; ' : '') +
      'a run\'s data lands only where the run was started for: run its worker with that data directory (HARVESTER_DATA_DIR, or HARVESTER_STORAGE), ' +
      'and give workers of different data directories different task queues (HARVESTER_TASK_QUEUE)',
  });
}

/**
 * The activities, each refusing a task whose run was started for another API or another store
 * than the worker's. The check comes before anything else the activity does: nothing is bought,
 * landed, read or loaded.
 */
export function guardRun<T extends Record<string, (...args: never[]) => Promise<unknown>>>(activities: T, own: WorkerIdentity): T {
  const guarded: Record<string, (...args: never[]) => Promise<unknown>> = {};
  for (const [name, activity] of Object.entries(activities)) {
    guarded[name] = async (...args: never[]) => {
      const expected = expectedIdentity(args);
      if (expected.api && !sameApi(expected.api, own.api)) throw wrongApiFailure(own.api, expected.api, where());
      if (expected.store) {
        // A worker that cannot name its own store (its data directory cannot be written) fails as its activities would.
        const ownStore = await own.store().catch((error: unknown) => {
          throw asActivityFailure(error);
        });
        if (!sameStore(expected.store, ownStore)) throw wrongStoreFailure(ownStore, expected.store, where());
      }
      return activity(...args);
    };
  }
  return guarded as T;
}

function where(): Where {
  const info = Context.current().info;
  return { runId: info.workflowExecution?.workflowId, taskQueue: info.taskQueue };
}
