/**
 * A small harvest, done by hand against the emulator: real client calls, each page landed as
 * the engine lands it. Returns what the warehouse should hold afterwards.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { landingOfCall } from '../../activities/page-landing.js';
import type { CallReport, SocialApiClient } from '../../src/api/client.js';
import type { Landing } from '../../src/store/landing.js';
import { LocalStore } from '../../src/store/store.js';
import { clientFor } from './client.js';
import type { TestEmulator } from './emulator.js';

export interface SampleExpectation {
  itemIds: Set<string>;
  metricRows: number;
  apiCalls: number;
  credits: number;
  searchHits: number;
  comments: number;
  landings: number;
}

/** The sample harvest landed by a client of its own, in `dataDir` (a new temporary one by default). */
export async function landedSample(emulator: TestEmulator, runId: string, dataDir = mkdtempSync(join(tmpdir(), 'sample-')), options: { ended?: boolean } = {}): Promise<{ dataDir: string; expected: SampleExpectation }> {
  const client = clientFor(emulator);
  try {
    return { dataDir, expected: await landSampleHarvest(client, emulator, dataDir, runId, options) };
  } finally {
    await client.close();
  }
}

export async function landSampleHarvest(client: SocialApiClient, emulator: TestEmulator, dataDir: string, runId: string, options: { fresh?: boolean; ended?: boolean } = {}): Promise<SampleExpectation> {
  const catalog = await emulator.catalog();
  const handle = catalog.tiktok.handles[0]!;
  const expectation: SampleExpectation = { itemIds: new Set(), metricRows: 0, apiCalls: 0, credits: 0, searchHits: 0, comments: 0, landings: 0 };
  const fresh = options.fresh ?? false;
  // Landed as the engine lands them: into the run's segment, through the store.
  const store = new LocalStore(dataDir);
  const writes: Promise<string>[] = [];
  const landInBackground = (landing: Landing) => writes.push(store.writeLanding(landing));
  const land = (target: string, page: number, params: Record<string, string>, result: CallReport, data: unknown, rankOffset?: number) => {
    landInBackground(landingOfCall({ runId, harvest: 'sample', target, page, params, rankOffset }, result, data));
    expectation.apiCalls++;
    expectation.credits += result.creditsCharged;
    expectation.landings++;
  };

  let page = 0;
  for await (const result of client.pages('tiktok', 'channel-videos', { handle, fresh }, { maxItems: 60, pageSize: 20 })) {
    land(`channel:tiktok:${handle}:videos`, ++page, { handle }, result, result.items);
    for (const item of result.items) expectation.itemIds.add(item.id);
    expectation.metricRows += result.items.length;
  }
  page = 0;
  let offset = 0;
  for await (const result of client.pages('tiktok', 'search', { query: 'yoga', fresh }, { maxItems: 50, pageSize: 25 })) {
    land('search:tiktok:keyword:yoga', ++page, { query: 'yoga' }, result, result.items, offset);
    offset += result.items.length;
    for (const item of result.items) expectation.itemIds.add(item.id);
    expectation.metricRows += result.items.length;
    expectation.searchHits += result.items.length;
  }
  const reels = await client.page('instagram', 'channel-reels', { handle: catalog.instagram.handles[0]!, limit: 10, fresh });
  land(`channel:instagram:${catalog.instagram.handles[0]}:reels`, 1, { handle: catalog.instagram.handles[0]! }, reels, reels.items);
  for (const item of reels.items) expectation.itemIds.add(item.id);
  expectation.metricRows += reels.items.length;

  const profile = await client.get('tiktok', 'channel-stats', { handle, fresh });
  land(`channel:tiktok:${handle}:profile`, 1, { handle }, profile, profile.data);
  const video = [...expectation.itemIds][0]!;
  const videoUrl = `https://www.tiktok.com/@${handle}/video/${video}`;
  const stats = await client.get('tiktok', 'stats', { url: videoUrl, fresh });
  land(`item:tiktok:${video}:stats`, 1, { url: videoUrl }, stats, stats.data);
  expectation.metricRows += 1;
  const comments = await client.page('tiktok', 'comments', { url: videoUrl, limit: 10, fresh });
  land(`item:tiktok:${video}:comments`, 1, { url: videoUrl }, comments, comments.items);
  expectation.comments += comments.items.length;
  const transcript = await client.get('tiktok', 'transcript', { url: videoUrl, fresh });
  land(`item:tiktok:${video}:transcript`, 1, { url: videoUrl }, transcript, transcript.data);
  const summary = await client.get('tiktok', 'summary', { url: videoUrl, fresh });
  land(`item:tiktok:${video}:summary`, 1, { url: videoUrl }, summary, summary.data);
  const download = await client.get('instagram', 'download', { url: reels.items[0]!.url, fresh });
  land(`item:instagram:${reels.items[0]!.id}:download`, 1, { url: reels.items[0]!.url }, download, download.data);
  // A run still going (`ended: false`) lands no end: its segments stay in the data directory after a load.
  if (options.ended ?? true) {
    landInBackground({ format: 1, kind: 'run', run_id: runId, harvest: 'sample', seq: 1, status: 'completed', started_at: new Date().toISOString(), finished_at: new Date().toISOString(), credits_spent: expectation.credits, items_landed: expectation.itemIds.size });
    expectation.landings++;
  }
  await Promise.all(writes);
  return expectation;
}

