import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadPriceTable } from '../../src/config/prices.js';
import {
  channelItemSchema,
  channelProfileSchema,
  commentSchema,
  downloadSchema,
  envelopeSchema,
  listEnvelopeSchema,
  RESOURCE_SCHEMAS,
  searchResultSchema,
  statsSchema,
  summarySchema,
  transcriptSchema,
} from '../../src/api-catalog/resources.js';
import { ENDPOINTS, endpointKey, type EndpointSpec } from '../../src/api-catalog/endpoints.js';
import { z } from 'zod';
import { q, startTestEmulator, type TestEmulator } from '../support/emulator.js';

const prices = loadPriceTable();
let emulator: TestEmulator;
let tiktokHandle: string;
let instagramHandle: string;
let tiktokVideoUrl: string;
let reelUrl: string;
let postUrl: string;

beforeAll(async () => {
  emulator = await startTestEmulator();
  const catalog = await emulator.catalog();
  tiktokHandle = catalog.tiktok.handles[0]!;
  instagramHandle = catalog.instagram.handles[0]!;
  const videos = await emulator.call<{ data: { url: string }[] }>(`/tiktok/channel-videos?handle=${tiktokHandle}&limit=1`);
  tiktokVideoUrl = videos.json.data[0]!.url;
  const reels = await emulator.call<{ data: { url: string }[] }>(`/instagram/channel-reels?handle=${instagramHandle}&limit=1`);
  reelUrl = reels.json.data[0]!.url;
  // A post with comments to list: a post's comments are a share of its likes, and a new one may have none yet.
  const posts = await emulator.call<{ data: { url: string; metrics: { comments: number } }[] }>(`/instagram/channel-posts?handle=${instagramHandle}&limit=20`);
  postUrl = posts.json.data.find((post) => post.metrics.comments > 0)!.url;
});
afterAll(() => emulator.close());

/** Calls, then checks the charge against the price table and the ledger row of that request. */
async function expectCharged(path: string, endpoint: keyof typeof prices, units: number) {
  const result = await emulator.call<{ request_id: string }>(path);
  expect(result.status, result.text).toBe(200);
  expect(result.json.request_id).toMatch(/^req_[A-Za-z0-9]+$/);
  expect(Number(result.headers['x-credits-charged'])).toBe(units * prices[endpoint]);
  const rows = (await emulator.ledger(emulator.apiKey)).filter((row) => row.request_id === result.json.request_id);
  expect(rows).toEqual([expect.objectContaining({ endpoint, units, credits: units * prices[endpoint], api_key: emulator.apiKey })]);
  return result;
}

