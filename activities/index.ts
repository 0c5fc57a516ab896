import type { SocialApiClient } from '../src/api/client.js';
import type { Logger } from '../src/logger.js';
import { jobActivities } from './jobs.js';
import { landedEnrichmentActivities } from './landed-enrichment.js';
import { runActivities } from './runs.js';
import { targetWorkActivities } from './target-work.js';

export interface ActivityDeps {
  client: SocialApiClient;
  dataDir: string;
  pricesFile?: string;
  logger?: Logger;
  pauseSchedule?: (harvest: string, note: string) => Promise<void>;
}

/** Every activity the harvest workflow calls, bound to one client and one data directory. */
export function createActivities(deps: ActivityDeps) {
  return {
    ...targetWorkActivities(deps),
    ...landedEnrichmentActivities(deps),
    ...jobActivities(deps),
    ...runActivities(deps),
  };
}

export type HarvestActivities = ReturnType<typeof createActivities>;
