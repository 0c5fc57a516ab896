import { SocialApiClient } from '../api/client.js';
import type { RetryPolicy } from '../api/retry.js';
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