describe('every content endpoint answers the spec shape and charges units × price', () => {
  it('tiktok transcript, summary and stats', async () => {
    const transcript = await expectCharged(`/tiktok/transcript?url=${q(tiktokVideoUrl)}`, 'tiktok/transcript', 1);
    const parsed = envelopeSchema(transcriptSchema).parse(transcript.json);
    expect(parsed.data.source).toBe('subtitles');
    expect(parsed.data.segments.length).toBeGreaterThan(0);
    expect(parsed.data.text).toBe(parsed.data.segments.map((segment) => segment.text).join(' '));
    const summary = await expectCharged(`/tiktok/summary?url=${q(tiktokVideoUrl)}`, 'tiktok/summary', 1);
    expect(envelopeSchema(summarySchema).parse(summary.json).data.summary).toContain(parsed.data.segments[0]!.text);
    const stats = await expectCharged(`/tiktok/stats?url=${q(tiktokVideoUrl)}`, 'tiktok/stats', 1);
    const statsData = envelopeSchema(statsSchema).parse(stats.json).data;
    expect(statsData.url).toBe(tiktokVideoUrl);
    expect(statsData.author.handle).toBe(tiktokHandle);
  });

  it('tiktok comments, channel-stats, channel-videos, search and hashtag-search', async () => {
    const comments = await expectCharged(`/tiktok/comments?url=${q(tiktokVideoUrl)}&limit=1`, 'tiktok/comments', 1);
    const commentPage = listEnvelopeSchema(commentSchema).parse(comments.json);
    expect(commentPage.meta).toMatchObject({ count: 1, limit: 1 });
    expect(commentPage.meta.item).toBeUndefined();
    const profile = await expectCharged(`/tiktok/channel-stats?handle=${tiktokHandle}`, 'tiktok/channel-stats', 1);
    expect(envelopeSchema(channelProfileSchema).parse(profile.json).data.handle).toBe(tiktokHandle);
    const videos = await expectCharged(`/tiktok/channel-videos?handle=${tiktokHandle}`, 'tiktok/channel-videos', 20);
    const videoPage = listEnvelopeSchema(channelItemSchema).parse(videos.json);
    expect(videoPage.meta).toMatchObject({ count: 20, limit: 20, item: 'video', has_more: true });
    expect(videoPage.data.every((item) => item.metrics.views !== undefined)).toBe(true);
    const search = await expectCharged(`/tiktok/search?query=sourdough&limit=7`, 'tiktok/search', 7);
    const searchPage = listEnvelopeSchema(searchResultSchema).parse(search.json);
    expect(searchPage.meta.item).toBe('result');
    expect(searchPage.data.every((result) => result.caption.includes('sourdough'))).toBe(true);
    const hashtag = await expectCharged(`/tiktok/hashtag-search?query=${q('#booktok')}&limit=5`, 'tiktok/hashtag-search', 5);
    expect(listEnvelopeSchema(searchResultSchema).parse(hashtag.json).data.every((result) => result.caption.includes('#booktok'))).toBe(true);
  });

  it('hashtag-search takes its query with or without #', async () => {
    const withHash = await emulator.call<{ data: { id: string }[] }>(`/tiktok/hashtag-search?query=${q('#latteart')}&limit=10`);
    const without = await emulator.call<{ data: { id: string }[] }>(`/tiktok/hashtag-search?query=latteart&limit=10`);
    expect(withHash.json.data.length).toBe(10);
    expect(without.json.data.map((item) => item.id)).toEqual(withHash.json.data.map((item) => item.id));
  });

  it('instagram transcript and summary of a reel, stats of a post, comments', async () => {
    const transcript = await expectCharged(`/instagram/transcript?url=${q(reelUrl)}`, 'instagram/transcript', 1);
    expect(envelopeSchema(transcriptSchema).parse(transcript.json).data.source).toBe('audio');
    await expectCharged(`/instagram/summary?url=${q(reelUrl)}`, 'instagram/summary', 1);
    const stats = await expectCharged(`/instagram/stats?url=${q(postUrl)}`, 'instagram/stats', 1);
    expect(envelopeSchema(statsSchema).parse(stats.json).data.url).toBe(postUrl);
    await expectCharged(`/instagram/stats?url=${q(reelUrl)}`, 'instagram/stats', 1);
    const comments = await expectCharged(`/instagram/comments?url=${q(postUrl)}&limit=1`, 'instagram/comments', 1);
    listEnvelopeSchema(commentSchema).parse(comments.json);
  });

  it('instagram channel-stats, channel-posts, channel-reels and reels-search', async () => {
    await expectCharged(`/instagram/channel-stats?handle=${instagramHandle}`, 'instagram/channel-stats', 1);
    const posts = await expectCharged(`/instagram/channel-posts?handle=${instagramHandle}&limit=3`, 'instagram/channel-posts', 3);
    const postPage = listEnvelopeSchema(channelItemSchema).parse(posts.json);
    expect(postPage.meta.item).toBe('post');
    // channel-posts items carry likes and comments but no views (spec: views on videos and reels only)
    expect(postPage.data.every((item) => item.metrics.views === undefined && item.url.includes('/p/'))).toBe(true);
    const reels = await expectCharged(`/instagram/channel-reels?handle=${instagramHandle}&limit=4`, 'instagram/channel-reels', 4);
    const reelPage = listEnvelopeSchema(channelItemSchema).parse(reels.json);
    expect(reelPage.meta.item).toBe('reel');
    expect(reelPage.data.every((item) => item.metrics.views !== undefined && item.url.includes('/reel/'))).toBe(true);
    const search = await expectCharged(`/instagram/reels-search?query=${q('latte art')}&limit=6`, 'instagram/reels-search', 6);
    const results = listEnvelopeSchema(searchResultSchema).parse(search.json).data;
    expect(results.every((result) => result.url.includes('/reel/') && result.caption.includes('latte art'))).toBe(true);
  });

  it('instagram download signs a media URL that serves the file for at most an hour', async () => {
    const download = await expectCharged(`/instagram/download?url=${q(reelUrl)}`, 'instagram/download', 1);
    const data = envelopeSchema(downloadSchema).parse(download.json).data;
    expect(data.mime_type).toBe('video/mp4');
    expect(data.warning).toMatch(/expires/i);
    const lifetime = Date.parse(data.expires_at) - Date.now();
    expect(lifetime).toBeLessThanOrEqual(3_600_000);
    expect(lifetime).toBeGreaterThan(3_500_000);
    const media = await fetch(data.media_url);
    expect(media.status).toBe(200);
    expect(media.headers.get('content-type')).toBe('video/mp4');
    expect((await media.arrayBuffer()).byteLength).toBeGreaterThan(0);
    const photo = envelopeSchema(downloadSchema).parse((await emulator.call(`/instagram/download?url=${q(postUrl)}`)).json).data;
    expect(photo.mime_type).toBe('image/jpeg');
  });

  it('an empty search is a page of nothing, charged nothing', async () => {
    const result = await emulator.call<{ data: unknown[]; meta: { has_more: boolean; count: number } }>(`/tiktok/search?query=${q('no such topic here')}`);
    expect(result.status).toBe(200);
    expect(result.json.data).toEqual([]);
    expect(result.json.meta).toMatchObject({ count: 0, has_more: false });
    expect(result.headers['x-credits-charged']).toBe('0');
  });

  it('every endpoint of the catalog answers exactly the members of its resource in the one table (RESOURCE_SCHEMAS)', async () => {
    const queries: Record<string, string> = { search: 'yoga', 'hashtag-search': '#booktok', 'reels-search': 'latte art' };
    const paramOf = (spec: EndpointSpec) => {
      if (spec.param === 'handle') return spec.platform === 'tiktok' ? tiktokHandle : instagramHandle;
      if (spec.param === 'query') return queries[spec.name]!;
      return spec.platform === 'tiktok' ? tiktokVideoUrl : reelUrl;
    };
    const answered = new Set<string>();
    for (const spec of ENDPOINTS) {
      const result = await emulator.call<{ data: unknown }>(`/${spec.platform}/${spec.name}?${spec.param}=${q(paramOf(spec))}${spec.shape === 'list' ? '&limit=3' : ''}`);
      // TikTok's downloads are unavailable (the spec says so); instagram's answer the download resource.
      if (endpointKey(spec) === 'tiktok/download') continue;
      expect(result.status, `${endpointKey(spec)}: ${result.text}`).toBe(200);
      const schema = RESOURCE_SCHEMAS[spec.name];
      const resources = spec.shape === 'list' ? (result.json.data as unknown[]) : [result.json.data];
      expect(resources.length, endpointKey(spec)).toBeGreaterThan(0);
      for (const resource of resources) {
        // Every member the resource requires, and none it does not name.
        schema.parse(resource);
        expect(memberPaths(resource).filter((path) => !schemaPaths(schema).includes(path)), endpointKey(spec)).toEqual([]);
      }
      answered.add(spec.name);
    }
    expect([...answered].sort()).toEqual(Object.keys(RESOURCE_SCHEMAS).sort());
  });

  it('credit headers track the balance exactly', async () => {
    const before = await emulator.call(`/tiktok/channel-stats?handle=${tiktokHandle}`);
    const after = await emulator.call(`/tiktok/stats?url=${q(tiktokVideoUrl)}`);
    expect(Number(after.headers['x-credits-remaining'])).toBe(Number(before.headers['x-credits-remaining']) - prices['tiktok/stats']);
  });
});

/** The member paths of a JSON value (lists read past): `$.metrics.views`. */
function memberPaths(value: unknown, prefix = '$'): string[] {
  if (Array.isArray(value)) return [...new Set(value.flatMap((element) => memberPaths(element, prefix)))];
  if (value === null || typeof value !== 'object') return [];
  return Object.entries(value).flatMap(([name, member]) => [`${prefix}.${name}`, ...memberPaths(member, `${prefix}.${name}`)]);
}

/** The member paths a zod schema names, as memberPaths says them. */
function schemaPaths(schema: z.ZodType, prefix = '$'): string[] {
  if (schema instanceof z.ZodOptional || schema instanceof z.ZodNullable) return schemaPaths(schema.unwrap() as z.ZodType, prefix);
  if (schema instanceof z.ZodArray) return schemaPaths(schema.element as z.ZodType, prefix);
  if (!(schema instanceof z.ZodObject)) return [];
  return Object.entries(schema.shape as Record<string, z.ZodType>).flatMap(([name, member]) => [`${prefix}.${name}`, ...schemaPaths(member, `${prefix}.${name}`)]);
}
