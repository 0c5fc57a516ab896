import type { SocialApiClient } from '../src/api/client.js';
import type { Logger } from '../src/logger.js';
import { guardApi } from './api-guard.js';
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
  /** How often the landings of running runs are loaded (activities/runs.ts LOAD_EVERY_MS by default). */
  loadEveryMs?: number;
}

/**
 * Every activity the harvest workflow calls, bound to one client and one data directory; each
 * refuses the tasks of a run started for another API than its client's (activities/api-guard.ts).
 */
export function createActivities(deps: ActivityDeps) {
  return guardApi(
    {
      ...targetWorkActivities(deps),
      ...landedEnrichmentActivities(deps),
      ...jobActivities(deps),
      ...runActivities(deps),
    },
    deps.client.identity,
  );
}

export type HarvestActivities = ReturnType<typeof createActivities>;
