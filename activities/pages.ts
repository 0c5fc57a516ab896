/**
 * Activities that buy data: one list page, or one object answer, each landed durably before the
 * activity returns. They are idempotent: when the landing for (run, target, page) already exists,
 * a retry reads it back instead of calling the API, so a worker killed after landing pays nothing
 * again.
 */
import type { ListEndpoint, ObjectEndpoint, SocialApiClient } from '../src/api/client.js';
import { CursorExpiredError, FeatureUnavailableError } from '../src/api/errors.js';
import type { EndpointName, Platform } from '../src/spec/endpoints.js';
import { findLanding, pageLandingKey, writeLanding, type PageLanding } from '../src/warehouse/landing.js';
import { asActivity } from './failures.js';
import { landingOfCall } from './page-landing.js';

export interface TargetRef {
  key: string;
  platform: Platform;
  endpoint: EndpointName;
  params: Record<string, string>;
}

export interface FetchPageInput {
  runId: string;
  harvest: string;
  target: TargetRef;
  /** 1-based page number of this target in this run. */
  page: number;
  cursor?: string;
  limit: number;
  /** Items landed before this page, for search ranks. */
  rankOffset: number;
  /** Stop at the first of these ids: items already in the warehouse (incremental runs). */
  stopAtIds: string[];
  /** Return the URLs of the page's new items, to enrich them. */
  collectUrls: boolean;
}

export interface PageSummary {
  /** Items landed (all the page held: paid data is kept). */
  count: number;
  /** Items before the first already-known one. */
  newCount: number;
  credits: number;
  nextCursor?: string;
  hasMore: boolean;
  reachedKnown: boolean;
  cursorExpired: boolean;
  /** Id of the first item of the page (lists are newest first). */
  firstId?: string;
  itemUrls: string[];
  requestId?: string;
}

export interface FetchObjectInput {
  runId: string;
  harvest: string;
  platform: Platform;
  endpoint: ObjectEndpoint;
  url: string;
}

export interface ObjectSummary {
  credits: number;
  /** Why nothing was bought, when the API has the feature switched off (TikTok downloads). */
  skipped?: string;
  requestId?: string;
}

export interface PageActivityDeps {
  client: SocialApiClient;
  dataDir: string;
}

function summarize(landing: PageLanding, input: Pick<FetchPageInput, 'stopAtIds' | 'collectUrls'>): PageSummary {
  const items = (Array.isArray(landing.data) ? landing.data : []) as { id: string; url?: string }[];
  const known = new Set(input.stopAtIds);
  const firstKnown = items.findIndex((item) => known.has(item.id));
  const fresh = firstKnown === -1 ? items : items.slice(0, firstKnown);
  return {
    count: items.length,
    newCount: fresh.length,
    credits: landing.call?.credits ?? 0,
    ...(landing.next_cursor ? { nextCursor: landing.next_cursor } : {}),
    hasMore: landing.has_more ?? false,
    reachedKnown: firstKnown !== -1,
    cursorExpired: false,
    ...(items[0] ? { firstId: items[0].id } : {}),
    itemUrls: input.collectUrls ? fresh.flatMap((item) => (item.url ? [item.url] : [])) : [],
    requestId: landing.request_id,
  };
}

export function pageActivities({ client, dataDir }: PageActivityDeps) {
  return {
    async fetchPage(input: FetchPageInput): Promise<PageSummary> {
      const place = { runId: input.runId, harvest: input.harvest, target: input.target.key, page: input.page, params: input.target.params };
      const existing = findLanding(dataDir, pageLandingKey(input.runId, input.target.key, input.page));
      if (existing?.kind === 'page') return summarize(existing, input);
      return asActivity(async () => {
        try {
          const result = await client.page(input.target.platform, input.target.endpoint as ListEndpoint, {
            ...input.target.params,
            limit: input.limit,
            cursor: input.cursor,
          });
          const landing = landingOfCall({ ...place, rankOffset: input.rankOffset, nextCursor: result.nextCursor, hasMore: result.hasMore }, result, result.items);
          writeLanding(dataDir, landing);
          return summarize(landing, input);
        } catch (error) {
          if (error instanceof CursorExpiredError) {
            return { count: 0, newCount: 0, credits: 0, hasMore: true, reachedKnown: false, cursorExpired: true, itemUrls: [] };
          }
          throw error;
        }
      });
    },

    /** The URLs of the items a landed page holds (a job's results page), for enrichment. */
    async landedItemUrls(input: { runId: string; target: string; page: number }): Promise<string[]> {
      const landing = findLanding(dataDir, pageLandingKey(input.runId, input.target, input.page));
      const items = landing?.kind === 'page' && Array.isArray(landing.data) ? (landing.data as { url?: string }[]) : [];
      return items.flatMap((item) => (item.url ? [item.url] : []));
    },

    async fetchObject(input: FetchObjectInput): Promise<ObjectSummary> {
      const target = `item:${input.platform}:${input.endpoint}:${input.url}`;
      const existing = findLanding(dataDir, pageLandingKey(input.runId, target, 1));
      if (existing?.kind === 'page') return { credits: existing.call?.credits ?? 0, requestId: existing.request_id };
      return asActivity(async () => {
        try {
          const result = await client.get(input.platform, input.endpoint, { url: input.url });
          writeLanding(dataDir, landingOfCall({ runId: input.runId, harvest: input.harvest, target, page: 1, params: { url: input.url } }, result, result.data));
          return { credits: result.creditsCharged, requestId: result.requestId };
        } catch (error) {
          // A feature the API has switched off is a fact to record, not a failure: it was not charged.
          if (error instanceof FeatureUnavailableError) return { credits: 0, skipped: error.code };
          throw error;
        }
      });
    },
  };
}

