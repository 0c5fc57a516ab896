import { apiIdentity, type ApiIdentity } from '../api/identity.js';
import { apiSettingsFromEnv } from '../config/environment.js';
import { HARVEST_TASK_QUEUE } from '../../workflows/definitions.js';

/**
 * What starting a run takes from the environment: the task queue and the API the run is for. Kept
 * apart from context.ts, which builds API clients and loggers, so that `harvester run
 * --no-local-worker`, which only starts a run and watches it, loads neither.
 */

/** The task queue workers poll and runs start on: HARVESTER_TASK_QUEUE, or `harvester`. */
export function taskQueueFromEnv(): string {
  return process.env.HARVESTER_TASK_QUEUE || HARVEST_TASK_QUEUE;
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
