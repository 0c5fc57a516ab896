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
    key: `comments:${target.platform}:${target.url}`,
    kind: 'comments',
    platform: target.platform,
    endpoint: 'comments',
    params: { url: target.url },
    maxItems: target.max_items,
    enrich: false,
  }));
  return [...channels, ...searches, ...comments];
}
