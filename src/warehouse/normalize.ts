/**
 * The normalize stage: a landing (one page, as the API sent it) becomes rows of the warehouse
 * tables. Pure functions of the landing, so loading the same landing twice gives the same rows.
 */
import { parseContentUrl } from '../spec/content-urls.js';
import type { ItemKind, Platform } from '../spec/endpoints.js';
import type { Landing, PageLanding } from './landing.js';

/** Tables the loader stages rows for; `seen_at` becomes first/last_seen_at when merged. */
export interface StagedRows {
  accounts: { platform: string; handle: string; name: string | null; bio: string | null; verified: boolean | null; followers: number | null; following: number | null; posts: number | null; seen_at: string }[];
  account_metrics: { platform: string; handle: string; observed_at: string; followers: number | null; following: number | null; posts: number | null; from_cache: boolean | null; request_id: string; run_id: string }[];
  items: { platform: string; item_id: string; kind: string; url: string | null; caption: string | null; author_handle: string | null; posted_at: string | null; seen_at: string }[];
  item_metrics: { platform: string; item_id: string; observed_at: string; views: number | null; likes: number | null; comments: number | null; shares: number | null; from_cache: boolean | null; source_endpoint: string; request_id: string; run_id: string }[];
  comments: { platform: string; comment_id: string; item_id: string; text: string | null; author_handle: string | null; likes: number | null; posted_at: string | null; seen_at: string }[];
  search_hits: { platform: string; query: string; kind: string; rank: number; item_id: string; observed_at: string; request_id: string; run_id: string }[];
  transcripts: { platform: string; item_id: string; language: string | null; source: string | null; text: string | null; fetched_at: string; request_id: string }[];
  transcript_segments: { platform: string; item_id: string; seq: number; start_seconds: number | null; end_seconds: number | null; text: string | null }[];
  summaries: { platform: string; item_id: string; language: string | null; summary: string | null; fetched_at: string; request_id: string }[];
  downloads: { platform: string; item_id: string; media_url: string | null; mime_type: string | null; expires_at: string | null; observed_at: string; request_id: string }[];
  api_calls: { request_id: string; run_id: string; harvest: string; target: string; endpoint: string; params: string; units: number; credits: number; cache_status: string | null; job_id: string | null; called_at: string }[];
  harvest_runs: { run_id: string; harvest: string; status: string; seq: number; started_at: string; finished_at: string | null; budget_credits: number | null; credits_spent: number | null; items_landed: number | null; error: string | null }[];
}

export type StagedTable = keyof StagedRows;

export function emptyRows(): StagedRows {
  return {
    accounts: [],
    account_metrics: [],
    items: [],
    item_metrics: [],
    comments: [],
    search_hits: [],
    transcripts: [],
    transcript_segments: [],
    summaries: [],
    downloads: [],
    api_calls: [],
    harvest_runs: [],
  };
}

type Json = Record<string, unknown>;

const SEARCH_KIND: Record<string, string> = { search: 'search', 'hashtag-search': 'hashtag', 'reels-search': 'reels' };
const LIST_KIND: Record<string, ItemKind> = { 'channel-videos': 'video', 'channel-posts': 'post', 'channel-reels': 'reel' };

