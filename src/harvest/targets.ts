/**
 * The targets of a harvest, planned from its config: what each one lists, through which endpoint,
 * and how far. Pure, so the workflow can plan deterministically.
 */
import type { Harvest } from './harvest-types.js';
import type { EndpointName, Platform } from '../api-catalog/endpoints.js';

export type TargetKind = 'channel' | 'search' | 'comments';

export interface TargetPlan {
  /** Stable key: the landing folder and the warehouse's api_calls.target. */
  key: string;
  kind: TargetKind;
  platform: Platform;
  endpoint: EndpointName;
  /** The identifying parameter: handle, query or url. */
  params: Record<string, string>;
  maxItems: number;
  /** Whether items it lands are enriched (channels and searches, when the harvest enriches). */
  enrich: boolean;
}

/**
 * The target of an item's object call (its stats, transcript, download, …): not a target of the
 * plan, but the same kind of key, under which the call's answers land (layout.ts's itemLandingKey).
 */
export function itemTargetKey(platform: Platform, endpoint: EndpointName, subject: string): string {
  return `item:${platform}:${endpoint}:${subject}`;
}

/** A comments target's key: an item's comments pulled by its enrichment land under the same key as its comments target would. */
export function commentsTargetKey(platform: Platform, url: string): string {
  return `comments:${platform}:${url}`;
}

/** commentsTargetKey in SQL, of the SQL expressions of a platform and a URL: for queries that join calls to their items. */
export function commentsTargetKeySql(platformSql: string, urlSql: string): string {
  return `'comments:' || ${platformSql} || ':' || ${urlSql}`;
}

const CHANNEL_ENDPOINT = { videos: 'channel-videos', posts: 'channel-posts', reels: 'channel-reels' } as const;

export function planTargets(harvest: Harvest): TargetPlan[] {
  const enrich = Object.entries(harvest.enrich).some(([, value]) => value !== false);
  const channels = harvest.channels.map((channel): TargetPlan => ({
    key: `channel:${channel.platform}:${channel.handle}:${channel.content}`,
    kind: 'channel',
    platform: channel.platform,
    endpoint: CHANNEL_ENDPOINT[channel.content],
    params: { handle: channel.handle },
    maxItems: channel.max_items,
    enrich,
  }));
  const searches = harvest.searches.map((search): TargetPlan => {
    const hashtag = search.hashtag !== undefined;
    const endpoint: EndpointName = search.platform === 'instagram' ? 'reels-search' : hashtag ? 'hashtag-search' : 'search';
    const query = (hashtag ? search.hashtag : search.query) as string;
    return {
      key: `search:${search.platform}:${hashtag ? 'hashtag' : 'keyword'}:${query}`,
      kind: 'search',
      platform: search.platform,
      endpoint,
      params: { query },
      maxItems: search.max_results,
      enrich,
    };
  });
  const comments = harvest.comments.map((target): TargetPlan => ({
    key: commentsTargetKey(target.platform, target.url),
    kind: 'comments',
    platform: target.platform,
    endpoint: 'comments',
    params: { url: target.url },
    maxItems: target.max_items,
    enrich: false,
  }));
  return [...channels, ...searches, ...comments];
}
