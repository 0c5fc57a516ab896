/**
 * The harvest rules, in one pure module: how a target is bought (pages or one async job), which
 * calls each listed item gets, and what each costs at worst. The workflow runs by these rules and
 * `harvester plan` forecasts by them, so the forecast and the run cannot disagree.
 */
import type { Enrichment, Harvest } from './harvest-types.js';
import { PAGE_LIMITS, type EndpointKey, type Platform, type PriceTable } from '../api-catalog/endpoints.js';
import type { TargetPlan } from './targets.js';

/** The object endpoints an item can be enriched with, in the order their calls are made. */
export const OBJECT_ENRICHMENTS = ['stats', 'transcript', 'summary', 'download'] as const;
export type ObjectEnrichment = (typeof OBJECT_ENRICHMENTS)[number];

/** Calls in flight, unless the harvest or the command line says otherwise. */
export const DEFAULT_CONCURRENCY = { targets: 8, calls: 16 } as const;

/** More in flight than this only queues at the API's rate limit. */
export const MAX_CONCURRENCY = 256;

export function priceOf(prices: PriceTable, platform: Platform, endpoint: string): number {
  return prices[`${platform}/${endpoint}` as EndpointKey];
}

/**
 * Whether a target is meant to be bought as one async job: only a first listing (an incremental
 * one stops at known items, which a job cannot do) of more than `job_threshold` items. Whether the
 * budget fits a job is jobLimit's to say.
 */
export function takesJob(target: TargetPlan, jobThreshold: number, incremental: boolean): boolean {
  return !incremental && target.maxItems > jobThreshold;
}

/** Items one job of this target asks for: a job returns at most PAGE_LIMITS.maxJob. */
export function jobItems(target: TargetPlan): number {
  return Math.min(target.maxItems, PAGE_LIMITS.maxJob);
}

/**
 * Items a job of this target asks for out of `free` credits: as many of jobItems as the budget
 * fits, or 0 when that is too few for a job (a job takes more than PAGE_LIMITS.maxSynchronous
 * items), and the target is paged instead, within what is left of the budget.
 */
export function jobLimit(prices: PriceTable, target: TargetPlan, free: number): number {
  const limit = Math.max(0, Math.min(jobItems(target), Math.floor(free / priceOf(prices, target.platform, target.endpoint))));
  return limit > PAGE_LIMITS.maxSynchronous ? limit : 0;
}

/** The channels whose profiles a run observes (`track.accounts`): each platform and handle once. */
export function trackedAccounts(harvest: Harvest): { platform: Platform; handle: string }[] {
  if (!harvest.track?.accounts) return [];
  const seen = new Map<string, { platform: Platform; handle: string }>();
  for (const channel of harvest.channels) seen.set(`${channel.platform}:${channel.handle}`, { platform: channel.platform, handle: channel.handle });
  return [...seen.values()];
}

/** The worst case of observing these accounts: one channel-stats each. */
export function accountsWorst(prices: PriceTable, accounts: readonly { platform: Platform }[]): number {
  return accounts.reduce((sum, account) => sum + priceOf(prices, account.platform, 'channel-stats'), 0);
}

/** Instagram photo posts (`/p/` URLs; a channel's `posts`) have no audio: no transcript, no summary. */
export function isPhotoPostUrl(url: string): boolean {
  return url.includes('instagram.com/p/');
}

/** Whether a target's items are photo posts, for a forecast that has no URLs yet. */
export function listsPhotoPosts(target: TargetPlan): boolean {
  return target.platform === 'instagram' && target.endpoint === 'channel-posts';
}

/** The object calls one listed item gets. */
export function objectEnrichments(enrich: Enrichment, photoPost: boolean): ObjectEnrichment[] {
  return OBJECT_ENRICHMENTS.filter((kind) => enrich[kind] && !(photoPost && (kind === 'transcript' || kind === 'summary')));
}

/** The enrichments a harvest asks for each listed item, by name (`stats`, `comments`, …). */
export function askedEnrichments(harvest: Harvest): string[] {
  return [...OBJECT_ENRICHMENTS.filter((kind) => harvest.enrich[kind]), ...(commentsPerItem(harvest.enrich) > 0 ? ['comments'] : [])];
}

export function commentsPerItem(enrich: Enrichment): number {
  return enrich.comments === false ? 0 : enrich.comments.max_per_item;
}

/** TikTok downloads are switched off by the API (download_unavailable) and never charged. */
export function refusedByApi(platform: Platform, endpoint: string): boolean {
  return platform === 'tiktok' && endpoint === 'download';
}

/** The worst case of enriching one item: every object call at its price, and a full comments list. */
export function itemEnrichmentWorst(prices: PriceTable, platform: Platform, enrich: Enrichment, photoPost: boolean): number {
  const objects = objectEnrichments(enrich, photoPost).reduce((sum, kind) => sum + priceOf(prices, platform, kind), 0);
  return objects + commentsPerItem(enrich) * priceOf(prices, platform, 'comments');
}

/** The worst case of listing `items` more items of a target, and enriching them when it enriches. */
export function targetWorst(prices: PriceTable, target: TargetPlan, enrich: Enrichment, items: number): number {
  const perItem = priceOf(prices, target.platform, target.endpoint) + (target.enrich ? itemEnrichmentWorst(prices, target.platform, enrich, listsPhotoPosts(target)) : 0);
  return Math.max(0, items) * perItem;
}
