import type { SocialApiClient } from '../src/api/client.js';
import type { Logger } from '../src/logger.js';
import { LocalStore, type Store } from '../src/store/store.js';
import { DEFAULT_OUTAGE_WAIT_MS, storeRidingOutages } from '../src/store/outage.js';
import { boundedRetries, outageWait } from './outages.js';
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
  /** The longest an outage of the store's services is waited out (HARVESTER_OUTAGE_WAIT_SECONDS; 10 minutes by default). */
  outageWaitMs?: number;
}

/**
 * Every activity the harvest workflow calls, bound to one client and one store; each refuses the
 * tasks of a run started for another API than its client's, or another store than its own
 * (activities/run-guard.ts).
 */
export function createActivities(deps: ActivityDeps) {
  const outageWaitMs = deps.outageWaitMs ?? DEFAULT_OUTAGE_WAIT_MS;
  const wait = outageWait(outageWaitMs, deps.logger);
  const withStore = { ...deps, outageWait: wait, store: ridingOutages(deps.store ?? new LocalStore(deps.dataDir), wait) };
  const guarded = guardRun(
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
  return boundedRetries(guarded, outageWaitMs, deps.logger);
}

/** A shared store's services can go down and come back; a data directory's failures are the disk's, never an outage. */
function ridingOutages(store: Store, wait: ReturnType<typeof outageWait>): Store {
  return store instanceof LocalStore ? store : storeRidingOutages(store, wait);
}

export type HarvestActivities = ReturnType<typeof createActivities>;
