/** Small pure inputs for the src/harvest unit tests: a price table, targets and harvests. */
import { ENDPOINTS, endpointKey, type EndpointKey, type PriceTable } from '../../src/api-catalog/endpoints.js';
import type { Harvest } from '../../src/harvest/harvest-types.js';
import type { TargetPlan } from '../../src/harvest/targets.js';

/** Every endpoint at 1 credit, but for the few the tests tell apart. */
export function priceTable(prices: Partial<Record<EndpointKey, number>> = {}): PriceTable {
  return { ...(Object.fromEntries(ENDPOINTS.map((spec) => [endpointKey(spec), 1])) as Record<EndpointKey, number>), ...prices };
}

export function channelPlan(fields: Partial<TargetPlan> = {}): TargetPlan {
  return { key: 'channel:tiktok:cook:videos', kind: 'channel', platform: 'tiktok', endpoint: 'channel-videos', params: { handle: 'cook' }, maxItems: 100, enrich: false, ...fields };
}

export function harvestOf(fields: Partial<Harvest> = {}): Harvest {
  return {
    name: 'h',
    budget: { credits: 1000 },
    channels: [],
    searches: [],
    comments: [],
    enrich: { stats: false, comments: false, transcript: false, summary: false, download: false },
    job_threshold: 500,
    concurrency: { targets: 8, calls: 16 },
    ...fields,
  };
}
