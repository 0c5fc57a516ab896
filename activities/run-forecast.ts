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
import { planTargets } from '../src/harvest/targets.js';
import type { TrackingForecast } from '../src/harvest/tracking.js';
import { coversListing } from '../src/store/listing-coverage.js';
import type { RunActivityDeps } from './runs.js';

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
}

/** Adds the run's forecast to what prepareRun gave back, unless the run is blocked or its config was not given. */
export async function withForecast<P extends Prepared>(deps: RunActivityDeps, input: ForecastInput, prepared: P): Promise<P & { forecast?: RunForecast }> {
  const harvest = input.harvestConfig;
  if (!harvest || prepared.blocked) return prepared;
  try {
    const targets = planTargets(harvest);
    const coverage = await Promise.all(targets.map((target) => deps.store.readCoverage(target.key)));
    const incremental = new Set(targets.filter((target, index) => coversListing(coverage[index], target.maxItems)).map((target) => target.key));
    const asOfMs = (await deps.client.serverTime()).getTime();
    const { readPlanHistory } = await import('../src/warehouse/plan-history.js');
    const history = await readPlanHistory(deps.dataDir, targets, incremental, asOfMs);
    const plan = planHarvestCost(harvest, prepared.prices, { budgetCredits: input.budgetCredits, history, ...(prepared.tracking ? { tracking: prepared.tracking } : {}) });
    return { ...prepared, forecast: runForecastOf(plan) };
  } catch (error) {
    deps.logger?.warn({ err: (error as Error).message }, "the run's forecast could not be made; the run goes on without it");
    return prepared;
  }
}
