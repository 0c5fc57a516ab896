import { SocialApiClient } from '../api/client.js';
import { apiIdentity, type ApiIdentity } from '../api/identity.js';
import type { RetryPolicy } from '../api/retry.js';
import { HARVEST_TASK_QUEUE } from '../../workflows/definitions.js';
import { apiSettingsFromEnv } from '../config/environment.js';
import { DEFAULT_PRICES_FILE, loadPriceTable } from '../config/prices.js';
import { createLogger, type Logger } from '../logger.js';

/** The pieces commands share, built from the environment. */
export function cliLogger(): Logger {
  return createLogger({ level: process.env.LOG_LEVEL ?? 'warn' });
}

/**
 * An API client from the environment. `callerOf` names who each call is for (a worker's run), so
 * the runs sharing the key's rate limit in this process take turns.
 */
export function clientFromEnv(logger: Logger, retry?: Partial<RetryPolicy>, callerOf?: () => string | undefined): SocialApiClient {
  const settings = apiSettingsFromEnv();
  const prices = loadPriceTable(process.env.HARVESTER_PRICES ?? DEFAULT_PRICES_FILE);
  return new SocialApiClient({ ...settings, prices, logger, ...(retry ? { retry } : {}), ...(callerOf ? { callerOf } : {}) });
}

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
