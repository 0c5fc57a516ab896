/**
 * Activities at the edges of a run: prepare (refuse while credits are low, read what earlier
 * runs saw, load today's prices) and finish (record the outcome, load the landings into the
 * warehouse). Also pausing a harvest's schedule, when the API says the credits ran out.
 */
import { Context } from '@temporalio/activity';
import type { SocialApiClient } from '../src/api/client.js';
import type { PriceTable } from '../src/api-catalog/endpoints.js';
import { loadPriceTable } from '../src/config/prices.js';
import { creditsLow } from '../src/store/credit-alerts.js';
import { runFailures } from '../src/store/call-journal.js';
import { writeLanding } from '../src/store/landing.js';
import { pathSegment } from '../src/store/layout.js';
import { coversListing, readCoverage } from '../src/store/listing-coverage.js';
import { WarmLoader } from '../src/warehouse/warm-loader.js';
import type { RunApi } from './api-guard.js';
import { asActivity } from './failures.js';
import type { Logger } from '../src/logger.js';
import type { FailedCall } from '../src/harvest/progress.js';
import type { TargetPlan } from '../src/harvest/targets.js';
import type { TrackingForecast } from '../src/harvest/tracking.js';

export interface TargetKnowledge {
  /** Newest ids already in the warehouse: an incremental run stops at the first it meets. */
  knownIds: string[];
  /** Size of the first page, from the rate new items appeared before; absent on a first harvest. */
  firstPageLimit?: number;
}

export interface PrepareRunInput extends RunApi {
  runId: string;
  harvest: string;
  startedAt: string;
  budgetCredits: number;
  targets: TargetPlan[];
  /** The harvest's `track.items`: its due items are forecast. */
  trackItems?: { days: number };
}

export interface PreparedRun {
  prices: PriceTable;
  knowledge: Record<string, TargetKnowledge>;
  tracking?: TrackingForecast;
  /** Set when the run must not start: the API said credits are low. */
  blocked?: string;
}

export interface FinishRunInput extends RunApi {
  runId: string;
  harvest: string;
  startedAt: string;
  status: string;
  budgetCredits: number;
  creditsSpent: number;
  itemsLanded: number;
  error?: string;
  /** The enrichments the harvest asked for each listed item, for the warehouse's coverage. */
  enrichments?: string[];
}

export interface FinishedRun {
  landingsLoaded: number;
  rowsLoaded: number;
  /** Landings the load could not load, moved to quarantine/: the file and why. */
  quarantined: string[];
  /** Enrichment calls of the run that failed for good: how many, and the first of them. */
  failedCalls?: { total: number; first: FailedCall[] };
}

/** Failed calls a run's summary lists; `harvester show --json` and the journals have the count. */
const FAILED_CALLS_SHOWN = 20;

export interface RunActivityDeps {
  client: SocialApiClient;
  dataDir: string;
  logger?: Logger;
  pricesFile?: string;
  /** Pauses a harvest's Temporal Schedule, if it has one. */
  pauseSchedule?: (harvest: string, note: string) => Promise<void>;
}

const KNOWN_IDS = 100;

/**
 * The first page's size: the items expected since the newest known one was posted, at the rate
 * the known items were posted, with a quarter of headroom and one more (the known item that tells
 * the run to stop). Both times are the API's (its posted_at, and its Date header for now).
 */
function firstPageLimit(postedAt: number[], apiNowMs: number): number | undefined {
  if (postedAt.length < 2) return undefined;
  const newest = Math.max(...postedAt);
  const oldest = Math.min(...postedAt);
  if (newest <= oldest) return undefined;
  const perMs = (postedAt.length - 1) / (newest - oldest);
  const expected = perMs * Math.max(0, apiNowMs - newest);
  return Math.min(50, Math.max(1, Math.ceil(expected * 1.25) + 1));
}

