import { apiIdentity, type ApiIdentity } from '../api/identity.js';
import { apiSettingsFromEnv, dataDirFromEnv } from '../config/environment.js';
import { dataDirectoryIdentity, type StoreIdentity } from '../store/store-identity.js';
import { HARVEST_TASK_QUEUE } from '../../workflows/definitions.js';

/**
 * What starting a run takes from the environment: the task queue, and the API and store the run is
 * for. Kept apart from context.ts, which builds API clients and loggers, so that `harvester run
 * --no-local-worker`, which only starts a run and watches it, loads neither.
 */

/** The task queue workers poll and runs start on: HARVESTER_TASK_QUEUE, or `harvester`. */
export function taskQueueFromEnv(env: NodeJS.ProcessEnv = process.env): string {
  return env.HARVESTER_TASK_QUEUE || HARVEST_TASK_QUEUE;
}

/**
 * The task queue of a command's own worker (`harvester run` or `retry` without --no-local-worker):
 * one of its own, named after its run, so that its worker serves that run only (no run of another
 * data directory lands here, and stopping it cuts no other run's work), unless HARVESTER_TASK_QUEUE
 * names a queue to share with the workers polling it.
 */
export function localWorkerTaskQueue(workflowId: string, env: NodeJS.ProcessEnv = process.env): string {
  return env.HARVESTER_TASK_QUEUE || `${HARVEST_TASK_QUEUE}-${workflowId}`;
}

/** Whether the environment names the run's store itself, rather than leaving ./data to be found. */
function namesStore(env: NodeJS.ProcessEnv): boolean {
  return Boolean(env.HARVESTER_DATA_DIR || env.HARVESTER_STORAGE);
}

/**
 * The store a run started from this environment, and handed to workers elsewhere, is for: a worker
 * whose store is another refuses its tasks. The data directory HARVESTER_DATA_DIR names (its id
 * made when it has none), or the shared store of HARVESTER_STORAGE and HARVESTER_CATALOG (loaded
 * only then). With neither set, ./data when it has an id already; otherwise none (a run started on a
 * machine without the workers' data directory), and the run is not checked: `store` is undefined.
 */
export async function runStoreFromEnv(env: NodeJS.ProcessEnv = process.env): Promise<StoreIdentity | undefined> {
  const storage = env.HARVESTER_STORAGE;
  if (storage?.startsWith('s3://')) {
    const { sharedStoreIdentity } = await import('../store/store-from-environment.js');
    return sharedStoreIdentity(storage, env);
  }
  const dataDir = dataDirFromEnv(env);
  return namesStore(env) ? dataDirectoryIdentity(dataDir) : dataDirectoryIdentity(dataDir, { create: false });
}

/**
 * The API a run started from this environment is for, as the run carries it (base URL and key
 * fingerprint): workers set up for another API refuse its tasks. Without SOCIAL_API_BASE_URL and
 * SOCIAL_API_KEY (a run left to workers elsewhere), the run carries none and no worker checks.
 */
export function runApiFromEnv(env: NodeJS.ProcessEnv = process.env): { api?: ApiIdentity } {
  if (!env.SOCIAL_API_BASE_URL && !env.SOCIAL_API_KEY) return {};
  return { api: apiIdentity(apiSettingsFromEnv(env)) };
}
