/**
 * The run's own forecast, made as it starts (wrapped around prepareRun): the cost plan of its
 * harvest from what the lake observed of the same targets, as `harvester plan` makes it, at the
 * API's time. A forecast that cannot be made (the lake unreadable, say) is logged and left out:
 * it never stops a run.
 */
import type { PriceTable } from '../src/api-catalog/endpoints.js';
import { planHarvestCost } from '../src/harvest/cost-plan.js';
import type { Harvest } from '../src/harvest/harvest-types.js';
import { runForecastOf, type RunForecast } from '../src/harvest/run-forecast.js';
import { planTargets, type TargetPlan } from '../src/harvest/targets.js';
import type { TrackingForecast } from '../src/harvest/tracking.js';
import { existsSync } from 'node:fs';
import type { PlanHistory } from '../src/harvest/plan-history.js';
import { lakeCatalogFile } from '../src/store/layout.js';
import { coversListing } from '../src/store/listing-coverage.js';
import { LocalStore, type Store } from '../src/store/store.js';
import type { SocialApiClient } from '../src/api/client.js';
import type { Logger } from '../src/logger.js';

/** What the forecast needs of the run activities' dependencies (runs.ts's RunActivityDeps has them). */
export interface ForecastDeps {
  store: Store;
  dataDir: string;
  logger?: Logger;
}

export interface ForecastInput {
  /** The harvest's config: its targets, enrichment and tracking. */
  harvestConfig?: Harvest;
  budgetCredits: number;
}

/** What prepareRun gives back that the forecast reads: prices and the tracked items due. */
interface Prepared {
  prices: PriceTable;
  tracking?: TrackingForecast;
  blocked?: string;
  skipped?: string;
}

/** The API's time (ms), asked of it at most once however often it is called: see apiTimeOnce. */
export type ApiTime = () => Promise<number>;

/**
 * The API's time for one run's start, asked at most once: the run's knowledge (prepareRun) and its
 * forecast read the lake at the same instant. They asked it once each, a round trip to the API
 * each (a quarter of a second at 250 ms a call), one after the other.
 */
export function apiTimeOnce(client: Pick<SocialApiClient, 'serverTime'>): ApiTime {
  let asked: Promise<number> | undefined;
  return () => (asked ??= client.serverTime().then((time) => time.getTime()));
}

/**
 * The lake's history of the targets, at the run's API time (the one prepareRun read the lake at,
 * tracking's forecast included). None without a lake: then neither DuckDB is loaded (a third of a
 * second, which the data directory's first run need not pay) nor the API's time asked.
 */
async function lakeHistory(deps: ForecastDeps, targets: TargetPlan[], incremental: ReadonlySet<string>, apiTime: ApiTime): Promise<PlanHistory | undefined> {
  if (deps.store instanceof LocalStore && !existsSync(lakeCatalogFile(deps.dataDir))) return undefined;
  const [{ lakeExists }, { readPlanHistory }] = await Promise.all([import('../src/warehouse/lake.js'), import('../src/warehouse/plan-history.js')]);
  if (!(await lakeExists(deps.dataDir))) return undefined;
  return readPlanHistory(deps.dataDir, targets, incremental, await apiTime());
}

/** Adds the run's forecast to what prepareRun gave back, unless the run is blocked or its config was not given. */
export async function withForecast<P extends Prepared>(deps: ForecastDeps, input: ForecastInput, prepared: P, apiTime: ApiTime): Promise<P & { forecast?: RunForecast }> {
  const harvest = input.harvestConfig;
  if (!harvest || prepared.blocked || prepared.skipped) return prepared;
  try {
    const targets = planTargets(harvest);
    const coverage = await Promise.all(targets.map((target) => deps.store.readCoverage(target.key)));
    const incremental = new Set(targets.filter((target, index) => coversListing(coverage[index], target.maxItems)).map((target) => target.key));
    const history = await lakeHistory(deps, targets, incremental, apiTime);
    const plan = planHarvestCost(harvest, prepared.prices, { budgetCredits: input.budgetCredits, ...(history ? { history } : {}), ...(prepared.tracking ? { tracking: prepared.tracking } : {}) });
    return { ...prepared, forecast: runForecastOf(plan) };
  } catch (error) {
    deps.logger?.warn({ err: (error as Error).message }, "the run's forecast could not be made; the run goes on without it");
    return prepared;
  }
}