export function runActivities(deps: RunActivityDeps) {
  // The final load runs in a process of its own (src/warehouse/load-process.ts): DuckDB's memory
  // leaves with it, so a worker's memory does not grow with what its runs land. A load killed
  // with its worker is safe: the loader commits batch by batch and records what it loaded.
  const loader = new WarmLoader();

  async function prepare(input: PrepareRunInput): Promise<PreparedRun> {
    // Started now, the load process is ready when the run ends instead of adding its start to it.
    loader.prewarm();
    const prices = loadPriceTable(deps.pricesFile);
    const low = creditsLow(deps.dataDir);
    if (low) return { prices, knowledge: {}, blocked: `credits.low since ${low.since}: no new run starts until the plan changes` };
    writeLanding(deps.dataDir, { format: 1, kind: 'run', run_id: input.runId, harvest: input.harvest, seq: Date.now(), status: 'running', started_at: input.startedAt, budget_credits: input.budgetCredits });
    const knowledge: Record<string, TargetKnowledge> = {};
    // Only after a complete listing may a run stop at known items; after one that stopped short,
    // it lists again to max_items, filling the gap the earlier run left.
    const incremental = input.targets.filter((target) => coversListing(readCoverage(deps.dataDir, target.key), target.maxItems));
    if (incremental.length === 0 && !input.trackItems) return { prices, knowledge };
    // Observations carry the API's clock, so "now" is the API's too (a free call's Date header).
    const apiNow = (await deps.client.serverTime()).getTime();
    // Loaded here, not at the top: DuckDB costs a third of a second to load, which a first run
    // (and the start of every `harvester run`) need not pay.
    const { newestKnownItems, forecastTracking } = await import('../src/warehouse/known-items.js');
    for (const target of incremental) {
      const known = await newestKnownItems(deps.dataDir, target, KNOWN_IDS);
      if (known.length === 0) continue;
      const limit = firstPageLimit(known.flatMap((item) => (item.postedAtMs === null ? [] : [item.postedAtMs])), apiNow);
      knowledge[target.key] = { knownIds: known.map((item) => item.id), ...(limit !== undefined ? { firstPageLimit: limit } : {}) };
    }
    if (!input.trackItems) return { prices, knowledge };
    return { prices, knowledge, tracking: await forecastTracking(deps.dataDir, input.targets, input.trackItems.days, apiNow, prices) };
  }

  async function finish(input: FinishRunInput): Promise<FinishedRun> {
    const failed = [...runFailures(deps.dataDir, input.runId)];
    writeLanding(deps.dataDir, {
      format: 1,
      kind: 'run',
      run_id: input.runId,
      harvest: input.harvest,
      seq: Date.now(),
      status: input.status,
      started_at: input.startedAt,
      finished_at: new Date().toISOString(),
      budget_credits: input.budgetCredits,
      credits_spent: input.creditsSpent,
      items_landed: input.itemsLanded,
      ...(input.error ? { error: input.error } : {}),
      ...(input.enrichments ? { enrichments: input.enrichments } : {}),
      failed_calls: failed.map(([, failure]) => ({ endpoint: failure.endpoint, subject: failure.subject, reason: failure.reason, ...(failure.request_id ? { request_id: failure.request_id } : {}), at: failure.at })),
    });
    // The load may take minutes: heartbeats let a killed worker's load move on within seconds.
    const context = Context.current();
    const heartbeat = setInterval(() => context.heartbeat(), 5_000);
    try {
      const result = await loader.load(deps.dataDir, context.cancellationSignal);
      const landingsLoaded = result.landingsLoadedByRun[pathSegment(input.runId)] ?? 0;
      deps.logger?.info(
        { run: input.runId, harvest: input.harvest, landings: landingsLoaded, rows: result.rowsLoaded, quarantined: result.quarantined.length, ms: result.durationMs },
        'run loaded into the warehouse',
      );
      return {
        // This run's landings only: a load on a shared data directory also loads other runs'.
        landingsLoaded,
        rowsLoaded: result.rowsLoaded,
        quarantined: result.quarantined.map((landing) => `${landing.file}: ${landing.reason}`),
        failedCalls: { total: failed.length, first: failed.slice(0, FAILED_CALLS_SHOWN).map(([key, failure]) => ({ key, ...failure })) },
      };
    } finally {
      clearInterval(heartbeat);
    }
  }

  return {
    // Both map a refused key and an unwritable data directory to failures that are not retried.
    prepareRun: (input: PrepareRunInput): Promise<PreparedRun> => asActivity(() => prepare(input)),
    finishRun: (input: FinishRunInput): Promise<FinishedRun> => asActivity(() => finish(input)),

    async pauseSchedule(input: { harvest: string; reason: string }): Promise<void> {
      await deps.pauseSchedule?.(input.harvest, input.reason);
    },
  };
}
