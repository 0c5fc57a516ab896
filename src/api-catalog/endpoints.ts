/**
 * The endpoint catalog of the Social Content Data API (../shared/api-spec.md), as data.
 * The emulator routes and bills from it, the client prices calls from it, and the OpenAPI
 * document is generated from it, so the three cannot drift apart.
 */

export const PLATFORMS = ['tiktok', 'instagram'] as const;
export type Platform = (typeof PLATFORMS)[number];

/** The kind of item a list returns, as the API writes it in meta.item. */
export type ItemKind = 'video' | 'post' | 'reel';

/** Which request parameter identifies what an endpoint is about. */
export type IdentifyingParam = 'url' | 'handle' | 'query';

export type EndpointName =
  | 'transcript'
  | 'summary'
  | 'stats'
  | 'comments'
  | 'channel-stats'
  | 'channel-videos'
  | 'channel-posts'
  | 'channel-reels'
  | 'search'
  | 'hashtag-search'
  | 'reels-search'
  | 'download';

export type ResponseFormat = 'json' | 'csv' | 'text';

/**
 * Cache policy of an endpoint. `age-aware` scales with the age of the content, between the
 * bounds the spec gives (15 minutes to 7 days).
 */
export type CachePolicy =
  | { kind: 'forever' }
  | { kind: 'fixed'; seconds: number; firstPageSeconds?: number }
  | { kind: 'age-aware'; minSeconds: number; maxSeconds: number };

export interface EndpointSpec {
  platform: Platform;
  name: EndpointName;
  /** `list` endpoints take limit and cursor and charge per item returned. */
  shape: 'object' | 'list';
  param: IdentifyingParam;
  /** What one credit-priced unit is, for messages and docs. */
  unit: string;
  /** meta.item of a list response; comments have none. */
  item?: 'video' | 'post' | 'reel' | 'result';
  /** A search's hits (meta.item `result`): the kind of item they are. */
  finds?: ItemKind;
  cache: CachePolicy;
  formats: readonly ResponseFormat[];
}

const HOUR = 3600;
const AGE_AWARE: CachePolicy = { kind: 'age-aware', minSeconds: 15 * 60, maxSeconds: 7 * 24 * HOUR };
const CHANNEL_LIST: CachePolicy = { kind: 'fixed', seconds: 3 * HOUR, firstPageSeconds: 1 * HOUR };
const OBJECT_FORMATS = ['json'] as const;
const TEXT_FORMATS = ['json', 'text'] as const;
const LIST_FORMATS = ['json', 'csv'] as const;

function define(platform: Platform, specs: Omit<EndpointSpec, 'platform'>[]): EndpointSpec[] {
  return specs.map((spec) => ({ platform, ...spec }));
}

export const ENDPOINTS: readonly EndpointSpec[] = [
  ...define('tiktok', [
    { name: 'transcript', shape: 'object', param: 'url', unit: 'video', cache: { kind: 'forever' }, formats: TEXT_FORMATS },
    { name: 'summary', shape: 'object', param: 'url', unit: 'video', cache: { kind: 'forever' }, formats: TEXT_FORMATS },
    { name: 'stats', shape: 'object', param: 'url', unit: 'video', cache: AGE_AWARE, formats: OBJECT_FORMATS },
    { name: 'comments', shape: 'list', param: 'url', unit: 'comment', cache: AGE_AWARE, formats: LIST_FORMATS },
    { name: 'channel-stats', shape: 'object', param: 'handle', unit: 'profile', cache: { kind: 'fixed', seconds: 12 * HOUR }, formats: OBJECT_FORMATS },
    { name: 'channel-videos', shape: 'list', param: 'handle', unit: 'video', item: 'video', cache: CHANNEL_LIST, formats: LIST_FORMATS },
    { name: 'search', shape: 'list', param: 'query', unit: 'result', item: 'result', finds: 'video', cache: AGE_AWARE, formats: LIST_FORMATS },
    { name: 'hashtag-search', shape: 'list', param: 'query', unit: 'result', item: 'result', finds: 'video', cache: AGE_AWARE, formats: LIST_FORMATS },
    { name: 'download', shape: 'object', param: 'url', unit: 'video', cache: { kind: 'fixed', seconds: 7 * 24 * HOUR }, formats: OBJECT_FORMATS },
  ]),
  ...define('instagram', [
    { name: 'transcript', shape: 'object', param: 'url', unit: 'reel', cache: { kind: 'forever' }, formats: TEXT_FORMATS },
    { name: 'summary', shape: 'object', param: 'url', unit: 'reel', cache: { kind: 'forever' }, formats: TEXT_FORMATS },
    { name: 'stats', shape: 'object', param: 'url', unit: 'post', cache: AGE_AWARE, formats: OBJECT_FORMATS },
    { name: 'comments', shape: 'list', param: 'url', unit: 'comment', cache: AGE_AWARE, formats: LIST_FORMATS },
    { name: 'channel-stats', shape: 'object', param: 'handle', unit: 'profile', cache: { kind: 'fixed', seconds: 12 * HOUR }, formats: OBJECT_FORMATS },
    { name: 'channel-posts', shape: 'list', param: 'handle', unit: 'post', item: 'post', cache: CHANNEL_LIST, formats: LIST_FORMATS },
    { name: 'channel-reels', shape: 'list', param: 'handle', unit: 'reel', item: 'reel', cache: CHANNEL_LIST, formats: LIST_FORMATS },
    { name: 'reels-search', shape: 'list', param: 'query', unit: 'result', item: 'result', finds: 'reel', cache: AGE_AWARE, formats: LIST_FORMATS },
    { name: 'download', shape: 'object', param: 'url', unit: 'video', cache: { kind: 'fixed', seconds: 7 * 24 * HOUR }, formats: OBJECT_FORMATS },
  ]),
];

/** `tiktok/channel-videos`: how the ledger, prices and job records name an endpoint. */
export type EndpointKey = `${Platform}/${EndpointName}`;

/** Credits per unit for every endpoint, keyed like `tiktok/channel-videos` (config/prices.yaml). */
export type PriceTable = Readonly<Record<EndpointKey, number>>;

export function endpointKey(spec: Pick<EndpointSpec, 'platform' | 'name'>): EndpointKey {
  return `${spec.platform}/${spec.name}`;
}

/** The kind of item a list endpoint's answer holds: a channel list's own kind, a search's hits' kind; undefined for comments and objects. */
export function listedItemKind(spec: EndpointSpec): ItemKind | undefined {
  return spec.item === 'result' ? spec.finds : spec.item;
}

export function findEndpoint(platform: string, name: string): EndpointSpec | undefined {
  return ENDPOINTS.find((spec) => spec.platform === platform && spec.name === name);
}

/** Page sizes from the spec's Limits table, and the async job bounds the emulator documents. */
export const PAGE_LIMITS = {
  defaultLimit: 20,
  maxSynchronous: 50,
  maxJob: 10_000,
  jobResultsDefault: 100,
  jobResultsMax: 1_000,
} as const;

export const WEBHOOK_EVENTS = ['job.completed', 'credits.low', 'plan.changed'] as const;
export type WebhookEvent = (typeof WEBHOOK_EVENTS)[number];
