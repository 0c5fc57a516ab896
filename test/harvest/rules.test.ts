import { describe, expect, it } from 'vitest';
import { PAGE_LIMITS } from '../../src/api-catalog/endpoints.js';
import {
  accountsWorst,
  askedEnrichments,
  commentsPerItem,
  isPhotoPostUrl,
  itemEnrichmentWorst,
  jobItems,
  jobLimit,
  listsPhotoPosts,
  objectEnrichments,
  priceOf,
  refusedByApi,
  takesJob,
  targetWorst,
  trackedAccounts,
} from '../../src/harvest/rules.js';
import type { Enrichment } from '../../src/harvest/harvest-types.js';
import { channelPlan, harvestOf, priceTable } from './fixtures.js';

const everything: Enrichment = { stats: true, comments: { max_per_item: 20 }, transcript: true, summary: true, download: true };

describe('how a target is bought', () => {
  const prices = priceTable({ 'tiktok/channel-videos': 2 });

  it('takes a job only on a first listing of more than job_threshold items', () => {
    expect(takesJob(channelPlan({ maxItems: 501 }), 500, false)).toBe(true);
    expect(takesJob(channelPlan({ maxItems: 500 }), 500, false)).toBe(false);
    expect(takesJob(channelPlan({ maxItems: 5_000 }), 500, true)).toBe(false);
  });

  it('asks a job for at most what a job returns', () => {
    expect(jobItems(channelPlan({ maxItems: 20_000 }))).toBe(PAGE_LIMITS.maxJob);
    expect(jobItems(channelPlan({ maxItems: 800 }))).toBe(800);
  });

  it('sizes a job to what the budget fits, and pages a target whose job would be no bigger than a page', () => {
    const target = channelPlan({ maxItems: 800 });
    expect(jobLimit(prices, target, 10_000)).toBe(800);
    expect(jobLimit(prices, target, 2 * 300)).toBe(300);
    expect(jobLimit(prices, target, 2 * (PAGE_LIMITS.maxSynchronous + 1))).toBe(PAGE_LIMITS.maxSynchronous + 1);
    expect(jobLimit(prices, target, 2 * PAGE_LIMITS.maxSynchronous + 1)).toBe(0);
    expect(jobLimit(prices, target, 0)).toBe(0);
  });

  it('reads an endpoint\'s price from the table', () => {
    expect(priceOf(prices, 'tiktok', 'channel-videos')).toBe(2);
  });
});

describe('which calls an item gets, and their worst case', () => {
  const prices = priceTable({ 'instagram/stats': 3, 'instagram/transcript': 5, 'instagram/summary': 7, 'instagram/download': 11, 'instagram/comments': 2, 'instagram/channel-posts': 4 });

  it('makes the object calls in one order, and none a photo post cannot answer', () => {
    expect(objectEnrichments(everything, false)).toEqual(['stats', 'transcript', 'summary', 'download']);
    expect(objectEnrichments(everything, true)).toEqual(['stats', 'download']);
    expect(objectEnrichments({ ...everything, stats: false, download: false }, false)).toEqual(['transcript', 'summary']);
  });

  it('tells photo posts by their URL, or, before there are URLs, by the channel\'s posts', () => {
    expect(isPhotoPostUrl('https://www.instagram.com/p/Cabc/')).toBe(true);
    expect(isPhotoPostUrl('https://www.instagram.com/reel/Cabc/')).toBe(false);
    expect(listsPhotoPosts(channelPlan({ platform: 'instagram', endpoint: 'channel-posts' }))).toBe(true);
    expect(listsPhotoPosts(channelPlan({ platform: 'instagram', endpoint: 'channel-reels' }))).toBe(false);
  });

  it('names the enrichments a harvest asks for, comments only when it asks for some', () => {
    expect(askedEnrichments(harvestOf({ enrich: everything }))).toEqual(['stats', 'transcript', 'summary', 'download', 'comments']);
    expect(askedEnrichments(harvestOf({ enrich: { ...everything, comments: { max_per_item: 0 } } }))).toEqual(['stats', 'transcript', 'summary', 'download']);
    expect(commentsPerItem({ ...everything, comments: false })).toBe(0);
  });

  it('prices an item\'s worst case as every object call and a full comments list', () => {
    expect(itemEnrichmentWorst(prices, 'instagram', everything, false)).toBe(3 + 5 + 7 + 11 + 20 * 2);
    expect(itemEnrichmentWorst(prices, 'instagram', everything, true)).toBe(3 + 11 + 20 * 2);
  });

  it('prices a target\'s items as their listing, and their enrichment when the target enriches', () => {
    const posts = channelPlan({ platform: 'instagram', endpoint: 'channel-posts', enrich: true });
    expect(targetWorst(prices, posts, everything, 10)).toBe(10 * (4 + 3 + 11 + 20 * 2));
    expect(targetWorst(prices, { ...posts, enrich: false }, everything, 10)).toBe(10 * 4);
    expect(targetWorst(prices, posts, everything, -3)).toBe(0);
  });

  it('knows the API refuses TikTok downloads', () => {
    expect(refusedByApi('tiktok', 'download')).toBe(true);
    expect(refusedByApi('instagram', 'download')).toBe(false);
  });
});

describe('tracked accounts', () => {
  const channel = (platform: 'tiktok' | 'instagram', handle: string, content: 'videos' | 'posts' | 'reels') => ({ platform, handle, content, max_items: 10 });

  it('observes each channel\'s account once, in config order, only with track.accounts', () => {
    const channels = [channel('instagram', 'cook', 'posts'), channel('tiktok', 'cook', 'videos'), channel('instagram', 'cook', 'reels')];
    expect(trackedAccounts(harvestOf({ channels }))).toEqual([]);
    expect(trackedAccounts(harvestOf({ channels, track: { accounts: false } }))).toEqual([]);
    expect(trackedAccounts(harvestOf({ channels, track: { accounts: true } }))).toEqual([
      { platform: 'instagram', handle: 'cook' },
      { platform: 'tiktok', handle: 'cook' },
    ]);
  });

  it('prices their worst case at one channel-stats each', () => {
    const prices = priceTable({ 'tiktok/channel-stats': 2, 'instagram/channel-stats': 3 });
    expect(accountsWorst(prices, [{ platform: 'tiktok' }, { platform: 'instagram' }, { platform: 'instagram' }])).toBe(2 + 3 + 3);
  });
});
