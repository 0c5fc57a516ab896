import type { SocialApiClient } from '../src/api/client.js';
import type { Logger } from '../src/logger.js';
import { LocalStore, type Store } from '../src/store/store.js';
import { guardRun } from './run-guard.js';
import { jobActivities } from './jobs.js';
import { landedEnrichmentActivities } from './landed-enrichment.js';
import { runActivities } from './runs.js';
import { targetWorkActivities } from './target-work.js';

export interface ActivityDeps {
  client: SocialApiClient;
  /** The worker's own directory: the whole store unless `store` is shared. */
  dataDir: string;
  /** Where landings, journals and the rest are kept (src/store/store.ts); the data directory by default. */
  store?: Store;
  pricesFile?: string;
  logger?: Logger;
  pauseSchedule?: (harvest: string, note: string) => Promise<void>;
  /** How often the landings of running runs are loaded (activities/runs.ts LOAD_EVERY_MS by default). */
  loadEveryMs?: number;
}

/**
 * Every activity the harvest workflow calls, bound to one client and one store; each refuses the
 * tasks of a run started for another API than its client's, or another store than its own
 * (activities/run-guard.ts).
 */
export function createActivities(deps: ActivityDeps) {
  const withStore = { ...deps, store: deps.store ?? new LocalStore(deps.dataDir) };
  return guardRun(
    {
      ...targetWorkActivities(withStore),
      ...landedEnrichmentActivities(withStore),
      ...jobActivities(withStore),
      ...runActivities(withStore),
    },
    // Asked at each task: a data directory emptied under a running worker (as the benchmarks do) is
    // a new store, whose id the next run started for it carries.
    { api: deps.client.identity, store: () => withStore.store.identity() },
  );
}

export type HarvestActivities = ReturnType<typeof createActivities>;