/** Adds the landing's rows to `rows`; returns how many rows it added. */
export function normalizeLanding(landing: Landing, rows: StagedRows): number {
  if (landing.kind === 'run') {
    rows.harvest_runs.push({
      run_id: landing.run_id,
      harvest: landing.harvest,
      status: landing.status,
      seq: landing.seq,
      started_at: landing.started_at,
      finished_at: landing.finished_at ?? null,
      budget_credits: landing.budget_credits ?? null,
      credits_spent: landing.credits_spent ?? null,
      items_landed: landing.items_landed ?? null,
      error: landing.error ?? null,
    });
    return 1;
  }
  const before = countRows(rows);
  const [platformText, name] = landing.endpoint.split('/') as [string, string];
  const platform = platformText as Platform;
  const context = { landing, platform, observedAt: landing.observed_at, fromCache: landing.call?.cache === undefined ? null : landing.call.cache === 'HIT' };
  if (landing.call) {
    rows.api_calls.push({
      request_id: landing.call.request_id,
      run_id: landing.run_id,
      harvest: landing.harvest,
      target: landing.target,
      endpoint: landing.endpoint,
      params: JSON.stringify(landing.params),
      units: landing.call.units,
      credits: landing.call.credits,
      cache_status: landing.call.cache ?? null,
      job_id: landing.call.job_id ?? null,
      called_at: landing.observed_at,
    });
  }
  const items = Array.isArray(landing.data) ? (landing.data as Json[]) : [];
  const object = Array.isArray(landing.data) ? {} : ((landing.data ?? {}) as Json);
  if (name in LIST_KIND) {
    for (const item of items) addListedItem(rows, context, item, LIST_KIND[name] as ItemKind, landing.params.handle ?? null);
  } else if (name in SEARCH_KIND) {
    items.forEach((item, index) => {
      addListedItem(rows, context, item, platform === 'tiktok' ? 'video' : 'reel', text((item.author as Json | undefined)?.handle));
      rows.search_hits.push({
        platform,
        query: landing.params.query ?? '',
        kind: SEARCH_KIND[name] as string,
        rank: (landing.rank_offset ?? 0) + index + 1,
        item_id: String(item.id),
        observed_at: context.observedAt,
        request_id: landing.request_id,
        run_id: landing.run_id,
      });
    });
  } else if (name === 'comments') {
    const ref = contentRef(platform, landing);
    for (const comment of items) {
      rows.comments.push({
        platform,
        comment_id: String(comment.id),
        item_id: ref.itemId,
        text: text(comment.text),
        author_handle: text((comment.author as Json | undefined)?.handle),
        likes: number(comment.likes),
        posted_at: text(comment.posted_at),
        seen_at: context.observedAt,
      });
    }
  } else if (name === 'channel-stats') {
    const metrics = (object.metrics ?? {}) as Json;
    const handle = String(object.handle);
    rows.accounts.push({
      platform,
      handle,
      name: text(object.name),
      bio: text(object.bio),
      verified: typeof object.verified === 'boolean' ? object.verified : null,
      followers: number(metrics.followers),
      following: number(metrics.following),
      posts: number(metrics.posts),
      seen_at: context.observedAt,
    });
    rows.account_metrics.push({
      platform,
      handle,
      observed_at: context.observedAt,
      followers: number(metrics.followers),
      following: number(metrics.following),
      posts: number(metrics.posts),
      from_cache: context.fromCache,
      request_id: landing.request_id,
      run_id: landing.run_id,
    });
  } else if (name === 'stats') {
    const ref = contentRef(platform, landing);
    const metrics = (object.metrics ?? {}) as Json;
    rows.items.push({
      platform,
      item_id: String(object.entity_id ?? ref.itemId),
      kind: ref.kind,
      url: text(object.url),
      caption: null,
      author_handle: text((object.author as Json | undefined)?.handle),
      posted_at: text(object.posted_at),
      seen_at: context.observedAt,
    });
    addMetrics(rows, context, String(object.entity_id ?? ref.itemId), metrics);
  } else if (name === 'transcript') {
    const ref = contentRef(platform, landing);
    rows.transcripts.push({ platform, item_id: ref.itemId, language: text(object.language), source: text(object.source), text: text(object.text), fetched_at: context.observedAt, request_id: landing.request_id });
    const segments = Array.isArray(object.segments) ? (object.segments as Json[]) : [];
    segments.forEach((segment, seq) => {
      rows.transcript_segments.push({ platform, item_id: ref.itemId, seq, start_seconds: number(segment.start), end_seconds: number(segment.end), text: text(segment.text) });
    });
  } else if (name === 'summary') {
    const ref = contentRef(platform, landing);
    rows.summaries.push({ platform, item_id: ref.itemId, language: text(object.language), summary: text(object.summary), fetched_at: context.observedAt, request_id: landing.request_id });
  } else if (name === 'download') {
    const ref = contentRef(platform, landing);
    rows.downloads.push({ platform, item_id: ref.itemId, media_url: text(object.media_url), mime_type: text(object.mime_type), expires_at: text(object.expires_at), observed_at: context.observedAt, request_id: landing.request_id });
  } else {
    throw new Error(`landing of ${landing.endpoint}: no normalizer for this endpoint`);
  }
  return countRows(rows) - before;
}

interface Context {
  landing: PageLanding;
  platform: Platform;
  observedAt: string;
  fromCache: boolean | null;
}

/** An item of a channel list or a search: its row in `items` and its observation in `item_metrics`. */
function addListedItem(rows: StagedRows, context: Context, item: Json, kind: ItemKind, authorHandle: string | null): void {
  rows.items.push({
    platform: context.platform,
    item_id: String(item.id),
    kind,
    url: text(item.url),
    caption: text(item.caption),
    author_handle: authorHandle,
    posted_at: text(item.posted_at),
    seen_at: context.observedAt,
  });
  addMetrics(rows, context, String(item.id), (item.metrics ?? {}) as Json);
}

function addMetrics(rows: StagedRows, context: Context, itemId: string, metrics: Json): void {
  rows.item_metrics.push({
    platform: context.platform,
    item_id: itemId,
    observed_at: context.observedAt,
    views: number(metrics.views),
    likes: number(metrics.likes),
    comments: number(metrics.comments),
    shares: number(metrics.shares),
    from_cache: context.fromCache,
    source_endpoint: context.landing.endpoint,
    request_id: context.landing.request_id,
    run_id: context.landing.run_id,
  });
}

function contentRef(platform: Platform, landing: PageLanding) {
  const ref = parseContentUrl(platform, landing.params.url ?? '');
  if (!ref) throw new Error(`landing of ${landing.endpoint}: params.url ${JSON.stringify(landing.params.url)} is not a ${platform} content URL`);
  return ref;
}

function text(value: unknown): string | null {
  return typeof value === 'string' ? value : null;
}

function number(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
}

function countRows(rows: StagedRows): number {
  return Object.values(rows).reduce((sum, list: unknown[]) => sum + list.length, 0);
}
