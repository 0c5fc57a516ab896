import { SocialApiClient } from '../api/client.js';
import { apiSettingsFromEnv } from '../config/environment.js';
import { DEFAULT_PRICES_FILE, loadPriceTable } from '../config/prices.js';
import { createLogger, type Logger } from '../logger.js';

/** The pieces commands share, built from the environment. */
export function cliLogger(): Logger {
  return createLogger({ level: process.env.LOG_LEVEL ?? 'warn' });
}

export function clientFromEnv(logger: Logger): SocialApiClient {
  const settings = apiSettingsFromEnv();
  const prices = loadPriceTable(process.env.HARVESTER_PRICES ?? DEFAULT_PRICES_FILE);
  return new SocialApiClient({ ...settings, prices, logger });
}
